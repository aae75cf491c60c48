#include "grpc/grpc_translate.h"

#include <algorithm>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <utility>

namespace sluice::server {
namespace {

namespace rls = envoy::service::ratelimit::v3;
using EnvoyDescriptor = envoy::extensions::common::ratelimit::v3::RateLimitDescriptor;
using EnvoyUnit = envoy::type::v3::RateLimitUnit;
using ResponseUnit = rls::RateLimitResponse::RateLimit::Unit;

std::string Where(int descriptor) { return "descriptors[" + std::to_string(descriptor) + "]"; }

// The override's enum has no WEEK (Envoy's type.v3.RateLimitUnit never got one). UNKNOWN and
// numbers Envoy does not define are refused, as Envoy's `defined_only` rule (plus the need for
// an actual unit) would.
std::optional<Unit> FromEnvoyUnit(int unit) {
  switch (unit) {
    case envoy::type::v3::SECOND:
      return Unit::kSecond;
    case envoy::type::v3::MINUTE:
      return Unit::kMinute;
    case envoy::type::v3::HOUR:
      return Unit::kHour;
    case envoy::type::v3::DAY:
      return Unit::kDay;
    case envoy::type::v3::MONTH:
      return Unit::kMonth;
    case envoy::type::v3::YEAR:
      return Unit::kYear;
    default:
      return std::nullopt;
  }
}

ResponseUnit ToEnvoyUnit(Unit unit) {
  switch (unit) {
    case Unit::kSecond:
      return rls::RateLimitResponse::RateLimit::SECOND;
    case Unit::kMinute:
      return rls::RateLimitResponse::RateLimit::MINUTE;
    case Unit::kHour:
      return rls::RateLimitResponse::RateLimit::HOUR;
    case Unit::kDay:
      return rls::RateLimitResponse::RateLimit::DAY;
    case Unit::kWeek:
      return rls::RateLimitResponse::RateLimit::WEEK;
    case Unit::kMonth:
      return rls::RateLimitResponse::RateLimit::MONTH;
    case Unit::kYear:
      return rls::RateLimitResponse::RateLimit::YEAR;
  }
  return rls::RateLimitResponse::RateLimit::UNKNOWN;
}

// The wire fields are uint32: a larger count is reported as the largest one, never wrapped.
uint32_t ClampU32(int64_t v) {
  return static_cast<uint32_t>(std::clamp<int64_t>(v, 0, std::numeric_limits<uint32_t>::max()));
}

rls::RateLimitResponse::Code ToEnvoyCode(Code code) {
  return code == Code::kOverLimit ? rls::RateLimitResponse::OVER_LIMIT : rls::RateLimitResponse::OK;
}

Result<CheckDescriptor> FromEnvoyDescriptor(const EnvoyDescriptor& in, int index) {
  CheckDescriptor out;
  out.entries.reserve(in.entries_size());
  for (const auto& entry : in.entries()) {
    out.entries.emplace_back(entry.key(), entry.value());
  }
  if (in.has_hits_addend()) {
    // Beyond int64, the largest int64: more than any limit's capacity either way, so the same
    // answer (OVER_LIMIT) envoyproxy/ratelimit gives a count over the limit.
    out.hits = static_cast<int64_t>(
        std::min<uint64_t>(in.hits_addend().value(), std::numeric_limits<int64_t>::max()));
  }
  if (in.has_limit()) {
    const std::optional<Unit> unit = FromEnvoyUnit(in.limit().unit());
    if (!unit) {
      return MakeError(Where(index) + ".limit.unit must be one of SECOND, MINUTE, HOUR, DAY, " +
                       "MONTH, YEAR (got " + std::to_string(in.limit().unit()) + ")");
    }
    out.limit_override = LimitOverride{in.limit().requests_per_unit(), LimitPeriod::Of(*unit)};
  }
  return out;
}

}  // namespace

Result<CheckRequest> FromEnvoyRequest(const rls::RateLimitRequest& in) {
  CheckRequest out;
  out.caller = Caller::kEnvoy;
  out.domain = in.domain();
  out.hits = in.hits_addend() == 0 ? 1 : in.hits_addend();
  out.descriptors.reserve(in.descriptors_size());
  for (int i = 0; i < in.descriptors_size(); ++i) {
    Result<CheckDescriptor> d = FromEnvoyDescriptor(in.descriptors(i), i);
    if (!d) return std::unexpected(std::move(d.error()));
    out.descriptors.push_back(std::move(*d));
  }
  return out;
}

void ToEnvoyResponse(const CheckResponse& in, const HeaderOptions& headers,
                     rls::RateLimitResponse* out) {
  out->set_overall_code(ToEnvoyCode(in.overall));
  for (const DescriptorStatus& s : in.statuses) {
    rls::RateLimitResponse::DescriptorStatus* status = out->add_statuses();
    status->set_code(ToEnvoyCode(s.code));
    if (s.limit == nullptr) continue;  // no rule matched: OK, no limit, 0 remaining
    if (s.limit->kind == LimitKind::kUnlimited) {
      status->set_limit_remaining(std::numeric_limits<uint32_t>::max());
      continue;
    }
    // Dropped by another limit's `replaces`: not checked, so reported as if no rule matched, as
    // envoyproxy/ratelimit does. Envoy's X-RateLimit headers take the lowest limit_remaining
    // among statuses with a current_limit; a replaced one must not show up there as 0.
    if (s.replaced) continue;
    rls::RateLimitResponse::RateLimit* limit = status->mutable_current_limit();
    limit->set_name(s.limit->name);
    limit->set_requests_per_unit(ClampU32(s.limit->requests_per_unit));
    // A `period` no Envoy unit names goes as UNKNOWN: Envoy's X-RateLimit headers then give its
    // limit without a window rather than a wrong one (docs/envoy.md).
    const std::optional<Unit> unit = UnitOfLength(s.limit->period.length);
    limit->set_unit(unit ? ToEnvoyUnit(*unit) : rls::RateLimitResponse::RateLimit::UNKNOWN);
    status->set_limit_remaining(ClampU32(s.remaining));
    const int64_t ns = std::max<int64_t>(s.reset_after.count(), 0);
    status->mutable_duration_until_reset()->set_seconds(ns / 1'000'000'000);
    status->mutable_duration_until_reset()->set_nanos(static_cast<int32_t>(ns % 1'000'000'000));
  }
  for (auto& [key, value] : RateLimitHeaders(in, headers)) {
    envoy::config::core::v3::HeaderValue* h = out->add_response_headers_to_add();
    h->set_key(std::move(key));
    h->set_value(std::move(value));
  }
}

}  // namespace sluice::server
