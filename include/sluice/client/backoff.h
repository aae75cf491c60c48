// Exponential backoff with jitter, as analysed in the AWS Architecture Blog's "Exponential
// Backoff And Jitter": without jitter, clients that failed together retry together, in waves;
// jitter spreads them out. For the n-th retry (n = 0, 1, ...), with e = min(cap, base * 2^n):
//
//   kNone          e                                  (plain exponential)
//   kFull          uniform on [0, e]
//   kEqual         e/2 + uniform on [0, e/2]
//   kDecorrelated  min(cap, uniform on [base, 3 * previous]), previous starting at base
//
//   client::SeededRandom rng(seed);
//   client::Backoff backoff({.base = 100ms, .cap = 10s, .max_attempts = 5}, rng);
//   while (call fails with a retryable error) {
//     auto wait = backoff.NextDelay(retry_after_from_server);   // nullopt: give up
//     if (!wait) break;
//     sleep(*wait);
//   }
//
// A server's Retry-After is a floor: the delay is never shorter than it, whatever the jitter
// drew. Pure: no clock, the randomness injected. A Backoff is one operation's retries and is not
// thread-safe; share the policy, not the object.
#ifndef SLUICE_CLIENT_BACKOFF_H_
#define SLUICE_CLIENT_BACKOFF_H_

#include <optional>
#include <string_view>

#include "sluice/client/random.h"
#include "sluice/status.h"
#include "sluice/time.h"

namespace sluice::client {

enum class Jitter { kNone, kFull, kEqual, kDecorrelated };

// "none", "full", "equal", "decorrelated".
std::string_view JitterName(Jitter jitter);
Result<Jitter> ParseJitter(std::string_view name);

struct BackoffPolicy {
  Duration base = std::chrono::milliseconds(100);
  Duration cap = std::chrono::seconds(20);
  int max_attempts = 5;  // calls in all, the first included (gRPC's maxAttempts); 1: no retry
  Jitter jitter = Jitter::kFull;
};

// An error naming the field when base <= 0, cap < base or max_attempts < 1.
Result<BackoffPolicy> ValidateBackoffPolicy(const BackoffPolicy& policy);

// min(cap, base * 2^retry), without overflow for any retry >= 0.
Duration ExponentialCeiling(const BackoffPolicy& policy, int retry);

// The delay before retry number `retry` (0 for the first), given the previous delay (for
// kDecorrelated; base before the first) and `u` uniform on [0, 1).
Duration JitteredDelay(const BackoffPolicy& policy, int retry, Duration previous, double u);

class Backoff {
 public:
  // `policy` must be valid (ValidateBackoffPolicy); `random` must outlive the Backoff.
  Backoff(const BackoffPolicy& policy, Random& random);

  // The wait before the next retry, at least `retry_after` when the server gave one; nullopt
  // once max_attempts calls have been made (no wait is drawn then).
  std::optional<Duration> NextDelay(std::optional<Duration> retry_after = std::nullopt);

  int retries() const { return retries_; }  // delays handed out so far
  void Reset();                             // a new operation: the first retry again

 private:
  BackoffPolicy policy_;
  Random& random_;
  int retries_ = 0;
  Duration previous_;
};

}  // namespace sluice::client

#endif  // SLUICE_CLIENT_BACKOFF_H_
