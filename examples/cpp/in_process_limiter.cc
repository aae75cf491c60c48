// An in-process limiter: each API key may make 5 requests a second, in bursts of up to 10 (a
// token bucket in sluice's memory store, no server involved). A manual clock makes the run
// reproducible; a real program passes sluice::MonotonicClock's Now() instead.
//
//   find_package(sluice CONFIG REQUIRED)  target_link_libraries(app PRIVATE sluice::sluice)
//   or: g++ -std=c++23 in_process_limiter.cc $(pkg-config --cflags --libs sluice)
#include <chrono>
#include <cstdio>

#include "sluice/clock.h"
#include "sluice/limit_spec.h"
#include "sluice/memory_store.h"

namespace {

// Sends `n` requests for `key` at the clock's now and prints how many passed.
void Burst(sluice::Limiter& limiter, const sluice::Clock& clock, const char* key, int n) {
  int allowed = 0;
  sluice::Decision last;
  for (int i = 0; i < n; ++i) {
    last = limiter.Decide(key, clock.Now(), /*cost=*/1);
    if (last.allowed) ++allowed;
  }
  const auto wait = std::chrono::duration_cast<std::chrono::milliseconds>(last.retry_after);
  std::printf("%s: %d of %d allowed, %lld left, retry after %lld ms\n", key, allowed, n,
              static_cast<long long>(last.remaining), static_cast<long long>(wait.count()));
}

}  // namespace

int main() {
  using namespace std::chrono_literals;
  sluice::LimitSpec spec;
  spec.algorithm = sluice::Algorithm::kTokenBucket;
  spec.limit = 5;
  spec.period = 1s;
  spec.burst = 10;
  auto limiter = sluice::MakeMemoryLimiter(spec);
  if (!limiter) {
    std::fprintf(stderr, "cannot make the limiter: %s\n", limiter.error().message.c_str());
    return 1;
  }
  std::printf("limit: %s\n", sluice::DescribeLimitSpec(spec).c_str());

  sluice::ManualClock clock;
  Burst(**limiter, clock, "api_key=alice", 12);  // the burst passes, the rest must wait
  Burst(**limiter, clock, "api_key=bob", 1);     // every key has a bucket of its own
  clock.Advance(500ms);                          // 2.5 tokens come back
  Burst(**limiter, clock, "api_key=alice", 3);
  return 0;
}
