// `sluice simulate retry-storm`: N clients, turned away together by an outage, retry against a
// rate limiter under one retry policy; on a manual clock, with seeded jitter, so a run is a
// pure function of its parameters. Shows what the AWS Architecture Blog's "Exponential Backoff
// And Jitter" shows: without jitter the clients retry in synchronized waves; full jitter
// spreads them and needs far fewer calls (docs/client.md has the table).
#ifndef SLUICE_CLI_RETRY_STORM_H_
#define SLUICE_CLI_RETRY_STORM_H_

#include <cstdint>
#include <cstdio>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "sluice/status.h"
#include "sluice/time.h"

namespace sluice::cli {

enum class RetryPolicy { kImmediate, kExponential, kFull, kEqual, kDecorrelated };

// "immediate", "exponential" (no jitter), "full", "equal", "decorrelated".
std::string_view RetryPolicyName(RetryPolicy policy);
Result<RetryPolicy> ParseRetryPolicy(std::string_view name);
inline constexpr RetryPolicy kAllRetryPolicies[] = {
    RetryPolicy::kImmediate, RetryPolicy::kExponential, RetryPolicy::kFull, RetryPolicy::kEqual,
    RetryPolicy::kDecorrelated};

struct RetryStormOptions {
  int64_t clients = 100;
  // The server: a token bucket of `limit` per `per` holding at most `burst` tokens. A small
  // burst makes its capacity a rate, not a reserve: calls that arrive together compete for it,
  // as writers do in the AWS analysis's optimistic-concurrency model.
  int64_t limit = 100;
  Duration per = std::chrono::seconds(1);
  int64_t burst = 1;
  Duration base = std::chrono::milliseconds(100);
  Duration cap = std::chrono::seconds(10);
  Duration immediate_delay = std::chrono::milliseconds(1);  // "immediate": one round trip
  uint64_t seed = 1;
  int64_t max_calls = 20'000'000;             // the run stops here (complete = false)
  Duration max_time = std::chrono::hours(1);  // ... or here
};

// An error naming the option when a count or duration is out of range.
Result<RetryStormOptions> ValidateRetryStormOptions(const RetryStormOptions& options);

struct RetryStormResult {
  RetryPolicy policy = RetryPolicy::kImmediate;
  int64_t calls = 0;                  // every attempt, the first ones included
  int64_t rejected = 0;               // attempts the limiter refused
  int64_t succeeded = 0;              // clients that got through
  bool complete = false;              // every client succeeded within max_calls and max_time
  Duration time_to_all_succeeded{0};  // from the first call to the last success (if complete)
  int64_t peak_calls_per_second = 0;  // the most calls in one second [k s, k+1 s)
  // The most retries in one millisecond (the first calls, all at t0, left out): lockstep
  // retries show here.
  int64_t largest_retry_wave = 0;
};

// Runs one policy; `options` must be valid.
RetryStormResult SimulateRetryStorm(RetryPolicy policy, const RetryStormOptions& options);

// Prints results as text (a block per policy, with a `calls: N` line) or CSV (a header and a
// row per policy; the columns are documented in docs/client.md). False if a write failed.
bool PrintRetryStorm(const std::vector<RetryStormResult>& results, const RetryStormOptions& options,
                     bool csv, std::FILE* out);

}  // namespace sluice::cli

#endif  // SLUICE_CLI_RETRY_STORM_H_
