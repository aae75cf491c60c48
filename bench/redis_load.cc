// Load driver for the Redis store: C caller threads, each deciding on keys drawn uniformly at
// random from a key space, through one RedisStore, for a fixed time. Prints one line of
// key=value pairs: decisions/s, Redis commands per decision, the pipelining factor
// (commands per socket write) and p50/p99 latency of Decide as the caller sees it.
//
//   redis_load --port 6390 --algorithm token_bucket --callers 64 --connections 2 --seconds 5
//
// Decide blocks its caller until Redis answers, so concurrency is the number of callers, the
// same as redis-benchmark -c (one request in flight per client).
//
// It also prints what the ceiling run (redis-benchmark EVALSHA) needs, so that run executes the
// store's own script with the store's own arguments:
//   redis_load --print-script token_bucket   the exact Lua source the store loads (no newline
//                                            added, so SCRIPT LOAD gives the store's SHA)
//   redis_load --print-args token_bucket     ARGV after `now`, one per line (spec args, cost,
//                                            flags), as the store sends them
// scripts/run-redis-bench checks both against what the store really sends (SCRIPT EXISTS on the
// SHA, and a MONITOR capture of one call).
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <future>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "sluice/algorithm.h"
#include "sluice/limit_spec.h"
#include "sluice/redis_store.h"
#include "store/redis/redis_script_choice.h"

namespace sluice {
namespace {

struct Options {
  std::string host = "127.0.0.1";
  int port = 6379;
  Algorithm algorithm = Algorithm::kTokenBucket;
  int callers = 1;
  int inflight = 0;  // > 0: DecideAsync from one thread with this many decisions in flight
  int connections = 2;
  double seconds = 5;
  double warmup = 1;
  uint32_t keys = 10'000;
  // 100 per second: with 10k keys and < 200k decisions/s a key sees < 20 hits/s, so nearly every
  // decision takes the admitted path, which writes (the costlier one for Redis).
  int64_t limit = 100;
  int64_t per_ms = 1000;
  int command_timeout_ms = 200;
  std::string print;   // "script" or "args": print and exit
  std::string tls_ca;  // non-empty: rediss://, verifying the server against this CA file
};

[[noreturn]] void Usage(const char* why) {
  if (why != nullptr) std::fprintf(stderr, "redis_load: %s\n", why);
  std::fprintf(
      stderr,
      "usage: redis_load [--host H] [--port P] [--algorithm ALG] [--callers C | --inflight N]\n"
      "                  [--connections N] [--seconds S] [--warmup S] [--keys K]\n"
      "                  [--limit L] [--per-ms MS] [--timeout-ms MS] [--tls-ca FILE]\n"
      "       redis_load --print-script ALG | --print-args ALG [--limit L] [--per-ms "
      "MS]\n");
  std::exit(2);
}

Options ParseArgs(int argc, char** argv) {
  Options o;
  auto value = [&](int& i) -> std::string_view {
    if (i + 1 >= argc) Usage("missing value");
    return argv[++i];
  };
  auto number = [&](int& i) -> double {
    const std::string v(value(i));
    char* end = nullptr;
    const double d = std::strtod(v.c_str(), &end);
    if (end == v.c_str() || *end != '\0') Usage("expected a number");
    return d;
  };
  auto algorithm = [&](int& i) {
    const auto a = ParseAlgorithm(value(i));
    if (!a) Usage("unknown algorithm");
    return *a;
  };
  for (int i = 1; i < argc; ++i) {
    const std::string_view a = argv[i];
    if (a == "--host") {
      o.host = std::string(value(i));
    } else if (a == "--port") {
      o.port = static_cast<int>(number(i));
    } else if (a == "--algorithm") {
      o.algorithm = algorithm(i);
    } else if (a == "--callers") {
      o.callers = static_cast<int>(number(i));
    } else if (a == "--inflight") {
      o.inflight = static_cast<int>(number(i));
    } else if (a == "--connections") {
      o.connections = static_cast<int>(number(i));
    } else if (a == "--seconds") {
      o.seconds = number(i);
    } else if (a == "--warmup") {
      o.warmup = number(i);
    } else if (a == "--keys") {
      o.keys = static_cast<uint32_t>(number(i));
    } else if (a == "--limit") {
      o.limit = static_cast<int64_t>(number(i));
    } else if (a == "--per-ms") {
      o.per_ms = static_cast<int64_t>(number(i));
    } else if (a == "--timeout-ms") {
      o.command_timeout_ms = static_cast<int>(number(i));
    } else if (a == "--tls-ca") {
      o.tls_ca = std::string(value(i));
    } else if (a == "--print-script" || a == "--print-args") {
      o.print = a == "--print-script" ? "script" : "args";
      o.algorithm = algorithm(i);
    } else {
      Usage("unknown argument");
    }
  }
  if (o.callers < 1 || o.keys < 1 || o.seconds <= 0 || o.warmup < 0) Usage("bad value");
  return o;
}

LimitSpec SpecOf(const Options& o) {
  return {o.algorithm, o.limit, std::chrono::milliseconds(o.per_ms), 0, false};
}

// Per-caller results; padded so the callers' counters do not share cache lines.
struct alignas(64) CallerResult {
  uint64_t decisions = 0;
  uint64_t rejected = 0;
  uint64_t degraded = 0;
  std::vector<uint32_t> latency_ns;
};

// "user-<i>" into buf, no allocation: the driver itself should cost little next to a round trip.
std::string_view KeyName(uint32_t i, char* buf) {
  char digits[12];
  int n = 0;
  do {
    digits[n++] = static_cast<char>('0' + i % 10);
    i /= 10;
  } while (i != 0);
  std::memcpy(buf, "user-", 5);
  for (int k = 0; k < n; ++k) buf[5 + k] = digits[n - 1 - k];
  return std::string_view(buf, 5 + static_cast<size_t>(n));
}

int Run(const Options& o) {
  RedisStoreOptions so;
  so.host = o.host;
  so.port = o.port;
  if (!o.tls_ca.empty()) so.tls = {.enabled = true, .ca_file = o.tls_ca};
  so.connections = o.connections;
  // Above the default 50 ms: 64 callers on 2 shared cores can see a slow scheduling round, and
  // a timeout would turn a slow decision into a (fast) degraded one and flatter the figures.
  so.command_timeout = std::chrono::milliseconds(o.command_timeout_ms);
  so.use_server_time = true;
  auto store = OpenRedisStore(so);
  if (!store) {
    std::fprintf(stderr, "redis_load: %s\n", store.error().message.c_str());
    return 1;
  }
  auto limiter = (*store)->MakeLimiter(SpecOf(o), "bench", /*fail_open=*/true);
  if (!limiter) {
    std::fprintf(stderr, "redis_load: %s\n", limiter.error().message.c_str());
    return 1;
  }
  Limiter& lim = **limiter;

  // 0: warm-up (connections made, script loaded, keys created), 1: measured, 2: stop.
  std::atomic<int> phase{0};
  const int lanes = o.inflight > 0 ? o.inflight : o.callers;
  std::vector<CallerResult> results(static_cast<size_t>(lanes));
  std::vector<std::thread> threads;
  // --inflight: no caller threads. Each lane is a chain of DecideAsync calls, the next one
  // issued from the previous one's callback (on the store's I/O thread), so `inflight`
  // decisions are always outstanding, as with a Node client's promises.
  struct Lane {
    uint64_t x;
    char buf[24];
    std::chrono::steady_clock::time_point t0;
  };
  std::vector<Lane> lane_state(static_cast<size_t>(o.inflight));
  std::atomic<int> lanes_running{o.inflight};
  std::promise<void> lanes_done;
  std::function<void(int)> issue = [&](int c) {
    Lane& l = lane_state[static_cast<size_t>(c)];
    l.x ^= l.x << 13;
    l.x ^= l.x >> 7;
    l.x ^= l.x << 17;
    const auto key = KeyName(static_cast<uint32_t>((l.x >> 32) % o.keys), l.buf);
    l.t0 = std::chrono::steady_clock::now();
    lim.DecideAsync(key, FromNanos(0), 1, [&, c](const Decision& d) {
      const auto t1 = std::chrono::steady_clock::now();
      const int p = phase.load(std::memory_order_relaxed);
      CallerResult& r = results[static_cast<size_t>(c)];
      if (p == 1) {
        ++r.decisions;
        if (d.degraded) {
          ++r.degraded;
        } else if (!d.allowed) {
          ++r.rejected;
        }
        r.latency_ns.push_back(static_cast<uint32_t>(std::min<int64_t>(
            UINT32_MAX,
            std::chrono::nanoseconds(t1 - lane_state[static_cast<size_t>(c)].t0).count())));
      }
      if (p == 2) {
        if (lanes_running.fetch_sub(1) == 1) lanes_done.set_value();
        return;
      }
      issue(c);
    });
  };
  for (int c = 0; c < o.inflight; ++c) {
    lane_state[static_cast<size_t>(c)].x = 0x9e3779b97f4a7c15ULL * static_cast<uint64_t>(c + 1);
    results[static_cast<size_t>(c)].latency_ns.reserve(1 << 16);
    issue(c);
  }
  for (int c = 0; o.inflight == 0 && c < o.callers; ++c) {
    threads.emplace_back([&, c] {
      CallerResult& r = results[static_cast<size_t>(c)];
      r.latency_ns.reserve(1 << 16);
      uint64_t x = 0x9e3779b97f4a7c15ULL * static_cast<uint64_t>(c + 1);
      char buf[24];
      for (;;) {
        const int p = phase.load(std::memory_order_relaxed);
        if (p == 2) break;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        const auto key = KeyName(static_cast<uint32_t>((x >> 32) % o.keys), buf);
        const auto t0 = std::chrono::steady_clock::now();
        const Decision d = lim.Decide(key, FromNanos(0), 1);
        const auto t1 = std::chrono::steady_clock::now();
        if (p != 1) continue;
        ++r.decisions;
        if (d.degraded) {
          ++r.degraded;
        } else if (!d.allowed) {
          ++r.rejected;
        }
        r.latency_ns.push_back(static_cast<uint32_t>(
            std::min<int64_t>(UINT32_MAX, std::chrono::nanoseconds(t1 - t0).count())));
      }
    });
  }
  std::this_thread::sleep_for(std::chrono::duration<double>(o.warmup));
  const RedisStoreStats before = (*store)->RedisStats();
  const auto start = std::chrono::steady_clock::now();
  phase.store(1);
  std::this_thread::sleep_for(std::chrono::duration<double>(o.seconds));
  phase.store(2);
  const auto end = std::chrono::steady_clock::now();
  // Decisions begun in the measured phase finish after `end`; their commands are counted in
  // `after`, and the decisions themselves too, so the ratios below stay exact.
  for (auto& t : threads) t.join();
  if (o.inflight > 0) lanes_done.get_future().wait();
  const RedisStoreStats after = (*store)->RedisStats();

  uint64_t decisions = 0, rejected = 0, degraded = 0;
  std::vector<uint32_t> lat;
  for (const auto& r : results) {
    decisions += r.decisions;
    rejected += r.rejected;
    degraded += r.degraded;
    lat.insert(lat.end(), r.latency_ns.begin(), r.latency_ns.end());
  }
  auto pct = [&](double q) -> double {
    if (lat.empty()) return 0;
    const size_t k =
        std::min(lat.size() - 1, static_cast<size_t>(q * static_cast<double>(lat.size())));
    std::nth_element(lat.begin(), lat.begin() + static_cast<std::ptrdiff_t>(k), lat.end());
    return lat[k] / 1000.0;
  };
  const double secs = std::chrono::duration<double>(end - start).count();
  const double requests = static_cast<double>(after.requests - before.requests);
  const double batches = static_cast<double>(after.batches - before.batches);
  const double p50 = pct(0.50);
  const double p99 = pct(0.99);
  std::printf(
      "alg=%s callers=%d inflight=%d connections=%d keys=%u seconds=%.2f decisions=%llu "
      "decisions_per_s=%.0f cmds_per_decision=%.3f pipelining=%.2f p50_us=%.1f p99_us=%.1f "
      "rejected=%llu degraded=%llu\n",
      std::string(AlgorithmName(o.algorithm)).c_str(), o.inflight > 0 ? 0 : o.callers, o.inflight,
      o.connections, o.keys, secs, static_cast<unsigned long long>(decisions),
      static_cast<double>(decisions) / secs,
      decisions > 0 ? requests / static_cast<double>(decisions) : 0.0,
      batches > 0 ? requests / batches : 0.0, p50, p99, static_cast<unsigned long long>(rejected),
      static_cast<unsigned long long>(degraded));
  // Degraded decisions never reached Redis: a run with any is not a throughput figure.
  return degraded == 0 ? 0 : 3;
}

}  // namespace
}  // namespace sluice

int main(int argc, char** argv) {
  const sluice::Options o = sluice::ParseArgs(argc, argv);
  if (!o.print.empty()) {
    // The store's own choice of script and arguments (store/redis/redis_script_choice.h).
    auto call = sluice::internal::ScriptFor(sluice::SpecOf(o));
    if (!call) {
      std::fprintf(stderr, "redis_load: %s\n", call.error().message.c_str());
      return 2;
    }
    if (o.print == "script") {
      std::fwrite(call->script->source.data(), 1, call->script->source.size(), stdout);
      return 0;
    }
    for (const std::string& p : call->params) std::printf("%s\n", p.c_str());
    std::printf("1\n0\n");  // cost, flags (a decision: redis_scripts.h)
    return 0;
  }
  return sluice::Run(o);
}
