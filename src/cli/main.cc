// The sluice command line: `sluice demo`, `sluice replay`, `sluice recommend`,
// `sluice simulate regions`, `sluice simulate retry-storm`, `sluice simulate overload`,
// `sluice token`, `sluice forward-auth explain`.
#include <fmt/format.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "cli/config_replay.h"
#include "cli/demo.h"
#include "cli/forward_auth_explain.h"
#include "cli/input_file.h"
#include "cli/overload_command.h"
#include "cli/recommend_command.h"
#include "cli/replay.h"
#include "cli/retry_storm.h"
#include "cli/simulate_regions.h"
#include "cli/token.h"
#include "sluice/duration.h"
#include "sluice/memory_store.h"
#include "sluice/redis_store.h"

namespace {

constexpr int kUsageError = 2;   // bad flags or a malformed trace line
constexpr int kOutputError = 1;  // the output could not be written

struct ReplayFlags {
  std::string config;
  std::string algorithm;
  int64_t limit = 0;
  bool limit_given = false;
  std::string per;
  int64_t burst = 0;
  bool shaper = false;
  std::string input;
  std::string output = "jsonl";
  std::string store = "memory";
};

int Fail(const std::string& message) {
  fmt::print(stderr, "sluice replay: {}\n", message);
  return kUsageError;
}

// `replay --config`: JSONL /v1/check bodies through the config's limits.
int RunConfigReplay(const ReplayFlags& f) {
  using namespace sluice;
  if (!f.algorithm.empty() || f.limit_given || !f.per.empty() || f.burst != 0 || f.shaper ||
      f.store != "memory") {
    return Fail(
        "--config takes its limits from the config: no --algorithm, --limit, --per, "
        "--burst, --shaper or --store");
  }
  if (f.output != "jsonl" && f.output != "summary") {
    return Fail("--output must be jsonl or summary, not '" + f.output + "'");
  }
  auto config = server::LoadConfig(f.config);
  if (!config) return Fail("--config: " + config.error().message);
  auto in = cli::OpenInput(f.input);
  if (!in) return Fail(in.error().message);
  auto replay = cli::ReplayConfig(
      *config, in->get(),
      f.output == "jsonl" ? cli::ConfigReplayOutput::kJsonl : cli::ConfigReplayOutput::kSummary,
      stdout);
  if (!replay) {
    const bool bad_input = replay.error().message.rfind("line ", 0) == 0;
    fmt::print(stderr, "sluice replay: {}\n", replay.error().message);
    return bad_input ? kUsageError : kOutputError;
  }
  return 0;
}

int RunReplay(const ReplayFlags& f) {
  using namespace sluice;
  if (!f.config.empty()) return RunConfigReplay(f);
  if (f.algorithm.empty() || !f.limit_given || f.per.empty()) {
    return Fail("--algorithm, --limit and --per are required (or --config)");
  }
  const auto algorithm = ParseAlgorithm(f.algorithm);
  if (!algorithm) {
    return Fail("unknown --algorithm '" + f.algorithm +
                "' (token_bucket, leaky_bucket, fixed_window, sliding_window_log, "
                "sliding_window_counter, gcra)");
  }
  const auto per = ParseDuration(f.per);
  if (!per) return Fail("--per: " + per.error().message);
  if (f.output != "jsonl" && f.output != "summary") {
    return Fail("--output must be jsonl or summary, not '" + f.output + "'");
  }
  LimitSpec spec{*algorithm, f.limit, *per, f.burst, f.shaper};
  Result<std::unique_ptr<Limiter>> limiter = MakeError("no store");
  if (f.store == "memory") {
    // Replay must not evict: a trace is judged as if memory were unlimited (and says so if not).
    MemoryStoreOptions options;
    options.max_bytes = size_t{64} << 30;
    limiter = MakeMemoryLimiter(spec, options);
  } else {
    auto redis = ParseRedisAddress(f.store);
    if (!redis) return Fail("--store: " + redis.error().message);
    // Each line's time is passed in, and each run gets its own key namespace so state left by
    // an earlier replay cannot leak into this one.
    redis->use_server_time = false;
    redis->fail_open = false;
    redis->command_timeout = std::chrono::milliseconds(2000);
    redis->limit_id = "replay-" + std::to_string(getpid()) + "-" +
                      std::to_string(std::chrono::steady_clock::now().time_since_epoch().count());
    limiter = MakeRedisLimiter(spec, *redis);
  }
  if (!limiter) return Fail(limiter.error().message);

  auto in = cli::OpenInput(f.input);
  if (!in) return Fail(in.error().message);
  cli::TraceReader reader(in->get());
  const auto output = f.output == "jsonl" ? cli::ReplayOutput::kJsonl : cli::ReplayOutput::kSummary;
  auto result = cli::Replay(reader, **limiter, output, stdout);
  if (!result) {
    // A malformed line says "line N: ..."; anything else (a failed write) is not the input's fault.
    const bool bad_input = result.error().message.rfind("line ", 0) == 0;
    fmt::print(stderr, "{}{}\n", bad_input ? "" : "sluice replay: ", result.error().message);
    return bad_input ? kUsageError : kOutputError;
  }
  if (result->store.evictions > 0) {
    fmt::print(stderr,
               "sluice replay: warning: {} counters were evicted for memory; their keys "
               "were treated as fresh\n",
               result->store.evictions);
  }
  return 0;
}

struct StormFlags {
  sluice::cli::RetryStormOptions options;
  std::vector<std::string> policies;
  std::string per = "1s", base = "100ms", cap = "10s", max_time = "1h";
  std::string output = "text";
};

int RunRetryStorm(StormFlags f) {
  using namespace sluice;
  auto fail = [](const std::string& message) {
    fmt::print(stderr, "sluice simulate retry-storm: {}\n", message);
    return kUsageError;
  };
  for (auto [text, field, name] :
       {std::tuple{&f.per, &f.options.per, "--per"}, std::tuple{&f.base, &f.options.base, "--base"},
        std::tuple{&f.cap, &f.options.cap, "--cap"},
        std::tuple{&f.max_time, &f.options.max_time, "--max-time"}}) {
    auto d = ParseDuration(*text);
    if (!d) return fail(std::string(name) + ": " + d.error().message);
    *field = *d;
  }
  if (f.output != "text" && f.output != "csv") {
    return fail("--output must be text or csv, not '" + f.output + "'");
  }
  if (auto valid = cli::ValidateRetryStormOptions(f.options); !valid) {
    return fail(valid.error().message);
  }
  std::vector<cli::RetryPolicy> policies;
  for (const std::string& name : f.policies) {
    auto p = cli::ParseRetryPolicy(name);
    if (!p) return fail(p.error().message);
    policies.push_back(*p);
  }
  if (policies.empty())
    policies.assign(std::begin(cli::kAllRetryPolicies), std::end(cli::kAllRetryPolicies));
  std::vector<cli::RetryStormResult> results;
  for (cli::RetryPolicy p : policies) results.push_back(cli::SimulateRetryStorm(p, f.options));
  if (!cli::PrintRetryStorm(results, f.options, f.output == "csv", stdout)) {
    fmt::print(stderr, "sluice simulate retry-storm: cannot write the output\n");
    return kOutputError;
  }
  return 0;
}

// The token alone on the first line (for `| head -1`), its file line on the second.
int RunToken() {
  auto made = sluice::cli::MakeToken();
  if (!made) {
    fmt::print(stderr, "sluice token: {}\n", made.error().message);
    return kOutputError;
  }
  fmt::print("{}\n{}\n", made->token, made->sha256_line);
  return std::fflush(stdout) == 0 ? 0 : kOutputError;
}

struct ExplainFlags {
  std::string config;
  sluice::cli::ExplainRequest request;
};

CLI::App* AddExplain(CLI::App& app, ExplainFlags& f) {
  auto* fa = app.add_subcommand("forward-auth", "The forward-auth endpoint's view of requests");
  fa->require_subcommand(1);
  auto* explain = fa->add_subcommand(
      "explain",
      "What a request becomes under a config's forward_auth section: its canonical path and "
      "host, and the descriptors its actions make");
  explain->add_option("--config", f.config, "sluiced's config (a file or a directory of *.yaml)")
      ->required();
  explain->add_option("--uri", f.request.uri, "the original request target (/v1/search?q=1)")
      ->required();
  explain->add_option("--host", f.request.host, "the original Host");
  explain->add_option("--method", f.request.method, "the original method")->capture_default_str();
  explain->add_option("--header", f.request.headers, "a header, 'Name: value'; repeatable");
  explain->add_option("--peer", f.request.peer,
                      "the proxy's address, for remote_address and trusted_proxies");
  explain->add_option("--domain", f.request.domain,
                      "the domain, as Sluice-Domain names it (when several have the section)");
  return explain;
}

int RunExplain(const ExplainFlags& f) {
  auto config = sluice::server::LoadConfig(f.config);
  if (!config) {
    fmt::print(stderr, "sluice forward-auth explain: {}\n", config.error().message);
    return kUsageError;
  }
  auto report = sluice::cli::ExplainForwardAuth(**config, f.request);
  if (!report) {
    fmt::print(stderr, "sluice forward-auth explain: {}\n", report.error().message);
    return kUsageError;
  }
  fmt::print("{}", *report);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"sluice: rate limiting algorithms, stores and tools"};
  app.require_subcommand(1);

  auto* demo =
      app.add_subcommand("demo", "Show each algorithm on the design note's worked example");

  ReplayFlags f;
  auto* replay = app.add_subcommand(
      "replay",
      "Replay a CSV trace (t_ms,key[,cost]) through an algorithm, or a JSONL trace of /v1/check "
      "bodies ({\"t_ms\":...,\"check\":{...}}) through a config's limits");
  replay->add_option("--config", f.config,
                     "sluiced's config (a file or a directory of *.yaml): the input is JSONL "
                     "/v1/check bodies, reported per limit");
  replay->add_option("--algorithm", f.algorithm,
                     "token_bucket, leaky_bucket, fixed_window, "
                     "sliding_window_log, sliding_window_counter or gcra");
  replay->add_option("--limit", f.limit, "N requests ...");
  replay->add_option("--per", f.per, "... per DURATION (250ms, 1s, 1m, 1h, 1d)");
  replay->add_option("--burst", f.burst, "bucket capacity / leaky queue size (default: --limit)");
  replay->add_flag("--shaper", f.shaper, "leaky_bucket: delay instead of only rejecting");
  replay->add_option("--input", f.input, "trace file, or - for stdin")->required();
  replay->add_option("--output", f.output,
                     "jsonl (default; with --config each line's /v1/check answer) or summary "
                     "(with --config: per limit)");
  replay->add_option("--store", f.store,
                     "memory (default) or redis://[user:password@]host:port[/db]");

  sluice::cli::RecommendFlags rf;
  auto* recommend = app.add_subcommand(
      "recommend",
      "Suggest a limit from traffic: each identity's peak per window, their percentiles, a limit "
      "and burst, and what candidate limits would reject (replayed)");
  sluice::cli::AddRecommendFlags(*recommend, rf);

  sluice::cli::SimulateRegionsFlags sim;
  auto* simulate = app.add_subcommand("simulate", "Simulations on a manual clock");
  simulate->require_subcommand(1);
  auto* regions = simulate->add_subcommand(
      "regions",
      "Admitted vs nominal per region over time, static against leased (docs/regions.md)");
  regions->add_option("--workload", sim.workload, "skewed, shifting or both")
      ->capture_default_str();
  regions->add_option("--limit", sim.limit, "the limit per window, across three regions")
      ->capture_default_str();
  regions->add_option("--steps", sim.steps, "windows (one refresh each) to simulate")
      ->capture_default_str();
  StormFlags storm;
  auto* retry_storm = simulate->add_subcommand(
      "retry-storm", "N clients retry against a rate limiter after an outage, per retry policy");
  retry_storm->add_option("--clients", storm.options.clients, "simulated clients")
      ->capture_default_str();
  retry_storm
      ->add_option("--policy", storm.policies,
                   "immediate, exponential (no jitter), full, equal or decorrelated; repeat or "
                   "separate with commas (default: all five)")
      ->delimiter(',');
  retry_storm->add_option("--limit", storm.options.limit, "the limiter: N requests ...")
      ->capture_default_str();
  retry_storm->add_option("--per", storm.per, "... per DURATION (a token bucket)")
      ->capture_default_str();
  retry_storm->add_option("--burst", storm.options.burst, "the bucket's capacity")
      ->capture_default_str();
  retry_storm->add_option("--base", storm.base, "backoff base")->capture_default_str();
  retry_storm->add_option("--cap", storm.cap, "backoff cap")->capture_default_str();
  retry_storm->add_option("--seed", storm.options.seed, "jitter seed")->capture_default_str();
  retry_storm
      ->add_option("--max-calls", storm.options.max_calls, "stop a run after this many calls")
      ->capture_default_str();
  retry_storm->add_option("--max-time", storm.max_time, "stop a run after this much simulated time")
      ->capture_default_str();
  retry_storm->add_option("--output", storm.output, "text or csv")->capture_default_str();
  sluice::cli::OverloadFlags overload_flags;
  auto* overload = sluice::cli::AddOverloadCommand(*simulate, overload_flags);

  auto* token = app.add_subcommand(
      "token",
      "Print a new caller token for sluiced's --api-tokens (256 random bits) and, on the next "
      "line, the token_sha256 line of its client in the file (docs/security.md)");
  ExplainFlags explain_flags;
  auto* explain = AddExplain(app, explain_flags);

  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    app.exit(e);
    return kUsageError;
  }
  if (*demo) return sluice::cli::RunDemo(stdout);
  if (*replay) {
    f.limit_given = replay->count("--limit") > 0;
    return RunReplay(f);
  }
  if (*recommend) return sluice::cli::RunRecommend(rf, *recommend);
  if (*regions) return sluice::cli::RunSimulateRegions(sim, stdout);
  if (*replay) return RunReplay(f);
  if (*retry_storm) return RunRetryStorm(storm);
  if (*overload) return sluice::cli::RunOverload(overload_flags);
  if (*token) return RunToken();
  if (*explain) return RunExplain(explain_flags);
  return kUsageError;
}
