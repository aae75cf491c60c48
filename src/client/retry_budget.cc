#include "sluice/client/retry_budget.h"

#include <cmath>

namespace sluice::client {

Result<RetryBudgetOptions> ValidateRetryBudgetOptions(const RetryBudgetOptions& options) {
  if (!std::isfinite(options.retry_ratio) || options.retry_ratio < 0) {
    return MakeError("retry budget retry_ratio must be a number >= 0");
  }
  if (!std::isfinite(options.min_retries_per_second) || options.min_retries_per_second < 0) {
    return MakeError("retry budget min_retries_per_second must be a number >= 0");
  }
  if (options.ttl < Duration(RetryBudget::kSlots)) {
    return MakeError("retry budget ttl must be at least 10ns");
  }
  return options;
}

RetryBudget::RetryBudget(const RetryBudgetOptions& options)
    : options_(options), slot_width_(options.ttl / kSlots) {}

void RetryBudget::Advance(Timestamp now) {
  const int64_t index = ToNanos(now) / slot_width_.count() - (ToNanos(now) < 0 ? 1 : 0);
  if (index > current_) current_ = index;
  Slot& slot = slots_[static_cast<size_t>(((current_ % kSlots) + kSlots) % kSlots)];
  if (slot.index != current_) slot = Slot{current_, 0, 0};
}

double RetryBudget::BalanceLocked() const {
  int64_t calls = 0, retries = 0;
  for (const Slot& s : slots_) {
    if (s.index > current_ - kSlots) {
      calls += s.calls;
      retries += s.retries;
    }
  }
  const double reserve =
      options_.min_retries_per_second * std::chrono::duration<double>(options_.ttl).count();
  return options_.retry_ratio * static_cast<double>(calls) + reserve - static_cast<double>(retries);
}

void RetryBudget::OnCall(Timestamp now) {
  std::lock_guard lock(mu_);
  Advance(now);
  ++slots_[static_cast<size_t>(((current_ % kSlots) + kSlots) % kSlots)].calls;
}

bool RetryBudget::TryRetry(Timestamp now) {
  std::lock_guard lock(mu_);
  Advance(now);
  if (BalanceLocked() < 1.0) return false;
  ++slots_[static_cast<size_t>(((current_ % kSlots) + kSlots) % kSlots)].retries;
  return true;
}

double RetryBudget::Balance(Timestamp now) {
  std::lock_guard lock(mu_);
  Advance(now);
  return BalanceLocked();
}

}  // namespace sluice::client
