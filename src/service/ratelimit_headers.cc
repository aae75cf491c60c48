#include "service/ratelimit_headers.h"

#include <algorithm>
#include <cstdint>
#include <string_view>

namespace sluice::server {
namespace {

// Whole seconds, rounded up: a client that waits this long is never early.
int64_t CeilSeconds(Duration d) {
  if (d <= Duration(0)) return 0;
  return (d.count() + 999'999'999) / 1'000'000'000;
}

// A Structured Fields sf-string (RFC 8941 3.3.3): printable ASCII, with '"' and '\' escaped.
// Other bytes (a limit name is operator text) become '?', so the field always parses.
std::string SfString(std::string_view text) {
  std::string out = "\"";
  for (char ch : text) {
    const auto c = static_cast<unsigned char>(ch);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += ch;
    } else if (c >= 0x20 && c < 0x7f) {
      out += ch;
    } else {
      out += '?';
    }
  }
  out += '"';
  return out;
}

// A Structured Field Integer (RFC 9651 3.3.1) has at most 15 digits; a larger count (a huge
// burst) is reported as the largest one rather than as a field parsers reject.
std::string SfInteger(int64_t v) {
  return std::to_string(std::clamp<int64_t>(v, 0, 999'999'999'999'999));
}

// The wire's uint32, as Envoy is sent limit_remaining and requests_per_unit.
uint32_t ClampU32(int64_t v) {
  return static_cast<uint32_t>(std::clamp<int64_t>(v, 0, UINT32_MAX));
}

std::vector<std::pair<std::string, std::string>> UpstreamHeaders(const CheckResponse& response) {
  const DescriptorStatus* s = UpstreamHeaderStatus(response);
  if (s == nullptr) return {};
  return {{"RateLimit-Limit", std::to_string(ClampU32(s->limit->requests_per_unit))},
          {"RateLimit-Remaining", std::to_string(ClampU32(s->remaining))},
          {"RateLimit-Reset", std::to_string(CeilSeconds(s->reset_after))}};
}

// The policy's name: the limit's name, else its metric key, else its id.
std::string_view PolicyName(const Limit& limit) {
  if (!limit.name.empty()) return limit.name;
  if (!limit.metric_name.empty()) return limit.metric_name;
  return limit.id;
}

}  // namespace

std::optional<HeaderSet> ParseHeaderSet(std::string_view name) {
  if (name == "draft11") return HeaderSet::kDraft11;
  if (name == "upstream") return HeaderSet::kUpstream;
  if (name == "off") return HeaderSet::kOff;
  return std::nullopt;
}

std::string_view HeaderSetName(HeaderSet set) {
  switch (set) {
    case HeaderSet::kDraft11:
      return "draft11";
    case HeaderSet::kUpstream:
      return "upstream";
    case HeaderSet::kOff:
      return "off";
  }
  return "draft11";
}

const DescriptorStatus* UpstreamHeaderStatus(const CheckResponse& response) {
  const DescriptorStatus* chosen = nullptr;
  uint32_t least = UINT32_MAX;
  for (const DescriptorStatus& s : response.statuses) {
    if (s.limit == nullptr || s.replaced || s.limit->kind == LimitKind::kUnlimited) continue;
    if (ClampU32(s.remaining) < least) {
      chosen = &s;
      least = ClampU32(s.remaining);
    }
    if (s.code == Code::kOverLimit) {
      chosen = &s;
      least = 0;
    }
  }
  return chosen;
}

std::vector<std::pair<std::string, std::string>> RateLimitHeaders(const CheckResponse& response,
                                                                  const HeaderOptions& options) {
  if (options.set == HeaderSet::kOff) return {};
  if (options.set == HeaderSet::kUpstream) return UpstreamHeaders(response);
  std::string policy, current;
  const DescriptorStatus* tightest = nullptr;
  Duration retry{0};
  bool soft = false;
  for (const DescriptorStatus& s : response.statuses) {
    soft = soft || s.soft_over_limit;
    // A refused concurrency slot: until the earliest held permit of its key expires. A shadow
    // or soft one refused nothing. One that can never be granted (its priority's reserve is
    // every slot) is told to wait its permit_ttl, as a rate limit's hits that can never pass are
    // told one window; the JSON body says null.
    if (s.slot_refused && s.code == Code::kOverLimit) {
      retry = std::max(retry, s.slot_retry_after == kNever && s.limit != nullptr
                                  ? s.limit->concurrency->spec.ttl
                                  : s.slot_retry_after);
    }
    if (s.limit == nullptr || s.replaced || s.limit->kind == LimitKind::kUnlimited) continue;
    const Limit& limit = *s.limit;
    const std::string name = SfString(PolicyName(limit));
    const int64_t window = CeilSeconds(limit.period.length);
    if (!policy.empty()) policy += ", ";
    policy += name + ";q=" + SfInteger(limit.requests_per_unit) + ";w=" + SfInteger(window);
    if (!current.empty()) current += ", ";
    current +=
        name + ";r=" + SfInteger(s.remaining) + ";t=" + SfInteger(CeilSeconds(s.reset_after));
    if (tightest == nullptr || s.remaining < tightest->remaining) tightest = &s;
    if (s.code == Code::kOverLimit) {
      // A request that can never pass this limit (its hits exceed the capacity, or a blocking
      // rule) is told to wait one window: retrying sooner cannot help, and a 429 always says
      // when to come back. The JSON body says retry_after_ms null for it.
      retry = std::max(retry, s.retry_after == kNever ? limit.period.length : s.retry_after);
    }
  }
  std::vector<std::pair<std::string, std::string>> headers;
  if (!policy.empty()) {
    headers.emplace_back("RateLimit-Policy", policy);
    headers.emplace_back("RateLimit", current);
  }
  // Every over-limit answer (a 429 over HTTP) says when to come back: RFC 9110 delay-seconds,
  // rounded up, at least 1.
  if (response.overall == Code::kOverLimit) {
    headers.emplace_back("Retry-After", std::to_string(std::max<int64_t>(1, CeilSeconds(retry))));
  }
  if (options.legacy && tightest != nullptr) {
    headers.emplace_back("X-RateLimit-Limit", std::to_string(tightest->limit->requests_per_unit));
    headers.emplace_back("X-RateLimit-Remaining",
                         std::to_string(std::max<int64_t>(0, tightest->remaining)));
    headers.emplace_back("X-RateLimit-Reset", std::to_string(CeilSeconds(tightest->reset_after)));
  }
  if (options.soft_over_limit && soft) headers.emplace_back(kSoftOverLimitHeader, "?1");
  return headers;
}

}  // namespace sluice::server
