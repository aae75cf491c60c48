#include "metrics/metrics.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <cmath>
#include <functional>
#include <mutex>
#include <tuple>
#include <utility>

#include "metrics/collected_stats.h"
#include "metrics/label_table.h"
#include "metrics/prometheus_text.h"
#include "metrics/top_k.h"
#include "util/hex.h"

namespace sluice::server {
namespace {

constexpr std::array<std::string_view, 6> kResultNames = {
    "ok", "over_limit", "shadow_over_limit", "soft_over_limit", "failed_open", "failed_closed"};

// Fine steps near the top, where a limit that is too tight for healthy clients shows.
constexpr std::array<double, 11> kUtilizationBounds = {0.1, 0.2, 0.3, 0.4,  0.5, 0.6,
                                                       0.7, 0.8, 0.9, 0.95, 1.0};
constexpr std::array<std::string_view, 11> kUtilizationLe = {
    "0.1", "0.2", "0.3", "0.4", "0.5", "0.6", "0.7", "0.8", "0.9", "0.95", "1"};
// The utilization sum is kept in millionths so that it is one integer add, not a CAS loop on
// a double; 2^64 millionths is 1.8e13 decisions at full utilization per series.
constexpr double kUtilizationSumScale = 1e6;

// 10 us (an in-memory decision) to 1 s (a Redis call that hit its timeouts), 1-2.5-5 steps.
constexpr std::array<int64_t, 16> kDurationBoundsNs = {
    10'000,      25'000,      50'000,      100'000,      250'000,    500'000,
    1'000'000,   2'500'000,   5'000'000,   10'000'000,   25'000'000, 50'000'000,
    100'000'000, 250'000'000, 500'000'000, 1'000'000'000};
constexpr std::array<std::string_view, 16> kDurationLe = {
    "0.00001", "0.000025", "0.00005", "0.0001", "0.00025", "0.0005", "0.001", "0.0025",
    "0.005",   "0.01",     "0.025",   "0.05",   "0.1",     "0.25",   "0.5",   "1"};

// Identities longer than this are shown as a prefix and a hash of the whole (distinct
// identities stay distinct) so that a client's long values cannot make the sketch large.
constexpr size_t kMaxIdentityBytes = 256;

template <size_t N>
using Counts = std::array<std::atomic<uint64_t>, N>;

template <size_t N>
std::array<uint64_t, N> Load(const Counts<N>& counts) {
  std::array<uint64_t, N> out;
  for (size_t i = 0; i < N; ++i) out[i] = counts[i].load(std::memory_order_relaxed);
  return out;
}

// The counters of one (domain, limit). Relaxed atomics: each is an independent count, and a
// scrape that sees some of a decision's increments but not others is off by one until the next.
struct Series {
  Series(std::string_view domain, std::string_view limit) {
    AppendLabel(labels, "domain", domain);
    labels += ',';
    AppendLabel(labels, "limit", limit);
  }
  std::string labels;  // rendered once: domain="...",limit="..."
  Counts<kResultNames.size()> decisions{};
  std::atomic<uint64_t> near_limit{0};
  // Non-cumulative (cumulated at render), the last above every bound; _count is their sum.
  Counts<kUtilizationBounds.size() + 1> utilization{};
  std::atomic<uint64_t> utilization_sum_micros{0};
};

struct DomainTop {
  explicit DomainTop(size_t capacity) : sketch(capacity) {}
  std::mutex mu;
  SpaceSaving sketch;  // guarded by mu
};

bool IsAllowed(DecisionResult result) {
  return result != DecisionResult::kOverLimit && result != DecisionResult::kFailedClosed;
}

// Clamps to [0, 1]; NaN (no utilization known) counts as 0.
double ClampUtilization(double u) {
  if (!(u >= 0)) return 0;
  return u > 1 ? 1 : u;
}

double SanitizeRatio(double ratio) {
  if (!(ratio > 0)) return 0.8;  // also NaN: the documented default
  return ratio > 1 ? 1 : ratio;
}

// `identity` itself, or (when too long) its first bytes cut at a UTF-8 boundary, '~' and the
// 16 hex digits of a hash of all of it, written into buf.
std::string_view BoundedIdentity(std::string_view identity,
                                 std::array<char, kMaxIdentityBytes>& buf) {
  if (identity.size() <= kMaxIdentityBytes) return identity;
  constexpr size_t kSuffix = 17;
  size_t cut = kMaxIdentityBytes - kSuffix;
  while (cut > 0 && (static_cast<unsigned char>(identity[cut]) & 0xC0) == 0x80) --cut;
  std::copy_n(identity.data(), cut, buf.data());
  buf[cut] = '~';
  uint64_t h = std::hash<std::string_view>{}(identity);
  for (size_t i = 0; i < 16; ++i, h >>= 4) buf[cut + 16 - i] = util::HexDigit(h & 0xf);
  return std::string_view(buf.data(), cut + kSuffix);
}

std::string FormatSeconds(Duration d) {
  std::string out;
  AppendNumber(out, static_cast<double>(d.count()) / 1e9);
  return out + "s";
}

}  // namespace

std::string_view DecisionResultName(DecisionResult result) {
  const auto i = static_cast<size_t>(result);
  if (i >= kResultNames.size()) return "unknown";
  return kResultNames[i];
}

struct Metrics::Impl {
  explicit Impl(size_t capacity) : top_capacity(capacity) {}

  Series* SeriesFor(std::string_view domain, std::string_view limit) {
    if (Series* s = series.Find(domain, limit)) return s;  // the hot path, after first use
    if (Series* s = series.FindOrInsert(domain, limit, kMaxSeries, domain, limit)) return s;
    if (Series* s =
            series.FindOrInsert(domain, kOther, kMaxSeries + kMaxOtherSeries, domain, kOther)) {
      return s;
    }
    return series.FindOrInsert(kOther, kOther, kSeriesTableSize, kOther, kOther);
  }

  DomainTop* TopFor(std::string_view domain) {
    if (DomainTop* t = tops.Find(domain, {})) return t;
    if (DomainTop* t = tops.FindOrInsert(domain, {}, kMaxTopDomains, top_capacity)) return t;
    return tops.FindOrInsert(kOther, {}, kMaxTopDomains + 1, top_capacity);
  }

  static constexpr size_t kSeriesTableSize = kMaxSeries + kMaxOtherSeries + 1;

  const size_t top_capacity;
  LabelTable<Series> series{kSeriesTableSize};
  LabelTable<DomainTop> tops{kMaxTopDomains + 1};

  Counts<kDurationBoundsNs.size() + 1> duration{};
  std::atomic<uint64_t> duration_sum_ns{0};
  std::atomic<uint64_t> store_errors{0};
  Counts<kDurationBoundsNs.size() + 1> acquire_duration{};
  std::atomic<uint64_t> acquire_duration_sum_ns{0};
  std::array<std::atomic<uint64_t>, 4> unchecked{};      // by UncheckedDescriptor
  std::array<std::atomic<uint64_t>, 4> forward_auth{};   // by ForwardAuthResult
  std::array<std::atomic<uint64_t>, 3> auth_failures{};  // by AuthFailure
  std::atomic<uint64_t> forward_auth_invalid_host{0};
  std::atomic<uint64_t> reloads_ok{0};
  std::atomic<uint64_t> reloads_failed{0};

  mutable std::mutex gauges_mu;
  std::function<void(StatsSink&)> stats_source;  // guarded by gauges_mu
  const UsageViews* usage = nullptr;             // guarded by gauges_mu
};

Metrics::Metrics(double near_limit_ratio, size_t top_capacity)
    : near_limit_ratio_(SanitizeRatio(near_limit_ratio)),
      impl_(std::make_unique<Impl>(top_capacity)) {}

Metrics::~Metrics() = default;

void Metrics::RecordDecision(std::string_view domain, std::string_view limit, DecisionResult result,
                             double utilization) {
  const auto r = static_cast<size_t>(result);
  if (r >= kResultNames.size()) return;
  Series* s = impl_->SeriesFor(domain, limit);
  const double u = ClampUtilization(utilization);
  s->decisions[r].fetch_add(1, std::memory_order_relaxed);
  if (IsAllowed(result) && u >= near_limit_ratio_) {
    s->near_limit.fetch_add(1, std::memory_order_relaxed);
  }
  // le semantics: the first bound >= u (u <= 1, so never past the last bound).
  const size_t b = static_cast<size_t>(
      std::lower_bound(kUtilizationBounds.begin(), kUtilizationBounds.end(), u) -
      kUtilizationBounds.begin());
  s->utilization[b].fetch_add(1, std::memory_order_relaxed);
  // u is in [0, 1]: adding 0.5 and truncating rounds, without llround's library call.
  s->utilization_sum_micros.fetch_add(static_cast<uint64_t>(u * kUtilizationSumScale + 0.5),
                                      std::memory_order_relaxed);
}

namespace {

template <typename C>
void RecordIn(C& counts, std::atomic<uint64_t>& sum_ns, Duration d) {
  const int64_t ns = std::max<int64_t>(d.count(), 0);
  const size_t b =
      static_cast<size_t>(std::lower_bound(kDurationBoundsNs.begin(), kDurationBoundsNs.end(), ns) -
                          kDurationBoundsNs.begin());
  counts[b].fetch_add(1, std::memory_order_relaxed);
  sum_ns.fetch_add(static_cast<uint64_t>(ns), std::memory_order_relaxed);
}

}  // namespace

void Metrics::RecordDuration(Duration d) { RecordIn(impl_->duration, impl_->duration_sum_ns, d); }

void Metrics::RecordAcquireDuration(Duration d) {
  RecordIn(impl_->acquire_duration, impl_->acquire_duration_sum_ns, d);
}

void Metrics::RecordStoreError() { impl_->store_errors.fetch_add(1, std::memory_order_relaxed); }

void Metrics::RecordUncheckedDescriptors(UncheckedDescriptor reason, uint64_t n) {
  const auto r = static_cast<size_t>(reason);
  if (r < impl_->unchecked.size()) impl_->unchecked[r].fetch_add(n, std::memory_order_relaxed);
}

void Metrics::RecordForwardAuth(ForwardAuthResult result) {
  const auto r = static_cast<size_t>(result);
  if (r < impl_->forward_auth.size()) {
    impl_->forward_auth[r].fetch_add(1, std::memory_order_relaxed);
  }
}

void Metrics::RecordAuthFailure(AuthFailure reason) {
  const auto r = static_cast<size_t>(reason);
  if (r < impl_->auth_failures.size()) {
    impl_->auth_failures[r].fetch_add(1, std::memory_order_relaxed);
  }
}

void Metrics::RecordForwardAuthInvalidHost() {
  impl_->forward_auth_invalid_host.fetch_add(1, std::memory_order_relaxed);
}

void Metrics::RecordReload(bool ok) {
  (ok ? impl_->reloads_ok : impl_->reloads_failed).fetch_add(1, std::memory_order_relaxed);
}

void Metrics::SetStatsSource(std::function<void(StatsSink&)> source) {
  std::lock_guard lock(impl_->gauges_mu);
  impl_->stats_source = std::move(source);
}

void Metrics::SetUsageViews(const UsageViews* views) {
  std::lock_guard lock(impl_->gauges_mu);
  impl_->usage = views;
}

void Metrics::RecordHeavyHitter(std::string_view domain, std::string_view identity, bool rejected,
                                bool near_limit) {
  if (!rejected && !near_limit) return;
  DomainTop* top = impl_->TopFor(domain);
  std::array<char, kMaxIdentityBytes> buf;
  const std::string_view id = BoundedIdentity(identity, buf);
  std::lock_guard lock(top->mu);
  top->sketch.Add(id, rejected ? 1 : 0, near_limit ? 1 : 0);
}

std::vector<HeavyHitter> Metrics::Top(std::string_view domain, size_t n) const {
  DomainTop* top = impl_->tops.Find(domain, {});
  if (top == nullptr) return {};
  std::vector<SpaceSaving::Item> items;
  {
    std::lock_guard lock(top->mu);
    items = top->sketch.Top(n);
  }
  std::vector<HeavyHitter> out;
  out.reserve(items.size());
  for (auto& item : items) {
    out.push_back(
        HeavyHitter{std::move(item.identity), item.rejected, item.near_limit, item.error});
  }
  return out;
}

namespace {

// sluice_limit_identities: the usage views' distinct identities of each limit.
void AppendIdentities(std::string& out, const UsageViews& usage) {
  std::string identities_help = "Distinct identities of each limit over the last ";
  identities_help += FormatSeconds(usage.period());
  identities_help +=
      " (HyperLogLog, 2.3% relative standard error): seen, near (allowed with at least ";
  AppendNumber(identities_help, usage.near_limit_ratio());
  identities_help +=
      " of the limit used), over (refused), shadow_over (a shadow or soft limit would have "
      "refused).";
  AppendHelpAndType(out, "sluice_limit_identities", identities_help, "gauge");
  for (const IdentityCounts& c : usage.Identities()) {
    std::string labels;
    AppendLabel(labels, "domain", c.domain);
    labels += ',';
    AppendLabel(labels, "limit", c.limit);
    const std::pair<const char*, uint64_t> states[] = {{"state=\"seen\"", c.seen},
                                                       {"state=\"near\"", c.near},
                                                       {"state=\"over\"", c.over},
                                                       {"state=\"shadow_over\"", c.shadow_over}};
    for (const auto& [state, n] : states) {
      AppendSample(out, "sluice_limit_identities", labels, state, n);
    }
  }
}

}  // namespace

void Metrics::AppendDurations(std::string& out) const {
  AppendHelpAndType(out, "sluice_decision_duration_seconds",
                    "Time to answer one check request, all its limits together.", "histogram");
  AppendHistogram(
      out, "sluice_decision_duration_seconds", {}, kDurationLe, Load(impl_->duration),
      static_cast<double>(impl_->duration_sum_ns.load(std::memory_order_relaxed)) / 1e9);

  AppendHelpAndType(out, "sluice_acquire_duration_seconds",
                    "Time to answer one acquire request (POST /v1/acquire), its concurrency slots "
                    "and rate limits together.",
                    "histogram");
  AppendHistogram(
      out, "sluice_acquire_duration_seconds", {}, kDurationLe, Load(impl_->acquire_duration),
      static_cast<double>(impl_->acquire_duration_sum_ns.load(std::memory_order_relaxed)) / 1e9);
}

std::string Metrics::Render() const {
  auto series = impl_->series.Snapshot();
  std::sort(series.begin(), series.end(), [](const auto* a, const auto* b) {
    return std::tie(a->first, a->second) < std::tie(b->first, b->second);
  });

  std::string out;
  out.reserve(1024 + series.size() * 1600);

  AppendHelpAndType(out, "sluice_decisions_total",
                    "Decisions of one limit, by result (one request checks several limits).",
                    "counter");
  std::string extra;
  for (const auto* e : series) {
    for (size_t r = 0; r < kResultNames.size(); ++r) {
      extra.clear();
      AppendLabel(extra, "result", kResultNames[r]);
      AppendSample(out, "sluice_decisions_total", e->value.labels, extra,
                   e->value.decisions[r].load(std::memory_order_relaxed));
    }
  }

  std::string help = "Allowed decisions with at least ";
  AppendNumber(help, near_limit_ratio_);
  help += " of the limit used.";
  AppendHelpAndType(out, "sluice_near_limit_total", help, "counter");
  for (const auto* e : series) {
    AppendSample(out, "sluice_near_limit_total", e->value.labels, {},
                 e->value.near_limit.load(std::memory_order_relaxed));
  }

  AppendHelpAndType(out, "sluice_limit_utilization",
                    "Fraction of the limit used after each decision.", "histogram");
  for (const auto* e : series) {
    const auto counts = Load(e->value.utilization);
    const double sum =
        static_cast<double>(e->value.utilization_sum_micros.load(std::memory_order_relaxed)) /
        kUtilizationSumScale;
    AppendHistogram(out, "sluice_limit_utilization", e->value.labels, kUtilizationLe, counts, sum);
  }

  AppendDurations(out);

  AppendHelpAndType(out, "sluice_store_errors_total", "Store calls that failed.", "counter");
  AppendSample(out, "sluice_store_errors_total", {}, {},
               impl_->store_errors.load(std::memory_order_relaxed));

  AppendHelpAndType(out, "sluice_descriptors_unchecked_total",
                    "Request descriptors answered OK without a check: past the checked "
                    "descriptors of a request, with too many entries, with a key too long, or "
                    "a concurrency rule reached by a check rather than an acquire.",
                    "counter");
  constexpr std::array<std::string_view, 4> kUncheckedReasons = {
      R"(reason="descriptors")", R"(reason="entries")", R"(reason="key")",
      R"(reason="concurrency")"};
  for (size_t r = 0; r < kUncheckedReasons.size(); ++r) {
    AppendSample(out, "sluice_descriptors_unchecked_total", kUncheckedReasons[r], {},
                 impl_->unchecked[r].load(std::memory_order_relaxed));
  }

  AppendHelpAndType(out, "sluice_forward_auth_requests_total",
                    "Requests to the forward-auth endpoint by answer: allowed and over_limit "
                    "after a check, no_descriptor allowed without one, bad_request refused.",
                    "counter");
  constexpr std::array<std::string_view, 4> kForwardAuthResults = {
      R"(result="allowed")", R"(result="over_limit")", R"(result="no_descriptor")",
      R"(result="bad_request")"};
  for (size_t r = 0; r < kForwardAuthResults.size(); ++r) {
    AppendSample(out, "sluice_forward_auth_requests_total", kForwardAuthResults[r], {},
                 impl_->forward_auth[r].load(std::memory_order_relaxed));
  }
  AppendHelpAndType(out, "sluice_forward_auth_invalid_host_total",
                    "Forward-auth requests whose host, read by an action, is not a valid name "
                    "or address: they make no host entry.",
                    "counter");
  AppendSample(out, "sluice_forward_auth_invalid_host_total", {}, {},
               impl_->forward_auth_invalid_host.load(std::memory_order_relaxed));

  AppendHelpAndType(out, "sluice_check_auth_failures_total",
                    "Checks refused before anything was counted (--api-tokens): missing without "
                    "a credential, unknown with one no client has, domain for a client checking "
                    "a domain it may not.",
                    "counter");
  constexpr std::array<std::string_view, 3> kAuthFailures = {
      R"(reason="missing")", R"(reason="unknown")", R"(reason="domain")"};
  for (size_t r = 0; r < kAuthFailures.size(); ++r) {
    AppendSample(out, "sluice_check_auth_failures_total", kAuthFailures[r], {},
                 impl_->auth_failures[r].load(std::memory_order_relaxed));
  }

  std::function<void(StatsSink&)> source;
  const UsageViews* usage = nullptr;
  {
    std::lock_guard lock(impl_->gauges_mu);
    source = impl_->stats_source;
    usage = impl_->usage;
  }
  if (usage != nullptr) AppendIdentities(out, *usage);
  // Without a source (a store that does not count its keys) the store's families are left out
  // rather than shown as a misleading 0.
  if (source) {
    CollectedStats stats;
    source(stats);
    stats.Render(out);
  }

  AppendHelpAndType(out, "sluice_config_reloads_total", "Configuration reloads, by result.",
                    "counter");
  AppendSample(out, "sluice_config_reloads_total", {}, "result=\"success\"",
               impl_->reloads_ok.load(std::memory_order_relaxed));
  AppendSample(out, "sluice_config_reloads_total", {}, "result=\"failure\"",
               impl_->reloads_failed.load(std::memory_order_relaxed));
  return out;
}

}  // namespace sluice::server
