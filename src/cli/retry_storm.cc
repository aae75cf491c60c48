#include "cli/retry_storm.h"

#include <fmt/format.h>

#include <memory>
#include <queue>
#include <unordered_map>

#include "sluice/client/backoff.h"
#include "sluice/client/random.h"
#include "sluice/memory_store.h"

namespace sluice::cli {
namespace {

constexpr int64_t kMaxClients = 1'000'000;

// A client's next attempt: ordered by time, then by client, so a run is reproducible.
struct Attempt {
  Timestamp at;
  int64_t client;
  bool operator>(const Attempt& o) const { return at != o.at ? at > o.at : client > o.client; }
};

std::optional<client::Jitter> JitterOf(RetryPolicy policy) {
  switch (policy) {
    case RetryPolicy::kExponential:
      return client::Jitter::kNone;
    case RetryPolicy::kFull:
      return client::Jitter::kFull;
    case RetryPolicy::kEqual:
      return client::Jitter::kEqual;
    case RetryPolicy::kDecorrelated:
      return client::Jitter::kDecorrelated;
    case RetryPolicy::kImmediate:
      break;
  }
  return std::nullopt;
}

double Millis(Duration d) { return std::chrono::duration<double, std::milli>(d).count(); }

}  // namespace

std::string_view RetryPolicyName(RetryPolicy policy) {
  switch (policy) {
    case RetryPolicy::kImmediate:
      return "immediate";
    case RetryPolicy::kExponential:
      return "exponential";
    case RetryPolicy::kFull:
      return "full";
    case RetryPolicy::kEqual:
      return "equal";
    case RetryPolicy::kDecorrelated:
      return "decorrelated";
  }
  return "immediate";
}

Result<RetryPolicy> ParseRetryPolicy(std::string_view name) {
  for (RetryPolicy p : kAllRetryPolicies) {
    if (RetryPolicyName(p) == name) return p;
  }
  return MakeError("unknown --policy '" + std::string(name) +
                   "' (immediate, exponential, full, equal or decorrelated)");
}

Result<RetryStormOptions> ValidateRetryStormOptions(const RetryStormOptions& o) {
  if (o.clients < 1 || o.clients > kMaxClients) {
    return MakeError("--clients must be 1.." + std::to_string(kMaxClients));
  }
  if (o.limit < 1) return MakeError("--limit must be at least 1");
  if (o.per <= Duration{0}) return MakeError("--per must be positive");
  if (o.burst < 1) return MakeError("--burst must be at least 1");
  if (o.base <= Duration{0}) return MakeError("--base must be positive");
  if (o.cap < o.base) return MakeError("--cap must be at least --base");
  if (o.immediate_delay <= Duration{0}) return MakeError("the immediate delay must be positive");
  if (o.max_calls < o.clients) return MakeError("--max-calls must be at least --clients");
  if (o.max_time <= Duration{0}) return MakeError("--max-time must be positive");
  return o;
}

RetryStormResult SimulateRetryStorm(RetryPolicy policy, const RetryStormOptions& o) {
  RetryStormResult r;
  r.policy = policy;
  // The server: one token bucket every client shares (the dependency that just came back).
  MemoryStoreOptions store;
  store.max_bytes = size_t{1} << 20;
  auto limiter = MakeMemoryLimiter({Algorithm::kTokenBucket, o.limit, o.per, o.burst}, store);
  if (!limiter) return r;  // cannot happen for validated options

  // Every client gets its own seeded generator and backoff: jitter is independent per client,
  // and the same seed replays the same run.
  const auto jitter = JitterOf(policy);
  std::vector<client::SeededRandom> rngs;
  std::vector<client::Backoff> backoffs;
  if (jitter) {
    rngs.reserve(static_cast<size_t>(o.clients));
    backoffs.reserve(static_cast<size_t>(o.clients));
    const client::BackoffPolicy bp{o.base, o.cap, INT32_MAX, *jitter};
    for (int64_t c = 0; c < o.clients; ++c) {
      rngs.emplace_back(o.seed * 0x9E3779B97F4A7C15ull + static_cast<uint64_t>(c));
    }
    for (int64_t c = 0; c < o.clients; ++c) backoffs.emplace_back(bp, rngs[static_cast<size_t>(c)]);
  }

  // The outage ends at t0: every client's call, refused during it, goes again at once.
  const Timestamp t0 = FromNanos(int64_t{1'700'000'000} * 1'000'000'000);
  std::priority_queue<Attempt, std::vector<Attempt>, std::greater<>> queue;
  for (int64_t c = 0; c < o.clients; ++c) queue.push({t0, c});

  std::unordered_map<int64_t, int64_t> per_second, per_ms;
  Timestamp last_success = t0;
  while (!queue.empty() && r.calls < o.max_calls) {
    const Attempt a = queue.top();
    queue.pop();
    if (a.at - t0 > o.max_time) break;
    ++r.calls;
    const int64_t since = (a.at - t0).count();
    r.peak_calls_per_second =
        std::max(r.peak_calls_per_second, ++per_second[since / 1'000'000'000]);
    if (since > 0)
      r.largest_retry_wave = std::max(r.largest_retry_wave, ++per_ms[since / 1'000'000]);
    if ((*limiter)->Decide("dependency", a.at, 1).allowed) {
      ++r.succeeded;
      last_success = a.at;
      continue;
    }
    ++r.rejected;
    const Duration wait =
        jitter ? *backoffs[static_cast<size_t>(a.client)].NextDelay() : o.immediate_delay;
    queue.push({a.at + wait, a.client});
  }
  r.complete = r.succeeded == o.clients;
  r.time_to_all_succeeded = last_success - t0;
  return r;
}

bool PrintRetryStorm(const std::vector<RetryStormResult>& results, const RetryStormOptions& o,
                     bool csv, std::FILE* out) {
  std::string text;
  if (csv) {
    text +=
        "policy,clients,limit,per_ms,burst,base_ms,cap_ms,seed,calls,rejected,succeeded,complete,"
        "time_to_all_succeeded_ms,peak_calls_per_second,largest_retry_wave\n";
  }
  for (const RetryStormResult& r : results) {
    if (csv) {
      text +=
          fmt::format("{},{},{},{},{},{},{},{},{},{},{},{},{},{},{}\n", RetryPolicyName(r.policy),
                      o.clients, o.limit, o.per / std::chrono::milliseconds(1), o.burst,
                      o.base / std::chrono::milliseconds(1), o.cap / std::chrono::milliseconds(1),
                      o.seed, r.calls, r.rejected, r.succeeded, r.complete ? "true" : "false",
                      r.complete ? fmt::format("{:.3f}", Millis(r.time_to_all_succeeded)) : "",
                      r.peak_calls_per_second, r.largest_retry_wave);
      continue;
    }
    if (!text.empty()) text += "\n";
    text += fmt::format("policy: {}\n", RetryPolicyName(r.policy));
    text += fmt::format("calls: {}\n", r.calls);
    text += fmt::format("rejected: {}\n", r.rejected);
    if (r.complete) {
      text += fmt::format("time until every client succeeded: {:.3f} ms\n",
                          Millis(r.time_to_all_succeeded));
    } else {
      text += fmt::format(
          "time until every client succeeded: never ({} of {} clients; the run "
          "stopped at --max-calls or --max-time)\n",
          r.succeeded, o.clients);
    }
    text += fmt::format("peak calls per second: {}\n", r.peak_calls_per_second);
    text +=
        fmt::format("largest retry wave (retries in one millisecond): {}\n", r.largest_retry_wave);
  }
  return std::fwrite(text.data(), 1, text.size(), out) == text.size() && std::fflush(out) == 0;
}

}  // namespace sluice::cli
