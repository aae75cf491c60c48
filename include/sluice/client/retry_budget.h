// A retry budget: retries may add at most a fraction of the calls a client makes, so that when a
// server is down or overloaded its clients do not multiply the load they send it (each call
// retried up to 4 times is 5x the load exactly when the server can least take it). The idea of
// Finagle's RetryBudget and of gRPC's retry throttling.
//
//   client::RetryBudget budget({.retry_ratio = 0.1, .min_retries_per_second = 5});
//   budget.OnCall(clock.Now());                    // every first attempt
//   if (failed && budget.TryRetry(clock.Now())) retry; else give up;
//
// The account: over the last `ttl`, retries <= retry_ratio * calls + min_retries_per_second *
// ttl (the reserve lets a client that makes few calls still retry one). Calls and retries are
// counted in ten slots of ttl/10, so "the last ttl" is between 0.9 ttl and ttl long.
// Thread-safe. Time is a parameter; it never goes backwards here (an earlier `now` counts as the
// latest seen).
#ifndef SLUICE_CLIENT_RETRY_BUDGET_H_
#define SLUICE_CLIENT_RETRY_BUDGET_H_

#include <array>
#include <cstdint>
#include <mutex>

#include "sluice/status.h"
#include "sluice/time.h"

namespace sluice::client {

struct RetryBudgetOptions {
  double retry_ratio = 0.2;            // retries per call, over the ttl
  double min_retries_per_second = 10;  // the reserve, whatever the calls
  Duration ttl = std::chrono::seconds(10);
};

// An error naming the field when retry_ratio or min_retries_per_second is negative or not
// finite, or ttl is under 10 ns.
Result<RetryBudgetOptions> ValidateRetryBudgetOptions(const RetryBudgetOptions& options);

class RetryBudget {
 public:
  static constexpr int kSlots = 10;

  // `options` must be valid.
  explicit RetryBudget(const RetryBudgetOptions& options = {});

  void OnCall(Timestamp now);
  // Spends one retry if the budget holds one: true means "retry", false "give up".
  bool TryRetry(Timestamp now);
  // Retries the budget would allow now (may be fractional).
  double Balance(Timestamp now);

 private:
  struct Slot {
    int64_t index = -1;  // which ttl/10 period of time the counts are for
    int64_t calls = 0;
    int64_t retries = 0;
  };
  void Advance(Timestamp now);
  double BalanceLocked() const;

  RetryBudgetOptions options_;
  Duration slot_width_;
  std::mutex mu_;
  int64_t current_ = INT64_MIN;  // the latest slot index seen
  std::array<Slot, kSlots> slots_{};
};

}  // namespace sluice::client

#endif  // SLUICE_CLIENT_RETRY_BUDGET_H_
