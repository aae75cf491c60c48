#include "store/forwarding.h"

#include <algorithm>
#include <condition_variable>
#include <mutex>

namespace sluice::internal {

InnerRequest UnwrapChecks(const Store* layer, std::span<const LimitCheck> checks) {
  InnerRequest inner;
  inner.checks.assign(checks.begin(), checks.end());
  for (LimitCheck& c : inner.checks) {
    // Every limiter a layer makes is a ForwardingLimiter; any other is invalid in the inner store.
    c.limiter = c.limiter != nullptr && c.limiter->owner() == layer
                    ? static_cast<const ForwardingLimiter*>(c.limiter)->Unwrap(inner.held)
                    : nullptr;
  }
  return inner;
}

void WaitForDecideAll(Store& store, std::span<const LimitCheck> checks, Timestamp now,
                      std::span<Decision> out) {
  std::mutex mu;
  std::condition_variable cv;
  bool ready = false;
  store.DecideAllAsync(checks, now, [&](std::span<const Decision> decided) {
    std::copy(decided.begin(), decided.end(), out.begin());
    // Notified under the lock: the waiter cannot return (and destroy cv) before this is done.
    std::lock_guard<std::mutex> lock(mu);
    ready = true;
    cv.notify_one();
  });
  std::unique_lock<std::mutex> lock(mu);
  cv.wait(lock, [&] { return ready; });
}

}  // namespace sluice::internal
