// The memory store's snapshots (--state-dir; BENCHMARKS.md, "Counters that survive a restart"):
//  1. size and time: a store of N live counters (1M by default) per algorithm, saved (the bytes
//     of the file, the time to copy them out of the shards and encode) and loaded into a new
//     store whose limiter takes them back (time to parse, decode and insert);
//  2. the decision path beside it: one thread deciding on random keys of the 1M, its latency
//     percentiles measured per decision, in alternating rounds without and with a second thread
//     saving snapshots every --interval-ms (0: back to back, the worst case: a snapshot always
//     under way, where sluiced's default takes one every 10 s).
// Run: build/bin/snapshot_bench [--smoke] [--counters N] [--rounds R] [--round-ms MS]
//                                [--interval-ms MS]  (0, the default: snapshots back to back)
//   --smoke  20k counters, 2 short rounds (make test: scripts/run-snapshot-bench --smoke); exits
//            non-zero when a snapshot does not restore every counter it saved.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "sluice/memory_store.h"

namespace sluice {
namespace {

using Clock = std::chrono::steady_clock;
constexpr Timestamp kNow = FromNanos(int64_t{1'800'000'000'000'000'000});

double Ms(Clock::duration d) { return std::chrono::duration<double, std::milli>(d).count(); }

struct Options {
  size_t counters = 1'000'000;
  int rounds = 6;
  std::chrono::milliseconds round_length{2000};
  // Between the starts of two snapshots in the rounds with snapshots; 0: back to back.
  std::chrono::milliseconds interval{0};
  bool smoke = false;
};

std::shared_ptr<Store> OpenStore() {
  auto store = OpenMemoryStore({.max_bytes = size_t{2} << 30});
  if (!store) {
    std::fprintf(stderr, "snapshot_bench: %s\n", store.error().message.c_str());
    std::exit(1);
  }
  return *store;
}

std::unique_ptr<Limiter> MakeLimiter(Store& store, const LimitSpec& spec) {
  LimiterOptions o;
  o.id = "bench";
  auto made = store.MakeLimiter(spec, o);
  if (!made) {
    std::fprintf(stderr, "snapshot_bench: %s\n", made.error().message.c_str());
    std::exit(1);
  }
  return std::move(*made);
}

std::string Key(size_t i) { return "tenant-" + std::to_string(i); }

// Part 1 for one algorithm: a line of the table; false if the restore lost counters.
bool SizeAndTime(const char* name, const LimitSpec& spec, size_t n) {
  auto store = OpenStore();
  auto limiter = MakeLimiter(*store, spec);
  for (size_t i = 0; i < n; ++i) limiter->Decide(Key(i), kNow, 1);
  SnapshotSaved saved;
  const auto t0 = Clock::now();
  const std::string bytes = SnapshotsOf(*store)->Save(kNow, Duration(0), &saved);
  const auto t1 = Clock::now();
  auto restored_store = OpenStore();
  const auto t2 = Clock::now();
  SnapshotsOf(*restored_store)->Load(bytes, kNow, Duration(0));
  auto restored = MakeLimiter(*restored_store, spec);
  const SnapshotRestored r = SnapshotsOf(*restored_store)->FinishRestore();
  const auto t3 = Clock::now();
  std::printf("%-24s %10zu %12.1f %8.1f %10.1f %10.1f\n", name, static_cast<size_t>(saved.counters),
              static_cast<double>(bytes.size()) / (1 << 20),
              static_cast<double>(bytes.size()) / static_cast<double>(saved.counters), Ms(t1 - t0),
              Ms(t3 - t2));
  return saved.counters == n && r.restored == n;
}

struct Percentiles {
  double p50, p99, p999, max;
  size_t decisions;
};

// One round: a thread deciding on random keys for `length`, with (`saving`) or without a
// second thread saving snapshots back to back.
Percentiles Round(Store& store, Limiter& limiter, size_t n, bool saving, const Options& o,
                  int* saves) {
  std::atomic<bool> stop{false};
  std::thread saver;
  *saves = 0;
  if (saving) {
    saver = std::thread([&] {
      auto next = Clock::now();
      while (!stop.load(std::memory_order_relaxed)) {
        const std::string bytes = SnapshotsOf(store)->Save(kNow, Duration(0));
        ++*saves;
        next += o.interval;
        while (!stop.load(std::memory_order_relaxed) && Clock::now() < next) {
          std::this_thread::sleep_for(std::chrono::milliseconds(1));  // a timer, as sluiced's
        }
      }
    });
  }
  std::vector<std::string> keys;
  std::mt19937_64 rng(42);
  for (int i = 0; i < 4096; ++i) keys.push_back(Key(rng() % n));
  std::vector<uint32_t> ns;
  ns.reserve(size_t{8} << 20);
  const auto end = Clock::now() + o.round_length;
  size_t i = 0;
  while (Clock::now() < end) {
    const std::string& key = keys[i++ & 4095];
    const auto a = Clock::now();
    limiter.Decide(key, kNow, 0);
    const auto b = Clock::now();
    ns.push_back(static_cast<uint32_t>(std::min<int64_t>(
        std::chrono::duration_cast<std::chrono::nanoseconds>(b - a).count(), UINT32_MAX)));
  }
  stop = true;
  if (saver.joinable()) saver.join();
  std::sort(ns.begin(), ns.end());
  const auto at = [&](double q) {
    return static_cast<double>(ns[static_cast<size_t>(q * (ns.size() - 1))]);
  };
  return {at(0.5), at(0.99), at(0.999), static_cast<double>(ns.back()), ns.size()};
}

void BesideTheDecisions(const Options& o) {
  auto store = OpenStore();
  const LimitSpec spec{Algorithm::kFixedWindow, 1'000'000, std::chrono::hours(1)};
  auto limiter = MakeLimiter(*store, spec);
  for (size_t i = 0; i < o.counters; ++i) limiter->Decide(Key(i), kNow, 1);
  std::printf("\nround  snapshots   decisions   p50 ns   p99 ns   p99.9 ns     max ns   saves\n");
  for (int r = 0; r < o.rounds; ++r) {
    // Alternating order (off, on, on, off, ...) so a drift in the machine's load hits both.
    const bool saving = (r % 4 == 1) || (r % 4 == 2);
    int saves = 0;
    const Percentiles p = Round(*store, *limiter, o.counters, saving, o, &saves);
    std::printf("%5d  %9s  %10zu  %7.0f  %7.0f  %9.0f  %9.0f  %6d\n", r + 1, saving ? "on" : "off",
                p.decisions, p.p50, p.p99, p.p999, p.max, saves);
  }
}

}  // namespace
}  // namespace sluice

int main(int argc, char** argv) {
  using namespace sluice;
  Options o;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--smoke") == 0) {
      o.smoke = true;
      o.counters = 20'000;
      o.rounds = 2;
      o.round_length = std::chrono::milliseconds(200);
    } else if (std::strcmp(argv[i], "--counters") == 0 && i + 1 < argc) {
      o.counters = std::strtoull(argv[++i], nullptr, 10);
    } else if (std::strcmp(argv[i], "--interval-ms") == 0 && i + 1 < argc) {
      o.interval = std::chrono::milliseconds(std::atoi(argv[++i]));
    } else if (std::strcmp(argv[i], "--round-ms") == 0 && i + 1 < argc) {
      o.round_length = std::chrono::milliseconds(std::atoi(argv[++i]));
    } else if (std::strcmp(argv[i], "--rounds") == 0 && i + 1 < argc) {
      o.rounds = std::atoi(argv[++i]);
    } else {
      std::fprintf(stderr,
                   "usage: snapshot_bench [--smoke] [--counters N] [--rounds R] [--round-ms MS] "
                   "[--interval-ms MS]\n");
      return 2;
    }
  }
  using enum Algorithm;
  const struct {
    const char* name;
    LimitSpec spec;
  } algs[] = {
      {"token_bucket", {kTokenBucket, 100, std::chrono::seconds(1)}},
      {"gcra", {kGcra, 100, std::chrono::seconds(1)}},
      {"leaky_bucket", {kLeakyBucket, 100, std::chrono::seconds(1)}},
      {"fixed_window", {kFixedWindow, 1'000'000, std::chrono::hours(1)}},
      {"sliding_window_counter", {kSlidingWindowCounter, 1'000, std::chrono::hours(1)}},
      {"sliding_window_log", {kSlidingWindowLog, 100, std::chrono::hours(1)}},
  };
  std::printf("algorithm                  counters   file MiB  B/counter    save ms    load ms\n");
  bool ok = true;
  for (const auto& a : algs) ok &= SizeAndTime(a.name, a.spec, o.counters);
  BesideTheDecisions(o);
  if (!ok) {
    std::fprintf(stderr, "snapshot_bench: a restore did not take back every counter saved\n");
    return 1;
  }
  return 0;
}
