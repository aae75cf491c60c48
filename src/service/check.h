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

// The bounds of a request, whoever sends it. These initializers are the only values sluiced
// uses (kCheckLimits); service/check_rules.h refuses a request over them, and the gRPC front
// end hashes a value over max_value_bytes instead (grpc_translate.h).
struct CheckLimits {
  size_t max_descriptors = 64;
  size_t max_entries = 16;           // per descriptor
  size_t max_key_bytes = 256;        // an entry's key
  size_t max_value_bytes = 1024;     // an entry's value
  int64_t max_hits = 1'000'000'000;  // hits per request or descriptor
};
inline constexpr CheckLimits kCheckLimits{};

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
  std::optional<int64_t> hits;  // this descriptor's own hits_addend; unset: the request's
  std::optional<LimitOverride> limit_override;  // Envoy's per-descriptor `limit`
};

struct CheckRequest {
  std::string domain;
  std::vector<CheckDescriptor> descriptors;
  int64_t hits = 1;  // hits_addend for every descriptor that has none of its own
  // A charge for work already done (HTTP "charge": true): every matched limit is charged
  // (Limiter::Charge: counted even beyond the limit, never given back), and the answer is OK
  // with what remains.
  bool charge = false;
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
  Mode mode = Mode::kEnforce;
  bool over_limit = false;       // the limiter said no (in any mode)
  bool soft_over_limit = false;  // mode soft and over: allowed, flagged
  bool shadow_over_limit = false;
  bool degraded = false;  // the store failed: decided by failure_mode
  bool replaced = false;  // dropped by another matched limit's `replaces`: not checked
};

struct CheckResponse {
  Code overall = Code::kOk;
  std::vector<DescriptorStatus> statuses;  // one per request descriptor, in order
  std::shared_ptr<const Config> config;    // keeps the limits the statuses point to alive
};

}  // namespace sluice::server

#endif  // SLUICE_SERVICE_CHECK_H_
