#include "sluice/client/server_hints.h"

#include <algorithm>
#include <limits>

#include "client/http_date.h"
#include "client/structured_fields.h"
#include "util/ascii.h"

namespace sluice::client {
namespace {

std::string_view TrimOws(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

// 1*DIGIT, saturating: a value too long for int64 is "very large", not garbage.
std::optional<int64_t> DeltaSeconds(std::string_view s) {
  s = TrimOws(s);
  if (s.empty()) return std::nullopt;
  int64_t v = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return std::nullopt;
    v = v > (std::numeric_limits<int64_t>::max() - 9) / 10 ? std::numeric_limits<int64_t>::max()
                                                           : v * 10 + (c - '0');
  }
  return v;
}

Wait ClampedSeconds(int64_t seconds, const HintLimits& limits) {
  const int64_t max_s = std::chrono::duration_cast<std::chrono::seconds>(limits.max_wait).count();
  if (seconds > max_s) return {limits.max_wait, true};
  return {std::chrono::seconds(seconds), false};
}

Wait ClampedUntil(Timestamp then, Timestamp now, const HintLimits& limits) {
  if (then <= now) return {Duration{0}, false};
  // then - now cannot overflow: both lie within 1970..2200 or come from the same clock.
  const Duration d = then - now;
  if (d > limits.max_wait) return {limits.max_wait, true};
  return {d, false};
}

// The values of every header named `name`, joined into one list value.
std::optional<std::string> Combined(std::span<const Header> headers, std::string_view name) {
  std::optional<std::string> out;
  for (const Header& h : headers) {
    if (!util::EqualsIgnoreAsciiCase(h.name, name)) continue;
    if (out) {
      *out += ", ";
      *out += TrimOws(h.value);
    } else {
      out = std::string(TrimOws(h.value));
    }
  }
  return out;
}

// The first member of a legacy numeric field: "100" or the earlier drafts' "100, 100;w=60".
std::optional<int64_t> LegacyNumber(std::string_view value) {
  return DeltaSeconds(value.substr(0, value.find(',')));
}

}  // namespace

std::optional<Wait> ParseRetryAfter(std::string_view value, Timestamp now,
                                    const HintLimits& limits) {
  value = TrimOws(value);
  if (auto seconds = DeltaSeconds(value)) return ClampedSeconds(*seconds, limits);
  if (auto date = ParseHttpDate(value, now)) return ClampedUntil(*date, now, limits);
  return std::nullopt;
}

std::vector<QuotaPolicy> ParseRateLimitPolicy(std::string_view value) {
  std::vector<QuotaPolicy> out;
  auto list = sf::ParseList(value);
  if (!list) return out;
  for (const sf::Member& m : *list) {
    if (m.inner_list || m.item.kind != sf::BareItem::Kind::kString) continue;
    const sf::BareItem* q = m.Param("q");
    if (!q || q->kind != sf::BareItem::Kind::kInteger || q->integer < 0) continue;
    QuotaPolicy p{m.item.text, q->integer, std::nullopt};
    const sf::BareItem* w = m.Param("w");
    if (w && w->kind == sf::BareItem::Kind::kInteger && w->integer > 0) {
      p.window = std::chrono::seconds(w->integer);
    }
    out.push_back(std::move(p));
  }
  return out;
}

std::vector<QuotaState> ParseRateLimit(std::string_view value, const HintLimits& limits) {
  std::vector<QuotaState> out;
  auto list = sf::ParseList(value);
  if (!list) return out;
  for (const sf::Member& m : *list) {
    if (m.inner_list || m.item.kind != sf::BareItem::Kind::kString) continue;
    const sf::BareItem* r = m.Param("r");
    if (!r || r->kind != sf::BareItem::Kind::kInteger || r->integer < 0) continue;
    QuotaState s{m.item.text, r->integer, std::nullopt};
    const sf::BareItem* t = m.Param("t");
    if (t && t->kind == sf::BareItem::Kind::kInteger && t->integer >= 0) {
      s.reset = ClampedSeconds(t->integer, limits);
    }
    out.push_back(std::move(s));
  }
  return out;
}

std::optional<Wait> ParseLegacyReset(std::string_view value, Timestamp now,
                                     const HintLimits& limits) {
  const auto n = LegacyNumber(value);
  if (!n) return std::nullopt;
  if (*n <= kEpochResetThreshold) return ClampedSeconds(*n, limits);
  const int64_t now_s = ToNanos(now) / 1'000'000'000;
  // A Unix time in seconds; past 2200 it is no real time, only "very far".
  if (*n - now_s > limits.max_wait.count() / 1'000'000'000) return Wait{limits.max_wait, true};
  return ClampedUntil(FromNanos(*n * 1'000'000'000), now, limits);
}

ServerHints ReadServerHints(std::span<const Header> headers, Timestamp now,
                            const HintLimits& limits) {
  ServerHints hints;
  if (auto v = Combined(headers, "Retry-After"))
    hints.retry_after = ParseRetryAfter(*v, now, limits);
  const auto policy = Combined(headers, "RateLimit-Policy");
  const auto state = Combined(headers, "RateLimit");
  if (policy || state) {
    if (policy) hints.policies = ParseRateLimitPolicy(*policy);
    if (state) hints.states = ParseRateLimit(*state, limits);
    return hints;
  }
  // The legacy families: X-RateLimit-* first (the most common), then the earlier drafts'.
  for (std::string_view prefix : {"X-RateLimit-", "RateLimit-"}) {
    const auto limit = Combined(headers, std::string(prefix) + "Limit");
    const auto remaining = Combined(headers, std::string(prefix) + "Remaining");
    const auto reset = Combined(headers, std::string(prefix) + "Reset");
    if (!limit && !remaining && !reset) continue;
    if (limit) {
      if (auto q = LegacyNumber(*limit)) hints.policies.push_back({"", *q, std::nullopt});
    }
    if (remaining) {
      if (auto r = LegacyNumber(*remaining)) {
        QuotaState s{"", *r, std::nullopt};
        if (reset) s.reset = ParseLegacyReset(*reset, now, limits);
        hints.states.push_back(std::move(s));
      }
    }
    break;
  }
  return hints;
}

}  // namespace sluice::client
