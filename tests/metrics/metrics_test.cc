// Metrics: every render is checked by the exposition validator, and values are checked exactly
// after known recordings.
#include "metrics/metrics.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <string>
#include <vector>

#include "metrics/prometheus_validator.h"
#include "sluice/stats_sink.h"
#include "sluice/store.h"

namespace sluice::server {
namespace {

using std::chrono::microseconds;
using std::chrono::milliseconds;
using std::chrono::seconds;
using test::ParseExposition;

// Renders, asserts the text is valid, and returns it.
std::string ValidRender(const Metrics& m) {
  const std::string text = m.Render();
  const auto e = ParseExposition(text);
  for (const auto& error : e.errors) ADD_FAILURE() << error;
  return text;
}

bool HasLine(const std::string& text, const std::string& line) {
  return text.starts_with(line + "\n") || text.find("\n" + line + "\n") != std::string::npos;
}

#define EXPECT_LINE(text, line) EXPECT_TRUE(HasLine(text, line)) << "missing: " << (line)
#define EXPECT_NO_LINE(text, line) EXPECT_FALSE(HasLine(text, line)) << "unexpected: " << (line)

TEST(Metrics, ResultNames) {
  EXPECT_EQ(DecisionResultName(DecisionResult::kOk), "ok");
  EXPECT_EQ(DecisionResultName(DecisionResult::kOverLimit), "over_limit");
  EXPECT_EQ(DecisionResultName(DecisionResult::kShadowOverLimit), "shadow_over_limit");
  EXPECT_EQ(DecisionResultName(DecisionResult::kSoftOverLimit), "soft_over_limit");
  EXPECT_EQ(DecisionResultName(DecisionResult::kFailedOpen), "failed_open");
  EXPECT_EQ(DecisionResultName(DecisionResult::kFailedClosed), "failed_closed");
}

TEST(Metrics, EmptyRenderDeclaresEveryFamily) {
  Metrics m;
  const std::string text = ValidRender(m);
  for (const char* family :
       {"sluice_decisions_total counter", "sluice_near_limit_total counter",
        "sluice_limit_utilization histogram", "sluice_decision_duration_seconds histogram",
        "sluice_store_errors_total counter", "sluice_config_reloads_total counter"}) {
    EXPECT_LINE(text, std::string("# TYPE ") + family);
  }
  EXPECT_LINE(text, "sluice_store_errors_total 0");
  EXPECT_LINE(text, "sluice_config_reloads_total{result=\"success\"} 0");
  EXPECT_LINE(text, "sluice_config_reloads_total{result=\"failure\"} 0");
  EXPECT_LINE(text, "sluice_decision_duration_seconds_count 0");
  // No store source: the store families are left out, not shown as 0.
  EXPECT_EQ(text.find("sluice_store_keys"), std::string::npos);
}

TEST(Metrics, DecisionCountersReadExactly) {
  Metrics m;
  for (int i = 0; i < 3; ++i) m.RecordDecision("api", "per_user", DecisionResult::kOk, 0.1);
  m.RecordDecision("api", "per_user", DecisionResult::kOverLimit, 1.0);
  m.RecordDecision("api", "global", DecisionResult::kFailedClosed, 0);
  const std::string text = ValidRender(m);
  const std::string s = "sluice_decisions_total{domain=\"api\",limit=\"per_user\",result=";
  EXPECT_LINE(text, s + "\"ok\"} 3");
  EXPECT_LINE(text, s + "\"over_limit\"} 1");
  EXPECT_LINE(text, s + "\"shadow_over_limit\"} 0");
  EXPECT_LINE(text, s + "\"soft_over_limit\"} 0");
  EXPECT_LINE(text, s + "\"failed_open\"} 0");
  EXPECT_LINE(text, s + "\"failed_closed\"} 0");
  EXPECT_LINE(text,
              "sluice_decisions_total{domain=\"api\",limit=\"global\",result=\"failed_closed\"} 1");
  // Series in order: (api, global) before (api, per_user).
  EXPECT_LT(text.find("limit=\"global\""), text.find("limit=\"per_user\""));
}

TEST(Metrics, NearLimitCountsAllowedDecisionsAtOrAboveTheRatio) {
  Metrics m(0.8);
  m.RecordDecision("d", "l", DecisionResult::kOk, 0.85);              // counts
  m.RecordDecision("d", "l", DecisionResult::kOk, 0.75);              // below
  m.RecordDecision("d", "l", DecisionResult::kOk, 0.8);               // at the ratio: counts
  m.RecordDecision("d", "l", DecisionResult::kOk, 8.0 / 10.0);        // the same 0.8
  m.RecordDecision("d", "l", DecisionResult::kOverLimit, 1.0);        // rejected: not "near"
  m.RecordDecision("d", "l", DecisionResult::kFailedClosed, 0.9);     // rejected
  m.RecordDecision("d", "l", DecisionResult::kShadowOverLimit, 1.0);  // allowed: counts
  m.RecordDecision("d", "l", DecisionResult::kSoftOverLimit, 1.0);    // allowed: counts
  m.RecordDecision("d", "l", DecisionResult::kFailedOpen, 0.95);      // allowed: counts
  m.RecordDecision("d", "other", DecisionResult::kOk, 0.75);
  const std::string text = ValidRender(m);
  EXPECT_LINE(text, "sluice_near_limit_total{domain=\"d\",limit=\"l\"} 6");
  EXPECT_LINE(text, "sluice_near_limit_total{domain=\"d\",limit=\"other\"} 0");
  EXPECT_LINE(text,
              "# HELP sluice_near_limit_total Allowed decisions with at least 0.8 of the "
              "limit used.");
}

TEST(Metrics, NearLimitRatioIsConfigurableAndSanitized) {
  Metrics m(0.5);
  m.RecordDecision("d", "l", DecisionResult::kOk, 0.6);
  EXPECT_LINE(ValidRender(m), "sluice_near_limit_total{domain=\"d\",limit=\"l\"} 1");
  EXPECT_EQ(Metrics(1.5).near_limit_ratio(), 1.0);
  EXPECT_EQ(Metrics(0).near_limit_ratio(), 0.8);
  EXPECT_EQ(Metrics(NAN).near_limit_ratio(), 0.8);
}

TEST(Metrics, UtilizationLandsInTheRightCumulativeBuckets) {
  Metrics m;
  m.RecordDecision("d", "l", DecisionResult::kOk, 0.85);
  const std::string one = ValidRender(m);
  const std::string b = "sluice_limit_utilization_bucket{domain=\"d\",limit=\"l\",le=";
  for (const char* le : {"0.1", "0.2", "0.3", "0.4", "0.5", "0.6", "0.7", "0.8"}) {
    EXPECT_LINE(one, b + "\"" + le + "\"} 0");
  }
  for (const char* le : {"0.9", "0.95", "1", "+Inf"}) EXPECT_LINE(one, b + "\"" + le + "\"} 1");
  EXPECT_LINE(one, "sluice_limit_utilization_sum{domain=\"d\",limit=\"l\"} 0.85");
  EXPECT_LINE(one, "sluice_limit_utilization_count{domain=\"d\",limit=\"l\"} 1");

  m.RecordDecision("d", "l", DecisionResult::kOk, 0.8);         // on a bound: le is inclusive
  m.RecordDecision("d", "l", DecisionResult::kOk, 0.0);         // the first bucket
  m.RecordDecision("d", "l", DecisionResult::kOk, -0.5);        // clamped to 0
  m.RecordDecision("d", "l", DecisionResult::kOk, NAN);         // unknown: 0
  m.RecordDecision("d", "l", DecisionResult::kOverLimit, 3.0);  // clamped to 1
  const std::string all = ValidRender(m);
  EXPECT_LINE(all, b + "\"0.1\"} 3");
  EXPECT_LINE(all, b + "\"0.7\"} 3");
  EXPECT_LINE(all, b + "\"0.8\"} 4");
  EXPECT_LINE(all, b + "\"0.9\"} 5");
  EXPECT_LINE(all, b + "\"0.95\"} 5");
  EXPECT_LINE(all, b + "\"1\"} 6");
  EXPECT_LINE(all, b + "\"+Inf\"} 6");
  EXPECT_LINE(all, "sluice_limit_utilization_sum{domain=\"d\",limit=\"l\"} 2.65");
  EXPECT_LINE(all, "sluice_limit_utilization_count{domain=\"d\",limit=\"l\"} 6");
}

TEST(Metrics, DurationHistogram) {
  Metrics m;
  m.RecordDuration(microseconds(30));  // le 0.00005 and up
  m.RecordDuration(microseconds(10));  // on the first bound
  m.RecordDuration(milliseconds(2));   // le 0.0025 and up
  m.RecordDuration(seconds(2));        // +Inf only
  m.RecordDuration(microseconds(-5));  // a clock step back: 0
  const std::string text = ValidRender(m);
  const std::string b = "sluice_decision_duration_seconds_bucket{le=";
  EXPECT_LINE(text, b + "\"0.00001\"} 2");
  EXPECT_LINE(text, b + "\"0.000025\"} 2");
  EXPECT_LINE(text, b + "\"0.00005\"} 3");
  EXPECT_LINE(text, b + "\"0.001\"} 3");
  EXPECT_LINE(text, b + "\"0.0025\"} 4");
  EXPECT_LINE(text, b + "\"1\"} 4");
  EXPECT_LINE(text, b + "\"+Inf\"} 5");
  EXPECT_LINE(text, "sluice_decision_duration_seconds_count 5");
  EXPECT_LINE(text, "sluice_decision_duration_seconds_sum 2.00204");
}

// Families as the store layers define them (src/store/...): metrics renders what it is given.
constexpr StatFamily kBySource{"sluice_decisions_by_source_total", StatKind::kCounter,
                               "Limit decisions by where they were taken."};
constexpr StatFamily kPending{"sluice_batched_pending_hits", StatKind::kGauge, "Hits not sent."};
constexpr StatFamily kLimitOverAdmitted{"sluice_batched_limit_over_admitted_hits_total",
                                        StatKind::kCounter, "Over-admitted hits of a limit."};
constexpr StatFamily kShareUnits{"sluice_region_share_units", StatKind::kGauge, "The part."};
constexpr StatFamily kSyncAge{"sluice_region_global_sync_age_seconds", StatKind::kGauge,
                              "Seconds since the last grant."};
constexpr StatFamily kLeaseEvents{"sluice_lease_events_total", StatKind::kCounter, "Leases."};
constexpr StatFamily kUnitsHeld{"sluice_lease_units_held", StatKind::kGauge, "Units held."};

using Labels = std::vector<StatLabel>;

// How many times `text` contains `part`.
size_t Count(const std::string& text, const std::string& part) {
  size_t n = 0;
  for (size_t at = text.find(part); at != std::string::npos; at = text.find(part, at + 1)) ++n;
  return n;
}

TEST(Metrics, StoreErrorsReloadsAndGauges) {
  Metrics m;
  m.RecordStoreError();
  m.RecordStoreError();
  m.RecordReload(true);
  m.RecordReload(true);
  m.RecordReload(false);
  uint64_t keys = 41;
  m.SetStatsSource([&](StatsSink& sink) {
    ReportStoreStats({.keys = ++keys, .evictions = 7, .evicted_replenished = 5}, sink);
  });
  const std::string text = ValidRender(m);
  EXPECT_LINE(text, "sluice_store_errors_total 2");
  EXPECT_LINE(text, "sluice_config_reloads_total{result=\"success\"} 2");
  EXPECT_LINE(text, "sluice_config_reloads_total{result=\"failure\"} 1");
  EXPECT_LINE(text, "# HELP sluice_store_keys Counters held by the store.");
  EXPECT_LINE(text, "# TYPE sluice_store_keys gauge");
  EXPECT_LINE(text, "sluice_store_keys 42");  // sampled at render time
  EXPECT_LINE(text, "# TYPE sluice_store_evictions_total counter");
  EXPECT_LINE(text, "sluice_store_evictions_total{reason=\"lru\"} 7");
  EXPECT_LINE(text, "sluice_store_evictions_total{reason=\"replenished\"} 5");
  EXPECT_LINE(ValidRender(m), "sluice_store_keys 43");
  EXPECT_EQ(text.find("sluice_store_bytes"), std::string::npos) << "no bound: no byte gauges";
  m.SetStatsSource([](StatsSink& sink) {
    ReportStoreStats({.keys = 3, .bytes = 4096, .max_bytes = 65536}, sink);
  });
  const std::string bounded = ValidRender(m);
  EXPECT_LINE(bounded, "# TYPE sluice_store_bytes gauge");
  EXPECT_LINE(bounded, "sluice_store_bytes 4096");
  EXPECT_LINE(bounded, "# TYPE sluice_store_max_bytes gauge");
  EXPECT_LINE(bounded, "sluice_store_max_bytes 65536");
  m.SetStatsSource(nullptr);
  EXPECT_EQ(ValidRender(m).find("sluice_store_keys"), std::string::npos);
}

// Several layers add to one series: the leased layer takes its local decisions back from what
// the batched layer above it counted as passed on to Redis. Each family is shown once, its
// samples together, in the order first reported; a counter is never shown below 0.
TEST(Metrics, ReportedSamplesOfOneSeriesAddUp) {
  Metrics m;
  m.SetStatsSource([](StatsSink& sink) {
    const Labels local = {{"source", "local"}};
    const Labels redis = {{"source", "redis"}};
    const Labels cache = {{"source", "cache"}};
    sink.Add(kBySource, local, 90);   // leased: its units' decisions...
    sink.Add(kBySource, redis, -90);  // ...were counted as passed on by the batched layer
    sink.Add(kPending, {}, 12);
    sink.Add(kBySource, local, 5000);  // batched: its views' decisions, and the rest
    sink.Add(kBySource, redis, 100 + 90);
    sink.Add(kBySource, cache, 900);  // the over-limit cache
  });
  const std::string text = ValidRender(m);
  EXPECT_LINE(text, "sluice_decisions_by_source_total{source=\"local\"} 5090");
  EXPECT_LINE(text, "sluice_decisions_by_source_total{source=\"redis\"} 100");
  EXPECT_LINE(text, "sluice_decisions_by_source_total{source=\"cache\"} 900");
  EXPECT_LINE(text, "sluice_batched_pending_hits 12");
  EXPECT_EQ(Count(text, "# TYPE sluice_decisions_by_source_total counter"), 1u);
  EXPECT_EQ(Count(text, "# HELP sluice_decisions_by_source_total "), 1u);
  EXPECT_LT(text.find("source=\"cache\""), text.find("sluice_batched_pending_hits 12"))
      << "a family's samples together, before the next family";
  m.SetStatsSource([](StatsSink& sink) {
    sink.Add(kBySource, Labels{{"source", "redis"}}, -3);  // a layer took back more than seen
  });
  EXPECT_LINE(ValidRender(m), "sluice_decisions_by_source_total{source=\"redis\"} 0");
}

// Per-limit families carry the caller's labels first, in order, then the layer's own; values
// that are not integers (ages) are shown as doubles, integers as integers however large.
TEST(Metrics, ReportedLabelsAndValues) {
  Metrics m;
  m.SetStatsSource([](StatsSink& sink) {
    const Labels limit = {{"domain", "api"}, {"limit", "api.api_key"}};
    Labels taken = limit;
    taken.push_back({"event", "taken"});
    sink.Add(kLeaseEvents, taken, 7);
    sink.Add(kUnitsHeld, limit, 450);
    sink.Add(kLimitOverAdmitted, Labels{{"domain", "api"}, {"limit", "api.per_ip"}},
             18446744073709549568.0);  // the largest double below 2^64
    sink.Add(kShareUnits, Labels{{"domain", "world"}, {"limit", "we\"ird"}}, 812);
    sink.Add(kSyncAge, {}, 0.25);
  });
  const std::string text = ValidRender(m);
  EXPECT_LINE(text, "# TYPE sluice_lease_events_total counter");
  EXPECT_LINE(text,
              "sluice_lease_events_total{domain=\"api\",limit=\"api.api_key\",event=\"taken\"} 7");
  EXPECT_LINE(text, "# TYPE sluice_lease_units_held gauge");
  EXPECT_LINE(text, "sluice_lease_units_held{domain=\"api\",limit=\"api.api_key\"} 450");
  EXPECT_LINE(text,
              "sluice_batched_limit_over_admitted_hits_total{domain=\"api\",limit=\"api.per_ip\"} "
              "18446744073709549568");
  EXPECT_LINE(text, "sluice_region_share_units{domain=\"world\",limit=\"we\\\"ird\"} 812");
  EXPECT_LINE(text, "# HELP sluice_region_global_sync_age_seconds Seconds since the last grant.");
  EXPECT_LINE(text, "sluice_region_global_sync_age_seconds 0.25");
  EXPECT_LT(text.find("sluice_limit_utilization"), text.find("sluice_lease_events_total"));
  EXPECT_LT(text.find("sluice_region_global_sync_age_seconds"),
            text.find("sluice_config_reloads_total"))
      << "the store's families where they always were: before the reloads";
}

TEST(Metrics, LabelValuesAreEscapedAndRoundTrip) {
  Metrics m;
  const std::string domain = "we\"ird\\dom\nain";
  const std::string limit = "caf\xC3\xA9 \xFF";  // a stray byte from a detailed_metric value
  m.RecordDecision(domain, limit, DecisionResult::kOk, 0.5);
  const std::string text = m.Render();
  EXPECT_NE(text.find(R"(domain="we\"ird\\dom\nain",limit="caf)"), std::string::npos);
  const auto e = ParseExposition(text);
  EXPECT_TRUE(e.errors.empty());
  const auto v = test::SampleValue(
      e, "sluice_decisions_total",
      {{"domain", domain}, {"limit", "caf\xC3\xA9 \xEF\xBF\xBD"}, {"result", "ok"}});
  ASSERT_TRUE(v.has_value());
  EXPECT_EQ(*v, 1);
}

TEST(Metrics, SeriesBeyondTheCapGoToOther) {
  Metrics m;
  for (size_t i = 0; i < Metrics::kMaxSeries; ++i) {
    m.RecordDecision("d", "limit" + std::to_string(i), DecisionResult::kOk, 0);
  }
  m.RecordDecision("d", "limit0", DecisionResult::kOk, 0);  // existing series still count
  m.RecordDecision("d", "one_too_many", DecisionResult::kOverLimit, 1);
  m.RecordDecision("d", "two_too_many", DecisionResult::kOverLimit, 1);
  // Each further domain gets one _other series, up to kMaxOtherSeries of them...
  for (size_t i = 1; i < Metrics::kMaxOtherSeries; ++i) {
    m.RecordDecision("e" + std::to_string(i), "x", DecisionResult::kOk, 0);
  }
  // ...and then everything shares domain="_other",limit="_other".
  m.RecordDecision("late", "x", DecisionResult::kOk, 0);
  m.RecordDecision("later", "y", DecisionResult::kOk, 0);

  const std::string text = m.Render();  // too large for the regex validator in a sanitizer run
  const std::string s = "sluice_decisions_total{domain=";
  EXPECT_LINE(text, s + "\"d\",limit=\"limit0\",result=\"ok\"} 2");
  EXPECT_LINE(text, s + "\"d\",limit=\"_other\",result=\"over_limit\"} 2");
  EXPECT_EQ(text.find("too_many"), std::string::npos);
  EXPECT_LINE(text, s + "\"e1\",limit=\"_other\",result=\"ok\"} 1");
  EXPECT_LINE(text, s + "\"_other\",limit=\"_other\",result=\"ok\"} 2");
  EXPECT_EQ(text.find("\"late"), std::string::npos);

  size_t series = 0;
  for (size_t p = 0; (p = text.find("\nsluice_near_limit_total{", p)) != std::string::npos; ++p) {
    ++series;
  }
  EXPECT_EQ(series, Metrics::kMaxSeries + Metrics::kMaxOtherSeries + 1);
}

TEST(Metrics, HeavyHittersPerDomain) {
  Metrics m(0.8, 3);
  EXPECT_TRUE(m.Top("api", 10).empty());
  m.RecordHeavyHitter("api", "ignored", false, false);  // neither: not a heavy-hitter event
  EXPECT_TRUE(m.Top("api", 10).empty());
  for (int i = 0; i < 5; ++i) m.RecordHeavyHitter("api", "user#alice", true, false);
  for (int i = 0; i < 2; ++i) m.RecordHeavyHitter("api", "user#bob", false, true);
  m.RecordHeavyHitter("api", "user#carol", true, true);
  m.RecordHeavyHitter("other", "user#zed", true, false);
  auto top = m.Top("api", 2);
  ASSERT_EQ(top.size(), 2u);
  EXPECT_EQ(top[0].identity, "user#alice");
  EXPECT_EQ(top[0].rejected, 5u);
  EXPECT_EQ(top[0].near_limit, 0u);
  EXPECT_EQ(top[0].error, 0u);
  // bob and carol both have 2: ties by identity.
  EXPECT_EQ(top[1].identity, "user#bob");
  EXPECT_EQ(top[1].near_limit, 2u);
  // A fourth identity takes over a smallest counter, with that counter as its error.
  m.RecordHeavyHitter("api", "user#dave", true, false);
  top = m.Top("api", 10);
  ASSERT_EQ(top.size(), 3u);
  EXPECT_EQ(top[0].identity, "user#alice");
  EXPECT_EQ(top[1].identity, "user#dave");
  EXPECT_EQ(top[1].rejected, 1u);
  EXPECT_EQ(top[1].error, 2u);
  ASSERT_EQ(m.Top("other", 10).size(), 1u);
  EXPECT_EQ(m.Top("other", 10)[0].identity, "user#zed");
}

TEST(Metrics, LongIdentitiesAreBoundedButStayDistinct) {
  Metrics m;
  const std::string prefix(300, 'k');
  m.RecordHeavyHitter("d", prefix + "-one", true, false);
  m.RecordHeavyHitter("d", prefix + "-two", true, false);
  m.RecordHeavyHitter("d", prefix + "-two", true, false);
  // A multi-byte character across the cut is not split.
  m.RecordHeavyHitter("d", std::string(238, 'u') + "\xE2\x82\xAC" + std::string(100, 'v'), true,
                      false);
  auto top = m.Top("d", 10);
  ASSERT_EQ(top.size(), 3u);
  EXPECT_EQ(top[0].rejected, 2u);
  for (const auto& h : top) {
    EXPECT_LE(h.identity.size(), 256u);
    EXPECT_NE(h.identity.find('~'), std::string::npos);
  }
  EXPECT_NE(top[0].identity, top[1].identity);
  EXPECT_TRUE(top[2].identity.starts_with(std::string(238, 'u') + "~"));
}

TEST(Metrics, HeavyHitterDomainsBeyondTheCapShareOther) {
  Metrics m(0.8, 4);
  for (size_t i = 0; i < Metrics::kMaxTopDomains; ++i) {
    m.RecordHeavyHitter("d" + std::to_string(i), "x", true, false);
  }
  m.RecordHeavyHitter("late", "y", true, false);
  m.RecordHeavyHitter("later", "z", false, true);
  EXPECT_TRUE(m.Top("late", 10).empty());
  EXPECT_EQ(m.Top("_other", 10).size(), 2u);
  EXPECT_EQ(m.Top("d0", 10).size(), 1u);
}

}  // namespace
}  // namespace sluice::server
