// ns per decision through the memory store, for every algorithm: one hot key, 10k keys and 1M
// keys (uniformly random access), 1 and 2 threads (distinct keys per thread); and bytes per key.
// Run: build/bin/sluice_bench  (scripts/run-bench runs it with the settings in BENCHMARKS.md)
#include <benchmark/benchmark.h>
#include <malloc.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include "sluice/fixed_window.h"
#include "sluice/gcra.h"
#include "sluice/leaky_bucket.h"
#include "sluice/memory_store.h"
#include "sluice/redis_store.h"
#include "sluice/sliding_window_counter.h"
#include "sluice/sliding_window_log.h"
#include "sluice/token_bucket.h"

namespace sluice {
namespace {

constexpr int64_t kStart = 1'800'000'000'000'000'000;

// Generous limits so the admitted path (the common one) is measured; time advances 1us per
// decision per thread.
LimitSpec SpecFor(Algorithm a) {
  switch (a) {
    case Algorithm::kTokenBucket:
    case Algorithm::kGcra:
    case Algorithm::kLeakyBucket:
      return {a, 1'000'000, std::chrono::seconds(1), 1'000'000, false};
    case Algorithm::kSlidingWindowLog:
      return {a, 2'000, std::chrono::milliseconds(1), 0, false};
    default:
      return {a, 1'000'000, std::chrono::seconds(1), 0, false};
  }
}

// Writes "user-<i>" into buf (>= 24 bytes) without touching memory outside it: a caller's key
// is normally hot in cache (just parsed from the request), so the benchmark must not add a miss.
std::string_view KeyName(uint32_t i, char* buf) {
  char digits[12];
  int n = 0;
  do {
    digits[n++] = static_cast<char>('0' + i % 10);
    i /= 10;
  } while (i != 0);
  std::memcpy(buf, "user-", 5);
  for (int k = 0; k < n; ++k) buf[5 + k] = digits[n - 1 - k];
  return std::string_view(buf, 5 + n);
}

std::string KeyName(int64_t i) {
  char buf[24];
  return std::string(KeyName(static_cast<uint32_t>(i), buf));
}

// Shared across benchmark threads; built once per (algorithm, key count).
struct Fixture {
  std::unique_ptr<Limiter> limiter;
};

Fixture& GetFixture(Algorithm a, int64_t nkeys) {
  static std::unique_ptr<Fixture> cached;
  static Algorithm cached_alg;
  static int64_t cached_n = -1;
  if (!cached || cached_alg != a || cached_n != nkeys) {
    cached.reset();
    auto f = std::make_unique<Fixture>();
    MemoryStoreOptions options;
    options.max_bytes = size_t{4} << 30;
    if (const char* shards = std::getenv("SLUICE_BENCH_SHARDS")) options.shards = std::atoi(shards);
    f->limiter = std::move(*MakeMemoryLimiter(SpecFor(a), options));
    char buf[24];
    for (int64_t i = 0; i < nkeys; ++i) {
      f->limiter->Decide(KeyName(static_cast<uint32_t>(i), buf), FromNanos(kStart), 1);
    }
    cached = std::move(f);
    cached_alg = a;
    cached_n = nkeys;
  }
  return *cached;
}

void BM_Decide(benchmark::State& state) {
  const auto alg = static_cast<Algorithm>(state.range(0));
  const int64_t nkeys = state.range(1);
  Fixture& f = GetFixture(alg, nkeys);
  // Each thread works on its own half of the keys (or its own hot key).
  const int threads = state.threads();
  const int64_t per_thread = std::max<int64_t>(1, nkeys / threads);
  const int64_t base = (state.thread_index() * per_thread) % nkeys;
  std::mt19937_64 rng(state.thread_index() + 1);
  std::vector<uint32_t> order(1 << 16);
  for (auto& o : order) o = static_cast<uint32_t>(base + rng() % per_thread);
  const std::string hot = "hot-" + std::to_string(state.thread_index());
  int64_t now = kStart;
  size_t i = 0;
  char buf[24];
  for (auto _ : state) {
    now += 1000;
    const std::string_view key =
        nkeys == 1 ? std::string_view(hot) : KeyName(order[i++ & (order.size() - 1)], buf);
    benchmark::DoNotOptimize(f.limiter->Decide(key, FromNanos(now), 1));
  }
  state.SetItemsProcessed(state.iterations());
}

// The sharing-free ceiling for BM_Decide's two-thread figures: the same traffic, but each
// thread owns a whole store, so no cache line is ever written by both threads. The gap between
// the two is what sharing the store's lines costs (see BENCHMARKS.md).
void BM_DecideStorePerThread(benchmark::State& state) {
  const auto alg = static_cast<Algorithm>(state.range(0));
  const int64_t nkeys = state.range(1);
  const int64_t per_thread = std::max<int64_t>(1, nkeys / state.threads());
  const int64_t base = state.thread_index() * per_thread;
  MemoryStoreOptions options;
  options.max_bytes = size_t{4} << 30;
  auto limiter = std::move(*MakeMemoryLimiter(SpecFor(alg), options));
  char buf[24];
  for (int64_t i = 0; i < per_thread; ++i) {
    limiter->Decide(KeyName(static_cast<uint32_t>(base + i), buf), FromNanos(kStart), 1);
  }
  std::mt19937_64 rng(state.thread_index() + 1);
  std::vector<uint32_t> order(1 << 16);
  for (auto& o : order) o = static_cast<uint32_t>(base + rng() % per_thread);
  int64_t now = kStart;
  size_t i = 0;
  for (auto _ : state) {
    now += 1000;
    const std::string_view key = KeyName(order[i++ & (order.size() - 1)], buf);
    benchmark::DoNotOptimize(limiter->Decide(key, FromNanos(now), 1));
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_DecideStorePerThread)
    ->ArgsProduct({{0, 5}, {10'000}})
    ->ArgNames({"alg", "keys"})
    ->Threads(1)
    ->Threads(2)
    ->UseRealTime()
    ->MinTime(0.3);

// The same traffic through DecideBatch, 16 requests at a time: cache misses overlap.
void BM_DecideBatch(benchmark::State& state) {
  const auto alg = static_cast<Algorithm>(state.range(0));
  const int64_t nkeys = state.range(1);
  Fixture& f = GetFixture(alg, nkeys);
  std::mt19937_64 rng(1);
  std::vector<uint32_t> order(1 << 16);
  for (auto& o : order) o = static_cast<uint32_t>(rng() % nkeys);
  constexpr size_t kBatch = 16;
  char bufs[kBatch][24];
  DecideRequest requests[kBatch];
  Decision out[kBatch];
  int64_t now = kStart;
  size_t i = 0;
  for (auto _ : state) {
    for (size_t k = 0; k < kBatch; ++k) {
      now += 1000;
      requests[k] = {KeyName(order[i++ & (order.size() - 1)], bufs[k]), FromNanos(now), 1};
    }
    f.limiter->DecideBatch(requests, out);
    benchmark::DoNotOptimize(out);
  }
  state.SetItemsProcessed(state.iterations() * kBatch);
}

void Args(benchmark::internal::Benchmark* b) {
  for (Algorithm a : kAllAlgorithms) {
    for (int64_t keys : {int64_t{1}, int64_t{10'000}, int64_t{100'000}, int64_t{1'000'000}}) {
      b->Args({static_cast<int64_t>(a), keys});
    }
  }
  b->ArgNames({"alg", "keys"});
}
BENCHMARK(BM_Decide)->Apply(Args)->Threads(1)->Threads(2)->UseRealTime()->MinTime(0.3);
BENCHMARK(BM_DecideBatch)
    ->ArgsProduct({{0, 1, 2, 3, 4, 5}, {1'000'000}})
    ->ArgNames({"alg", "keys"})
    ->MinTime(0.3);

// The bare algorithm on one state, no store: what the store adds is the difference.
template <typename Alg>
void BM_BareAlgorithm(benchmark::State& state) {
  const Alg alg = *Alg::Create(SpecFor(static_cast<Algorithm>(state.range(0))));
  typename Alg::State s = alg.Initial(FromNanos(kStart));
  int64_t now = kStart;
  for (auto _ : state) {
    now += 1000;
    benchmark::DoNotOptimize(alg.Decide(s, FromNanos(now), 1));
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK_TEMPLATE(BM_BareAlgorithm, TokenBucket)->Arg(static_cast<int>(Algorithm::kTokenBucket));
BENCHMARK_TEMPLATE(BM_BareAlgorithm, LeakyBucket)->Arg(static_cast<int>(Algorithm::kLeakyBucket));
BENCHMARK_TEMPLATE(BM_BareAlgorithm, FixedWindow)->Arg(static_cast<int>(Algorithm::kFixedWindow));
BENCHMARK_TEMPLATE(BM_BareAlgorithm, SlidingWindowLog)
    ->Arg(static_cast<int>(Algorithm::kSlidingWindowLog));
BENCHMARK_TEMPLATE(BM_BareAlgorithm, SlidingWindowCounter)
    ->Arg(static_cast<int>(Algorithm::kSlidingWindowCounter));
BENCHMARK_TEMPLATE(BM_BareAlgorithm, Gcra)->Arg(static_cast<int>(Algorithm::kGcra));

// The same on a spec past 64-bit arithmetic (docs/algorithms.md, "The exact range"): 30001 per
// day with a burst of a million (the windows: 2^32-1 per year), decided in 128 bits; the admitted
// path, time advancing 1 us per decision.
LimitSpec WideSpecFor(Algorithm a) {
  if (HasBurst(a)) return {a, 30001, std::chrono::hours(24), 1'000'000, false};
  return {a, 4294967295, std::chrono::hours(24 * 365), 0, false};
}
template <typename Alg>
void BM_BareWide(benchmark::State& state) {
  const LimitSpec spec = WideSpecFor(static_cast<Algorithm>(state.range(0)));
  if (!NeedsWideArithmetic(spec)) state.SkipWithError("not a wide spec");
  const Alg alg = *Alg::Create(spec);
  typename Alg::State s = alg.Initial(FromNanos(kStart));
  int64_t now = kStart;
  for (auto _ : state) {
    now += 1000;
    benchmark::DoNotOptimize(alg.Decide(s, FromNanos(now), 1));
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK_TEMPLATE(BM_BareWide, WideTokenBucket)->Arg(static_cast<int>(Algorithm::kTokenBucket));
BENCHMARK_TEMPLATE(BM_BareWide, WideLeakyBucket)->Arg(static_cast<int>(Algorithm::kLeakyBucket));
BENCHMARK_TEMPLATE(BM_BareWide, SlidingWindowCounter)
    ->Arg(static_cast<int>(Algorithm::kSlidingWindowCounter));
BENCHMARK_TEMPLATE(BM_BareWide, Gcra)->Arg(static_cast<int>(Algorithm::kGcra));

// An attacker rotating keys: every decision is a new key against a full 16 MiB store, so every
// decision evicts.
void BM_FloodOfUniqueKeys(benchmark::State& state) {
  MemoryStoreOptions options;
  options.max_bytes = size_t{16} << 20;
  auto limiter = std::move(*MakeMemoryLimiter(SpecFor(Algorithm::kTokenBucket), options));
  char buf[24];
  uint32_t next = 0;
  for (uint32_t i = 0; i < 1'000'000; ++i)
    limiter->Decide(KeyName(next++, buf), FromNanos(kStart), 1);
  for (auto _ : state) {
    benchmark::DoNotOptimize(limiter->Decide(KeyName(next++, buf), FromNanos(kStart), 1));
  }
  state.counters["store_bytes"] = static_cast<double>(limiter->Stats().bytes);
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_FloodOfUniqueKeys)->MinTime(0.5);

// A dead Redis behind an open circuit breaker: what a fail-open decision costs.
void BM_RedisBreakerOpenFailOpen(benchmark::State& state) {
  RedisStoreOptions options;
  options.port = 1;  // nothing listens there: connection refused
  options.breaker_failures = 1;
  options.breaker_open_for = std::chrono::hours(1);
  auto limiter = std::move(*MakeRedisLimiter(SpecFor(Algorithm::kTokenBucket), options));
  limiter->Decide("k", FromNanos(kStart), 1);  // the failure that opens the breaker
  for (auto _ : state) benchmark::DoNotOptimize(limiter->Decide("k", FromNanos(kStart), 1));
  state.counters["store_errors"] = static_cast<double>(limiter->Stats().store_errors);
}
BENCHMARK(BM_RedisBreakerOpenFailOpen);

// Memory per key: what malloc hands out, and what the store accounts, for 1M short keys.
void BM_BytesPerKey(benchmark::State& state) {
  const auto alg = static_cast<Algorithm>(state.range(0));
  constexpr int kKeys = 1'000'000;
  std::vector<std::string> keys;
  keys.reserve(kKeys);
  for (int i = 0; i < kKeys; ++i) keys.push_back(KeyName(i));
  for (auto _ : state) {
    // Small blocks come from the arena (uordblks), big tables from mmap (hblkhd).
    const size_t before = mallinfo2().uordblks + mallinfo2().hblkhd;
    MemoryStoreOptions options;
    options.max_bytes = size_t{4} << 30;
    const bool wide = state.range(1) != 0;
    auto limiter = std::move(*MakeMemoryLimiter(wide ? WideSpecFor(alg) : SpecFor(alg), options));
    for (const std::string& k : keys) limiter->Decide(k, FromNanos(kStart), 1);
    const size_t after = mallinfo2().uordblks + mallinfo2().hblkhd;
    state.counters["heap_bytes_per_key"] = static_cast<double>(after - before) / kKeys;
    state.counters["accounted_bytes_per_key"] = static_cast<double>(limiter->Stats().bytes) / kKeys;
  }
}
BENCHMARK(BM_BytesPerKey)
    ->ArgsProduct({benchmark::CreateDenseRange(0, 5, 1), {0}})
    ->Args({static_cast<int>(Algorithm::kTokenBucket), 1})
    ->Args({static_cast<int>(Algorithm::kLeakyBucket), 1})
    ->Args({static_cast<int>(Algorithm::kGcra), 1})
    ->ArgNames({"alg", "wide"})
    ->Iterations(1)
    ->Unit(benchmark::kMillisecond);

// Envoy's per-request overrides: a transient limiter of a memory store, whose counters live in
// the store's override table keyed by (rate, key). ns per decision for a hot key and for 1M keys
// (random access), and accounted bytes per key once 1M keys are in.
void BM_DecideOverride(benchmark::State& state) {
  const int64_t nkeys = state.range(0);
  auto store = std::move(*OpenMemoryStore({.max_bytes = size_t{4} << 30}));
  LimiterOptions transient;
  transient.transient = true;
  auto limiter = std::move(*store->MakeLimiter(SpecFor(Algorithm::kTokenBucket), transient));
  char buf[24];
  for (int64_t i = 0; i < nkeys; ++i) {
    limiter->Decide(KeyName(static_cast<uint32_t>(i), buf), FromNanos(kStart), 1);
  }
  std::mt19937_64 rng(1);
  std::vector<uint32_t> order(1 << 16);
  for (auto& o : order) o = static_cast<uint32_t>(rng() % nkeys);
  int64_t now = kStart;
  size_t i = 0;
  for (auto _ : state) {
    now += 1000;
    benchmark::DoNotOptimize(
        limiter->Decide(KeyName(order[i++ & (order.size() - 1)], buf), FromNanos(now), 1));
  }
  const StoreStats s = store->Stats();
  state.counters["accounted_bytes_per_key"] =
      static_cast<double>(s.bytes) / static_cast<double>(s.keys);
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_DecideOverride)->Arg(1)->Arg(1'000'000)->ArgName("keys")->MinTime(0.3);

}  // namespace
}  // namespace sluice

BENCHMARK_MAIN();
