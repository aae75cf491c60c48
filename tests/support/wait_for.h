// Waiting in tests: on a condition, never for a length of time. The deadline is generous (a
// loaded 2-core machine under a sanitizer is slow); a test that passes returns as soon as the
// condition holds, so the deadline only bounds how long a failing one takes.
#ifndef SLUICE_TESTS_SUPPORT_WAIT_FOR_H_
#define SLUICE_TESTS_SUPPORT_WAIT_FOR_H_

#include <chrono>
#include <thread>

namespace sluice::testing {

inline constexpr std::chrono::milliseconds kWaitForDeadline{10'000};

// Polls `condition` until it holds (true) or `timeout` passes (false, after one last look).
template <typename Condition>
bool WaitFor(Condition condition, std::chrono::milliseconds timeout = kWaitForDeadline) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    if (condition()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(2));  // polling, not synchronising
  }
  return condition();
}

}  // namespace sluice::testing

#endif  // SLUICE_TESTS_SUPPORT_WAIT_FOR_H_
