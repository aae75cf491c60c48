// sluiced's Prometheus metrics and heavy-hitter lists. The RateLimitService records into it on
// every decision; GET /metrics renders it and GET /v1/top reads the heavy hitters. Thread-safe;
// recording is cheap (atomic increments after a lookup of the label set).
//
// Families (label values are limit names, never a client's value unless the limit has
// detailed_metric: the service passes the label it wants):
//   sluice_decisions_total{domain,limit,result}   result: ok|over_limit|shadow_over_limit|
//                                                 soft_over_limit|failed_open|failed_closed
//   sluice_near_limit_total{domain,limit}         allowed, >= near_limit_ratio of the limit used
//   sluice_limit_utilization{domain,limit}        histogram of the fraction used at decision time
//   sluice_decision_duration_seconds              histogram of Check() latency
//   sluice_store_errors_total                     store calls that failed
//   the store's families (sluice_store_keys, ..., each layer's own: the lease, batched and
//   region series, sluice_decisions_by_source_total), reported by the stats source at render
//   time (sluice/stats_sink.h): metrics knows none of them
//   sluice_config_reloads_total{result}           result: success|failure
//   sluice_limit_identities{domain,limit,state}   distinct identities over the usage period,
//                                                 state: seen|near|over|shadow_over (usage_views.h)
//
// Bounded cardinality: at most kMaxSeries (domain, limit) series. Once they exist, a new limit
// is recorded as limit="_other" of its domain (at most kMaxOtherSeries such domains), and past
// that as domain="_other",limit="_other". Likewise at most kMaxTopDomains domains keep a
// heavy-hitter sketch; later domains share the one of domain "_other". Identities longer than
// 256 bytes are listed as a prefix, '~' and a hash of the whole.
//
// Hot path: after a series' first use, RecordDecision is a lock-free lookup (no allocation)
// and three or four relaxed atomic increments. RecordHeavyHitter takes its domain's mutex, and
// is meant only for rejected or near-limit decisions.
#ifndef SLUICE_METRICS_METRICS_H_
#define SLUICE_METRICS_METRICS_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "metrics/usage_views.h"
#include "sluice/stats_sink.h"
#include "sluice/time.h"

namespace sluice::server {

enum class DecisionResult {
  kOk,
  kOverLimit,
  kShadowOverLimit,
  kSoftOverLimit,
  kFailedOpen,
  kFailedClosed
};
std::string_view DecisionResultName(DecisionResult result);

// Why the service answered a descriptor without checking it (service/check_rules.h,
// UncheckedReason): the `reason` label of sluice_descriptors_unchecked_total.
enum class UncheckedDescriptor {
  kPastMaxDescriptors,  // "descriptors": past the request's checked descriptors
  kTooManyEntries,      // "entries"
  kKeyTooLong,          // "key"
  kConcurrency,         // "concurrency": a concurrency rule reached by a check, not an acquire
};

// What the forward-auth endpoint answered a proxy (http/forward_auth_api.h): the `result`
// label of sluice_forward_auth_requests_total.
enum class ForwardAuthResult {
  kAllowed,       // "allowed": 200 after a check
  kOverLimit,     // "over_limit": 429
  kNoDescriptor,  // "no_descriptor": 200, the request made no descriptor (nothing checked)
  kBadRequest,    // "bad_request": 400 (no or unknown Sluice-Domain, bad request)
};

// Why a check was refused before anything was counted (service/caller_auth.h): the `reason`
// label of sluice_check_auth_failures_total.
enum class AuthFailure {
  kMissing,  // "missing": no credential (401, UNAUTHENTICATED)
  kUnknown,  // "unknown": a token or certificate no client has (401, UNAUTHENTICATED)
  kDomain,   // "domain": a client checking a domain it may not (403, PERMISSION_DENIED)
};

struct HeavyHitter {
  std::string identity;  // the counter key (limit id # values)
  uint64_t rejected = 0;
  uint64_t near_limit = 0;
  uint64_t error = 0;  // space-saving overestimation bound of rejected + near_limit
};

class Metrics {
 public:
  static constexpr size_t kMaxSeries = 10'000;
  static constexpr size_t kMaxOtherSeries = 1'000;
  static constexpr size_t kMaxTopDomains = 256;
  static constexpr std::string_view kOther = "_other";

  // near_limit_ratio in (0, 1] (above 1 counts as 1; 0, negative or NaN as the default 0.8);
  // top_capacity: identities tracked per domain by the sketch (0: none).
  explicit Metrics(double near_limit_ratio = 0.8, size_t top_capacity = 1000);
  ~Metrics();
  Metrics(const Metrics&) = delete;
  Metrics& operator=(const Metrics&) = delete;

  // One decision of one limit. utilization: the fraction of the limit used after it, in [0, 1]
  // (over 1 is clamped). An allowed decision (ok, shadow/soft over, failed open) at or above the
  // near-limit ratio also counts in sluice_near_limit_total.
  void RecordDecision(std::string_view domain, std::string_view limit, DecisionResult result,
                      double utilization);
  void RecordDuration(Duration d);
  // Time to answer one acquire (POST /v1/acquire), its slots and rate limits together.
  void RecordAcquireDuration(Duration d);
  void RecordStoreError();
  // n descriptors of one request answered without a check (OK, no limit), for `reason`.
  void RecordUncheckedDescriptors(UncheckedDescriptor reason, uint64_t n);
  void RecordReload(bool ok);
  void RecordForwardAuth(ForwardAuthResult result);
  void RecordAuthFailure(AuthFailure reason);
  // A forward-auth request whose host, read by an action, is not a valid name or address.
  void RecordForwardAuthInvalidHost();
  // Called at render time: reports the store's families (sluice/stats_sink.h) into the sink
  // it is given, which renders them. Without one they are left out.
  void SetStatsSource(std::function<void(StatsSink&)> source);
  // Read at render time for sluice_limit_identities (nullptr: usage tracking is off, no such
  // family). `views` must outlive the Metrics or be unset first.
  void SetUsageViews(const UsageViews* views);

  // Heavy hitters: `identity` was rejected (any over-limit, in any mode) or near its limit.
  void RecordHeavyHitter(std::string_view domain, std::string_view identity, bool rejected,
                         bool near_limit);
  // The n identities of `domain` with the most rejections + near-limit hits, most first.
  std::vector<HeavyHitter> Top(std::string_view domain, size_t n) const;

  double near_limit_ratio() const { return near_limit_ratio_; }

  // The Prometheus text exposition format (version 0.0.4).
  std::string Render() const;

 private:
  // The check and acquire latency histograms, for Render.
  void AppendDurations(std::string& out) const;
  struct Impl;
  const double near_limit_ratio_;
  std::unique_ptr<Impl> impl_;
};

}  // namespace sluice::server

#endif  // SLUICE_METRICS_METRICS_H_
