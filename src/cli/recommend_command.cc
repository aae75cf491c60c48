#include "cli/recommend_command.h"

#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <cerrno>
#include <cstring>
#include <nlohmann/json.hpp>

#include "cli/config_replay.h"
#include "cli/input_file.h"
#include "cli/recommend.h"
#include "cli/trace_reader.h"
#include "cli/usage_client.h"
#include "sluice/duration.h"

namespace sluice::cli {
namespace {

constexpr int kUsageError = 2;
constexpr int kRunError = 1;
constexpr int64_t kNanosPerMilli = 1'000'000;

int Fail(const std::string& message, int code = kUsageError) {
  fmt::print(stderr, "sluice recommend: {}\n", message);
  return code;
}

int Print(const std::string& text) {
  if (std::fwrite(text.data(), 1, text.size(), stdout) != text.size() || std::fflush(stdout) != 0) {
    return Fail(std::string("cannot write the output: ") + std::strerror(errno), kRunError);
  }
  return 0;
}

// A CSV trace by key: each key is an identity.
Result<TrafficByIdentity> ReadCsvTraffic(std::FILE* in) {
  TraceReader reader(in);
  TrafficByIdentity traffic;
  while (true) {
    auto line = reader.Next();
    if (!line) return std::unexpected(line.error());
    if (!line->has_value()) return traffic;
    auto it = traffic.find((*line)->key);
    if (it == traffic.end())
      it = traffic.emplace(std::string((*line)->key), std::vector<Hit>{}).first;
    it->second.push_back({(*line)->t_ms * kNanosPerMilli, (*line)->cost});
  }
}

int RunFromUsage(const RecommendFlags& f, const RecommendOptions& options) {
  if (f.domain.empty() || f.limit.empty()) return Fail("--from needs --domain and --limit");
  auto usage = FetchUsage({f.from, f.admin_token, f.domain, f.limit});
  if (!usage) return Fail(usage.error().message, kRunError);
  auto r = RecommendFromUsage(*usage, options);
  if (!r) return Fail(r.error().message);
  if (f.output == "json") return Print(RecommendationJson(*r).dump(2) + "\n");
  std::string text = fmt::format("{} {} (from {}):\n", usage->domain, usage->limit, f.from);
  if (int rc = Print(text); rc != 0) return rc;
  PrintRecommendation(stdout, *r);
  return 0;
}

int RunFromConfig(const RecommendFlags& f, const RecommendOptions& base, bool per_given,
                  bool algorithm_given) {
  if (!f.peaks.empty()) return Fail("--peaks is for a CSV trace (without --config)");
  auto config = server::LoadConfig(f.config);
  if (!config) return Fail("--config: " + config.error().message);
  auto in = OpenInput(f.input);
  if (!in) return Fail(in.error().message);
  auto replay = ReplayConfig(*config, in->get(), ConfigReplayOutput::kNone, stdout);
  if (!replay) return Fail(replay.error().message);
  nlohmann::ordered_json limits = nlohmann::ordered_json::array();
  bool first = true;
  for (const LimitReplay& l : replay->limits) {
    if (l.limit->kind != server::LimitKind::kLimited) continue;  // nothing to calibrate
    RecommendOptions options = base;
    if (!per_given) options.per = l.limit->spec.period;
    if (!algorithm_given) options.algorithm = l.limit->spec.algorithm;
    auto r = Recommend(l.traffic, options);
    if (!r)
      return Fail(
          fmt::format("{} {}: {}", l.limit->domain, l.limit->metric_name, r.error().message));
    if (f.output == "json") {
      limits.push_back(
          nlohmann::ordered_json{{"domain", l.limit->domain},
                                 {"name", l.limit->name},
                                 {"metric", l.limit->metric_name},
                                 {"configured",
                                  {{"limit", l.limit->spec.limit},
                                   {"burst", l.limit->spec.Capacity()},
                                   {"algorithm", AlgorithmName(l.limit->spec.algorithm)}}},
                                 {"recommendation", RecommendationJson(*r)}});
      continue;
    }
    const std::string head =
        fmt::format("{}{} {} (configured: {}; {} checks, {} over):\n", first ? "" : "\n",
                    l.limit->domain, l.limit->metric_name, DescribeLimitSpec(l.limit->spec),
                    l.checks, l.over_limit + l.shadow_over + l.soft_over);
    first = false;
    if (int rc = Print(head); rc != 0) return rc;
    PrintRecommendation(stdout, *r);
  }
  if (f.output == "json") return Print(nlohmann::ordered_json{{"limits", limits}}.dump(2) + "\n");
  if (first) return Print("no configured limit matched the trace\n");
  return 0;
}

}  // namespace

void AddRecommendFlags(CLI::App& command, RecommendFlags& f) {
  command.add_option("--input", f.input,
                     "trace: CSV t_ms,key[,cost] (the replay format; identity = key), or with "
                     "--config JSONL {\"t_ms\":...,\"check\":{...a /v1/check body}}; - for stdin");
  command.add_option("--config", f.config,
                     "sluiced's config: replay --input through it and recommend per limit");
  command.add_option("--per", f.per,
                     "the window peaks are counted in (default 1m; with --config each limit's "
                     "own period)");
  command.add_option("--percentile", f.percentile,
                     "the percentile of identities' peaks the limit is set above (default 99)");
  command.add_option("--headroom", f.headroom, "the factor over that percentile (default 1.2)");
  command.add_option("--algorithm", f.algorithm,
                     "what-if replays (default token_bucket; with --config each limit's own)");
  command
      .add_option("--candidates", f.candidates,
                  "what-if limits, comma-separated (default: p50, p90, p95, p99, max and the "
                  "suggested limit)")
      ->delimiter(',');
  command.add_option("--output", f.output, "text (default) or json");
  command.add_option("--peaks", f.peaks, "also write each identity's peaks to this CSV file");
  command.add_option("--from", f.from,
                     "a running sluiced's HTTP address (http://host:port): read /v1/usage");
  command.add_option("--admin-token", f.admin_token, "with --from: sluiced's --admin-token");
  command.add_option("--domain", f.domain, "with --from: the limit's domain");
  command.add_option("--limit", f.limit, "with --from: the limit's name (or metric label)");
}

int RunRecommend(const RecommendFlags& f, const CLI::App& command) {
  if (f.output != "text" && f.output != "json") {
    return Fail("--output must be text or json, not '" + f.output + "'");
  }
  if (f.input.empty() == f.from.empty()) return Fail("give either --input or --from");
  const bool per_given = command.count("--per") > 0;
  const bool algorithm_given = command.count("--algorithm") > 0;
  RecommendOptions options;
  options.percentile = f.percentile;
  options.headroom = f.headroom;
  options.candidates = f.candidates;
  for (int64_t c : f.candidates) {
    if (c < 1) return Fail(fmt::format("--candidates: {} is not a limit (at least 1)", c));
  }
  const auto algorithm = ParseAlgorithm(f.algorithm);
  if (!algorithm) return Fail("unknown --algorithm '" + f.algorithm + "'");
  options.algorithm = *algorithm;
  const auto per = ParseDuration(f.per);
  if (!per) return Fail("--per: " + per.error().message);
  options.per = *per;
  if (auto ok = ValidateRecommendOptions(options); !ok) return Fail(ok.error().message);

  if (!f.from.empty()) {
    if (!f.config.empty() || !f.peaks.empty() || per_given || algorithm_given ||
        !f.candidates.empty()) {
      return Fail(
          "--from reads sluiced's percentiles: no --config, --peaks, --per, "
          "--algorithm or --candidates (there is no trace to replay)");
    }
    return RunFromUsage(f, options);
  }
  if (!f.admin_token.empty() || !f.domain.empty() || !f.limit.empty()) {
    return Fail("--admin-token, --domain and --limit go with --from");
  }
  if (!f.config.empty()) return RunFromConfig(f, options, per_given, algorithm_given);

  auto in = OpenInput(f.input);
  if (!in) return Fail(in.error().message);
  auto traffic = ReadCsvTraffic(in->get());
  if (!traffic) return Fail(traffic.error().message);
  auto r = Recommend(*traffic, options);
  if (!r) return Fail(r.error().message);
  if (!f.peaks.empty()) {
    std::unique_ptr<std::FILE, int (*)(std::FILE*)> out(std::fopen(f.peaks.c_str(), "wb"),
                                                        &std::fclose);
    if (!out)
      return Fail("cannot write --peaks '" + f.peaks + "': " + std::strerror(errno), kRunError);
    if (auto ok = WritePeaksCsv(*traffic, options, out.get()); !ok) {
      return Fail(ok.error().message, kRunError);
    }
  }
  if (f.output == "json") return Print(RecommendationJson(*r).dump(2) + "\n");
  PrintRecommendation(stdout, *r);
  return 0;
}

}  // namespace sluice::cli
