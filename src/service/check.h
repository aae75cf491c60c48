// The question sluiced answers, "may this request pass?", independent of how it arrived (HTTP
// JSON or Envoy's gRPC protocol), and its answer. Both front ends translate into and out of
// these types; the RateLimitService decides.
#ifndef SLUICE_SERVICE_CHECK_H_
#define SLUICE_SERVICE_CHECK_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "config/config.h"
#include "config/descriptor.h"
#include "sluice/decision.h"
#include "sluice/time.h"

namespace sluice::server {

// The bounds of what the service checks in a request, whoever sends it. These initializers are
// the only values sluiced uses (kCheckLimits). They are set well above what Envoy sends (a route's
// rate_limits make a few descriptors of a few entries, keys named in Envoy's config, values taken
// from the client's request), and a request beyond them is still answered, never refused, since
// an error makes Envoy skip every limit in the call (service/check_rules.h says what each bound
// does past it). Memory is bounded by the front ends' size caps (the gRPC message, the HTTP body),
// which hold every bound reached at once by small entries, or every size bound in one descriptor.
struct CheckLimits {
  size_t max_descriptors = 1024;  // checked per request; later ones: OK, no limit
  size_t max_entries = 64;        // per descriptor; more: that descriptor OK, no limit
  size_t max_key_bytes = 4096;    // an entry's key; longer: that descriptor OK, no limit
  size_t max_value_bytes = 1024;  // an entry's value; longer: counted under its SHA-256
  // A counter key longer than this is counted under limit id + '#' + the SHA-256 of the rest:
  // the longest the stores accept (the memory store's own maximum).
  size_t max_counter_key_bytes = 65535;
};
inline constexpr CheckLimits kCheckLimits{};

// The longest domain a config can hold (docs/configuration.md, "Limits": names are at most 256
// bytes; tests/grpc/grpc_limits_test.cc ties the two). A longer one is a domain sluiced does not
// have, answered without a check: the front ends' size caps need room for this long a domain.
inline constexpr size_t kMaxConfiguredDomainBytes = 256;

// The longest request priority (POST /v1/check's "priority"); the config's priorities are at
// most as long.
inline constexpr size_t kMaxPriorityBytes = 64;

// Who sends a request, as its front end's translator says. The rules (service/check_rules.h)
// are the same for every caller except where their protocols differ: what an unknown domain
// means, whether a value may be empty, and the words an error is given in.
enum class Caller {
  kDirect,    // a caller of RateLimitService itself (tests, tools)
  kHttpJson,  // POST /v1/check (http/check_json.h)
  kEnvoy,     // Envoy's ShouldRateLimit over gRPC (grpc/grpc_translate.h)
};

struct CheckDescriptor {
  std::vector<std::pair<std::string, std::string>> entries;  // key, value; in order
  // This descriptor's own hits_addend; unset: the request's. Any count from 0 to INT64_MAX: a
  // count over a limit's capacity is over that limit (every store compares before any
  // arithmetic, so even INT64_MAX cannot overflow).
  std::optional<int64_t> hits;
  std::optional<LimitOverride> limit_override;  // Envoy's per-descriptor `limit`
};

struct CheckRequest {
  std::string domain;
  std::vector<CheckDescriptor> descriptors;
  int64_t hits = 1;  // hits_addend for every descriptor that has none of its own; 0..INT64_MAX
  // A charge for work already done (HTTP "charge": true): every matched limit is charged
  // (Limiter::Charge: counted even beyond the limit, never given back), and the answer is OK
  // with what remains.
  bool charge = false;
  // The request's priority for limits with a shed rule (HTTP "priority"); a descriptor's own
  // priority entry (the domain's priority_key) wins over it. Unset: the lowest of each rule.
  std::optional<std::string> priority;
  Caller caller = Caller::kDirect;
};

enum class Code { kOk, kOverLimit };

struct DescriptorStatus {
  Code code = Code::kOk;
  // The limit that applied; null when no rule matched (then code is kOk and the numbers 0).
  // Points into CheckResponse::config or `owned` (an override), which the response keeps alive.
  const Limit* limit = nullptr;
  std::shared_ptr<const Limit> owned;
  std::string counter_key;  // the store key (for admin views and heavy hitters)
  int64_t remaining = 0;    // hits that could still pass now
  Duration reset_after{0};  // until the limit is fully replenished
  Duration retry_after{0};  // when over: earliest time this many hits could pass
  // An enforced leaky-bucket shaper that admitted: how long to hold the request before it goes
  // on (its place in the queue). 0 otherwise; shadow and soft limits never delay.
  Duration delay{0};
  Mode mode = Mode::kEnforce;
  bool over_limit = false;       // the limiter said no (in any mode)
  bool soft_over_limit = false;  // mode soft and over: allowed, flagged
  bool shadow_over_limit = false;
  bool degraded = false;  // the store failed: decided by failure_mode
  bool replaced = false;  // dropped by another matched limit's `replaces`: not checked
  // An acquire's slot of this descriptor's concurrency limit (limit->concurrency): whether one
  // was asked for, whether it was refused (then code is kOverLimit), the permits of its key held
  // after the call, and, refused, until the earliest of them expires.
  bool slot = false;
  bool slot_refused = false;
  int64_t in_flight = 0;
  Duration slot_retry_after{0};
  // The store's clock when it decided, and a granted slot's expiry on it (microseconds since the
  // epoch; 0 when the store was not reached): what the invariant is stated in.
  int64_t slot_store_time_us = 0;
  int64_t slot_expires_us = 0;
};

struct CheckResponse {
  Code overall = Code::kOk;
  // When OK: hold the request this long before passing it on -- the longest delay of its
  // enforced shapers (each has placed the request in its queue; it leaves when the slowest
  // releases it). 0 when over the limit (it took nothing) and for a charge.
  Duration delay{0};
  std::vector<DescriptorStatus> statuses;  // one per request descriptor, in order
  std::shared_ptr<const Config> config;    // keeps the limits the statuses point to alive
};

}  // namespace sluice::server

#endif  // SLUICE_SERVICE_CHECK_H_
