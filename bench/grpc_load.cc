// gRPC load driver for sluiced's Envoy front end (scripts/run-server-bench; BENCHMARKS.md,
// "sluiced server"): envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit through the
// client generated from proto/, with a fixed number of calls in flight for a fixed time.
//
//   grpc_load --target 127.0.0.1:8081 --inflight 64 --seconds 10 [--warmup 2] [--threads 1]
//             [--channels 1] [--seed 1] [--tls-ca ca.pem [--tls-name localhost]]
//
// With --tls-ca, the channels are TLS (grpc::SslCredentials trusting that CA, the server's
// name checked as --tls-name), for the gRPC-over-TLS figures (scripts/run-grpc-tls-bench).
//
// Each of --threads threads owns a completion queue and its share of the in-flight calls (the
// async API: a thread starts a call, and starts the next one from the completion of the
// previous, so exactly --inflight calls are outstanding at any time). Calls go over --channels
// channels (each its own HTTP/2 connection), assigned round robin to the calls. Requests are drawn
// from a pool built up front with the same descriptor mix as bench/wrk/check.lua (domain "api"
// of examples/sluice.yaml). Calls that complete during the warm-up are not counted; after it,
// every completed call's latency (start to completion, as the client sees it) is recorded.
//
// Prints one line: calls/s, OK / OVER_LIMIT / error counts, p50 / p90 / p99 / p99.9 in µs.
#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <memory>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "envoy/service/ratelimit/v3/rls.grpc.pb.h"

namespace {

namespace rls = envoy::service::ratelimit::v3;
using Clock = std::chrono::steady_clock;

struct Options {
  std::string target = "127.0.0.1:8081";
  int inflight = 1;
  double seconds = 10;
  double warmup = 2;
  int threads = 1;
  int channels = 1;
  unsigned seed = 1;
  int pool = 16384;
  std::string tls_ca;  // a PEM file: TLS channels trusting it
  std::string tls_name = "localhost";
};

[[noreturn]] void Usage() {
  std::fprintf(stderr,
               "usage: grpc_load [--target HOST:PORT] [--inflight N] [--seconds S] "
               "[--warmup S] [--threads N] [--channels N] [--seed N] [--pool N] "
               "[--tls-ca FILE [--tls-name NAME]]\n");
  std::exit(2);
}

Options Parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (i + 1 >= argc) Usage();
    const char* v = argv[++i];
    if (a == "--target")
      o.target = v;
    else if (a == "--inflight")
      o.inflight = std::atoi(v);
    else if (a == "--seconds")
      o.seconds = std::atof(v);
    else if (a == "--warmup")
      o.warmup = std::atof(v);
    else if (a == "--threads")
      o.threads = std::atoi(v);
    else if (a == "--channels")
      o.channels = std::atoi(v);
    else if (a == "--seed")
      o.seed = static_cast<unsigned>(std::atoi(v));
    else if (a == "--pool")
      o.pool = std::atoi(v);
    else if (a == "--tls-ca")
      o.tls_ca = v;
    else if (a == "--tls-name")
      o.tls_name = v;
    else
      Usage();
  }
  if (o.inflight < 1 || o.threads < 1 || o.channels < 1 || o.seconds <= 0 || o.warmup < 0 ||
      o.pool < 1)
    Usage();
  o.threads = std::min(o.threads, o.inflight);
  return o;
}

void Entry(rls::RateLimitRequest* r, int descriptor, const std::string& key,
           const std::string& value) {
  while (r->descriptors_size() <= descriptor) r->add_descriptors();
  auto* e = r->mutable_descriptors(descriptor)->add_entries();
  e->set_key(key);
  e->set_value(value);
}

// The mix of bench/wrk/check.lua, weights out of 100.
rls::RateLimitRequest MakeRequest(std::mt19937& rng) {
  static const char* const kKnown[] = {"key_live_pro_7f3a", "key_live_ent_19c2", "key_test_free_01",
                                       "key_test_free_02"};
  auto pick = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  auto ip = [](int i) {
    return "10." + std::to_string(1 + (i / 65536) % 200) + "." + std::to_string((i / 256) % 256) +
           "." + std::to_string(i % 256);
  };
  auto bench_key = [&] {
    char buf[32];
    std::snprintf(buf, sizeof buf, "key_bench_%04d", pick(0, 4095));
    return std::string(buf);
  };
  rls::RateLimitRequest r;
  r.set_domain("api");
  const int w = pick(1, 100);
  const std::string a = ip(pick(0, 2047));
  if (w <= 45) {
    Entry(&r, 0, "remote_address", a);
  } else if (w <= 65) {
    Entry(&r, 0, "remote_address", a);
    Entry(&r, 1, "api_key", bench_key());
  } else if (w <= 75) {
    Entry(&r, 0, "remote_address", a);
    Entry(&r, 1, "api_key", kKnown[pick(0, 3)]);
  } else if (w <= 85) {
    Entry(&r, 0, "remote_address", a);
    Entry(&r, 1, "remote_address", a);
    Entry(&r, 1, "path", "/v1/search/orders");
  } else if (w <= 93) {
    Entry(&r, 0, "api_key", bench_key());
    Entry(&r, 0, "path", "/v1/payments");
    Entry(&r, 0, "method", "POST");
  } else if (w <= 98) {
    Entry(&r, 0, "path", "/healthz");
  } else {
    Entry(&r, 0, "remote_address", "203.0.113.66");
  }
  return r;
}

// One outstanding call; its address is its completion queue tag.
struct Slot {
  rls::RateLimitService::Stub* stub = nullptr;
  std::unique_ptr<grpc::ClientContext> ctx;
  std::unique_ptr<grpc::ClientAsyncResponseReader<rls::RateLimitResponse>> reader;
  rls::RateLimitResponse response;
  grpc::Status status;
  Clock::time_point started;
};

struct Tally {
  uint64_t ok = 0, over = 0, other_code = 0, errors = 0;
  std::vector<uint32_t> latency_ns;  // measured window only; saturates at ~4.29 s
  std::string first_error;
};

struct Shared {
  const Options* options;
  const std::vector<rls::RateLimitRequest>* pool;
  std::vector<std::unique_ptr<rls::RateLimitService::Stub>>* stubs;
  Clock::time_point measure_from, stop_at;
};

void Run(const Shared& shared, int thread_index, int calls, Tally* tally) {
  grpc::CompletionQueue cq;
  std::mt19937 rng(shared.options->seed * 7919u + static_cast<unsigned>(thread_index));
  std::uniform_int_distribution<size_t> pick(0, shared.pool->size() - 1);
  std::vector<Slot> slots(static_cast<size_t>(calls));
  const auto& stubs = *shared.stubs;

  auto start = [&](Slot* s) {
    s->ctx = std::make_unique<grpc::ClientContext>();
    s->ctx->set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    s->response.Clear();
    s->started = Clock::now();
    s->reader = s->stub->AsyncShouldRateLimit(s->ctx.get(), (*shared.pool)[pick(rng)], &cq);
    s->reader->Finish(&s->response, &s->status, s);
  };
  for (size_t i = 0; i < slots.size(); ++i) {
    slots[i].stub = stubs[(static_cast<size_t>(thread_index) +
                           i * static_cast<size_t>(shared.options->threads)) %
                          stubs.size()]
                        .get();
    start(&slots[i]);
  }

  int outstanding = calls;
  void* tag = nullptr;
  bool ok = false;
  while (outstanding > 0 && cq.Next(&tag, &ok)) {
    auto* s = static_cast<Slot*>(tag);
    const auto now = Clock::now();
    // Counted: the calls started after the warm-up and completed before the end.
    if (s->started >= shared.measure_from && now < shared.stop_at) {
      if (!ok || !s->status.ok()) {
        ++tally->errors;
        if (tally->first_error.empty())
          tally->first_error = std::to_string(static_cast<int>(s->status.error_code())) + " " +
                               s->status.error_message();
      } else if (s->response.overall_code() == rls::RateLimitResponse::OK) {
        ++tally->ok;
      } else if (s->response.overall_code() == rls::RateLimitResponse::OVER_LIMIT) {
        ++tally->over;
      } else {
        ++tally->other_code;
      }
      const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(now - s->started);
      tally->latency_ns.push_back(static_cast<uint32_t>(std::min<int64_t>(ns.count(), UINT32_MAX)));
    }
    if (now < shared.stop_at) {
      start(s);
    } else {
      --outstanding;
    }
  }
  cq.Shutdown();
  while (cq.Next(&tag, &ok)) {
  }
}

double Percentile(const std::vector<uint32_t>& sorted, double p) {
  if (sorted.empty()) return 0;
  const size_t i = std::min(sorted.size() - 1, static_cast<size_t>(p * sorted.size()));
  return sorted[i] / 1000.0;
}

std::shared_ptr<grpc::ChannelCredentials> Credentials(const Options& o,
                                                      grpc::ChannelArguments* args) {
  if (o.tls_ca.empty()) return grpc::InsecureChannelCredentials();
  std::ifstream in(o.tls_ca);
  std::stringstream pem;
  pem << in.rdbuf();
  if (!in || pem.str().empty()) {
    std::fprintf(stderr, "grpc_load: cannot read %s\n", o.tls_ca.c_str());
    std::exit(2);
  }
  args->SetSslTargetNameOverride(o.tls_name);
  grpc::SslCredentialsOptions ssl;
  ssl.pem_root_certs = pem.str();
  return grpc::SslCredentials(ssl);
}

}  // namespace

int main(int argc, char** argv) {
  const Options o = Parse(argc, argv);

  std::vector<rls::RateLimitRequest> pool;
  pool.reserve(static_cast<size_t>(o.pool));
  std::mt19937 rng(o.seed);
  for (int i = 0; i < o.pool; ++i) pool.push_back(MakeRequest(rng));

  std::vector<std::unique_ptr<rls::RateLimitService::Stub>> stubs;
  for (int i = 0; i < o.channels; ++i) {
    // A distinct channel argument per channel, or gRPC shares one subchannel (connection).
    grpc::ChannelArguments args;
    args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
    args.SetInt("sluice.bench.channel", i);
    auto channel = grpc::CreateCustomChannel(o.target, Credentials(o, &args), args);
    if (!channel->WaitForConnected(std::chrono::system_clock::now() + std::chrono::seconds(5))) {
      std::fprintf(stderr, "grpc_load: cannot connect to %s\n", o.target.c_str());
      return 1;
    }
    stubs.push_back(rls::RateLimitService::NewStub(channel));
  }

  Shared shared;
  shared.options = &o;
  shared.pool = &pool;
  shared.stubs = &stubs;
  const auto t0 = Clock::now();
  shared.measure_from =
      t0 + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(o.warmup));
  shared.stop_at = shared.measure_from + std::chrono::duration_cast<Clock::duration>(
                                             std::chrono::duration<double>(o.seconds));

  std::vector<Tally> tallies(static_cast<size_t>(o.threads));
  std::vector<std::thread> threads;
  for (int t = 0; t < o.threads; ++t) {
    const int calls = o.inflight / o.threads + (t < o.inflight % o.threads ? 1 : 0);
    threads.emplace_back(Run, std::cref(shared), t, calls, &tallies[static_cast<size_t>(t)]);
  }
  for (auto& t : threads) t.join();

  Tally all;
  for (auto& t : tallies) {
    all.ok += t.ok;
    all.over += t.over;
    all.other_code += t.other_code;
    all.errors += t.errors;
    if (all.first_error.empty()) all.first_error = t.first_error;
    all.latency_ns.insert(all.latency_ns.end(), t.latency_ns.begin(), t.latency_ns.end());
  }
  std::sort(all.latency_ns.begin(), all.latency_ns.end());
  const double rate = static_cast<double>(all.latency_ns.size()) / o.seconds;
  std::printf(
      "inflight=%d threads=%d channels=%d seconds=%.1f calls=%zu calls_per_s=%.0f ok=%llu "
      "over_limit=%llu other=%llu errors=%llu p50_us=%.0f p90_us=%.0f p99_us=%.0f "
      "p999_us=%.0f\n",
      o.inflight, o.threads, o.channels, o.seconds, all.latency_ns.size(), rate,
      static_cast<unsigned long long>(all.ok), static_cast<unsigned long long>(all.over),
      static_cast<unsigned long long>(all.other_code), static_cast<unsigned long long>(all.errors),
      Percentile(all.latency_ns, 0.50), Percentile(all.latency_ns, 0.90),
      Percentile(all.latency_ns, 0.99), Percentile(all.latency_ns, 0.999));
  if (all.errors > 0) std::fprintf(stderr, "grpc_load: first error: %s\n", all.first_error.c_str());
  return all.errors > 0 && all.ok + all.over == 0 ? 1 : 0;
}
