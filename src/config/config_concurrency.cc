// A descriptor's `concurrency:` block (config.h, ConcurrencyLimit; docs/load-protection.md).
#include <string>

#include "config/config_parse.h"
#include "sluice/duration.h"

namespace sluice::server::internal {
namespace {

// Inside what every store keeps (sluice::kMinPermitTtl..kMaxPermitTtl), narrower on purpose:
// longer permits would let one crashed holder keep a slot for over a day; shorter ones cannot be
// renewed in time by a client over a slow network.
constexpr Duration kShortestPermitTtl = std::chrono::milliseconds(100);
constexpr Duration kLongestPermitTtl = std::chrono::hours(24);
static_assert(kShortestPermitTtl >= kMinPermitTtl && kLongestPermitTtl <= kMaxPermitTtl);
// The memory store keeps one entry per held permit: this bounds one key's.
constexpr int64_t kMaxInFlight = 1'000'000;

Result<FailureMode> ReadFailureMode(const std::string& file, const YAML::Node& node) {
  auto text = ReadString(file, node, "failure_mode", 64);
  if (!text) return std::unexpected(text.error());
  if (*text == "open") return FailureMode::kOpen;
  if (*text == "closed") return FailureMode::kClosed;
  return ErrorAt(file, node, "unknown failure_mode '" + *text + "' (expected open or closed)");
}

// sync and scope are accepted only at their exact, per-store values, so that a config copied from
// a rate_limit says plainly why it cannot apply.
Result<void> RefuseSyncAndScope(const std::string& file, const Fields& fields) {
  if (const auto s = fields.Get("sync")) {
    const std::string mode = s->IsMap() && (*s)["mode"] ? (*s)["mode"].Scalar()
                             : s->IsScalar()            ? s->Scalar()
                                                        : std::string();
    if (mode != "exact") {
      return ErrorAt(file, fields.KeyOf("sync"),
                     "concurrency permits are always exact: sync: leased|batched cannot apply "
                     "(a permit taken ahead or in batches could exceed max_in_flight)");
    }
    // `{mode: exact}` takes nothing else: a lease_ttl or interval would have no effect.
    if (s->IsMap()) {
      if (auto f = Fields::Of(file, *s, "sync", {"mode"}); !f) return std::unexpected(f.error());
    }
  }
  if (const auto s = fields.Get("scope")) {
    if (!s->IsScalar() || s->Scalar() != "region") {
      return ErrorAt(file, fields.KeyOf("scope"),
                     "concurrency permits live in one store: scope: global cannot apply (regions "
                     "cannot share in-flight slots without a round trip to one store)");
    }
  }
  return {};
}

}  // namespace

Result<ConcurrencyLimit> ParseConcurrency(const std::string& file, const YAML::Node& node,
                                          std::optional<FailureMode> inherited) {
  auto fields =
      Fields::Of(file, node, "concurrency",
                 {"max_in_flight", "permit_ttl", "failure_mode", "sync", "scope", "shed"});
  if (!fields) return std::unexpected(fields.error());
  if (auto ok = RefuseSyncAndScope(file, *fields); !ok) return std::unexpected(ok.error());
  ConcurrencyLimit limit;
  const auto max = fields->Get("max_in_flight");
  if (!max) return ErrorAt(file, node, "concurrency needs max_in_flight");
  auto n = ReadInt(file, *max, "max_in_flight");
  if (!n) return std::unexpected(n.error());
  if (*n <= 0 || *n > kMaxInFlight) {
    return ErrorAt(file, *max,
                   "max_in_flight must be between 1 and " + std::to_string(kMaxInFlight) +
                       " (got " + std::to_string(*n) + ")");
  }
  limit.spec.max_in_flight = *n;
  const auto ttl = fields->Get("permit_ttl");
  if (!ttl) {
    return ErrorAt(file, node,
                   "concurrency needs permit_ttl (how long a permit lives unless renewed, e.g. "
                   "30s): it bounds how long a crashed holder keeps its slot");
  }
  auto text = ReadString(file, *ttl, "permit_ttl", 64);
  if (!text) return std::unexpected(text.error());
  auto d = ParseDuration(*text);
  if (!d) return ErrorAt(file, *ttl, "permit_ttl: " + d.error().message);
  if (*d < kShortestPermitTtl || *d > kLongestPermitTtl) {
    return ErrorAt(file, *ttl, "permit_ttl must be between 100ms and 24h (got " + *text + ")");
  }
  // Answers give it in milliseconds (permit_ttl_ms), which a holder counts from its send: a
  // fraction rounded up there would outlive the store's expiry, rounded down would differ from it.
  if (*d % std::chrono::milliseconds(1) != Duration(0)) {
    return ErrorAt(file, *ttl,
                   "permit_ttl must be a whole number of milliseconds (got " + *text + ")");
  }
  limit.spec.ttl = *d;
  limit.failure_mode = inherited.value_or(FailureMode::kOpen);
  if (const auto f = fields->Get("failure_mode")) {
    auto mode = ReadFailureMode(file, *f);
    if (!mode) return std::unexpected(mode.error());
    limit.failure_mode = *mode;
  }
  // sync and scope were refused above unless exact and per-store: a shed rule's reserve is of
  // the one shared set of slots.
  if (const auto s = fields->Get("shed")) {
    auto rule = ParseShedLevels(file, *s);
    if (!rule) return std::unexpected(rule.error());
    limit.shed = std::move(*rule);
  }
  return limit;
}

}  // namespace sluice::server::internal
