#include "cli/config_replay.h"

#include <fmt/format.h>

#include <cerrno>
#include <cstring>
#include <nlohmann/json.hpp>
#include <set>
#include <unordered_set>
#include <utility>

#include "cli/trace_reader.h"
#include "http/check_json.h"
#include "service/check.h"
#include "service/rate_limit_service.h"
#include "sluice/clock.h"
#include "sluice/duration.h"
#include "sluice/limit_spec.h"
#include "sluice/open_store.h"

namespace sluice::cli {
namespace {

constexpr int64_t kNanosPerMilli = 1'000'000;

struct LineReader {
  std::FILE* in;
  char* buf = nullptr;
  size_t cap = 0;
  ~LineReader() { std::free(buf); }
  // The next line without its newline; nullopt at the end; an error if it cannot be read.
  Result<std::optional<std::string_view>> Next() {
    errno = 0;
    const ssize_t n = getline(&buf, &cap, in);
    if (n < 0) {
      if (errno != 0 && !std::feof(in)) return MakeError(std::strerror(errno));
      return std::nullopt;
    }
    std::string_view line(buf, static_cast<size_t>(n));
    while (!line.empty() && (line.back() == '\n' || line.back() == '\r')) line.remove_suffix(1);
    return line;
  }
};

// The check of one trace line and its time.
Result<std::pair<int64_t, server::CheckRequest>> ParseCheckLine(std::string_view line) {
  if (line.size() > kMaxCheckLineBytes) {
    return MakeError(fmt::format("longer than {} bytes", kMaxCheckLineBytes));
  }
  const nlohmann::json j = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) {
    return MakeError("not a JSON object {\"t_ms\": ..., \"check\": {...}}");
  }
  const auto t = j.find("t_ms");
  if (t == j.end() || !t->is_number_integer()) return MakeError("t_ms: must be an integer");
  const int64_t t_ms = t->get<int64_t>();
  if (t_ms < 0 || t_ms > kMaxTraceTimeMs) {
    return MakeError(fmt::format("t_ms: must be from 0 to {}", kMaxTraceTimeMs));
  }
  const auto check = j.find("check");
  if (check == j.end() || !check->is_object()) {
    return MakeError("check: must be an object (a /v1/check body)");
  }
  auto request = server::ParseCheckRequest(check->dump());
  if (!request) return MakeError("check: " + request.error().message);
  return std::pair{t_ms, std::move(*request)};
}

}  // namespace

Result<ConfigReplay> ReplayConfig(std::shared_ptr<const server::Config> config, std::FILE* in,
                                  ConfigReplayOutput output, std::FILE* out) {
  ManualClock clock;
  // The memory store, as sluiced opens it for --store memory, except that a replay must not
  // evict.
  OpenStoreOptions store_options;
  store_options.memory.max_bytes = size_t{64} << 30;
  store_options.max_key_bytes = server::kCheckLimits.max_counter_key_bytes;
  store_options.clock = &clock;
  auto store = OpenStore("memory", store_options);
  if (!store) return std::unexpected(store.error());
  server::ServiceOptions options;
  options.clock = &clock;
  auto service =
      server::RateLimitService::Create(config, std::move(*store), options, /*metrics=*/nullptr);
  if (!service) return std::unexpected(service.error());

  ConfigReplay replay;
  replay.config = config;
  std::map<std::pair<std::string, std::string>, LimitReplay> by_limit;  // (domain, id)
  std::map<const LimitReplay*, std::unordered_set<std::string>> over_identities;
  LineReader reader{in};
  int64_t last_t_ms = -1;
  size_t line_number = 0;
  std::string buf;
  while (true) {
    auto next = reader.Next();
    ++line_number;
    if (!next) return MakeError(fmt::format("line {}: {}", line_number, next.error().message));
    if (!next->has_value()) break;
    const std::string_view line = **next;
    if (line.find_first_not_of(" \t") == std::string_view::npos || line.front() == '#') continue;
    auto parsed = ParseCheckLine(line);
    if (!parsed) return MakeError(fmt::format("line {}: {}", line_number, parsed.error().message));
    auto& [t_ms, request] = *parsed;
    if (t_ms < last_t_ms) {
      return MakeError(fmt::format("line {}: t_ms {} is earlier than the line before ({})",
                                   line_number, t_ms, last_t_ms));
    }
    last_t_ms = t_ms;
    clock.Set(FromNanos(t_ms * kNanosPerMilli));
    auto response = (*service)->Check(request);
    if (!response) {
      return MakeError(fmt::format("line {}: {}", line_number, response.error().message));
    }
    ++replay.lines;
    ++(response->overall == server::Code::kOk ? replay.requests_ok : replay.requests_over);
    for (size_t i = 0; i < response->statuses.size(); ++i) {
      const server::DescriptorStatus& s = response->statuses[i];
      if (s.limit == nullptr || s.replaced) continue;
      if (s.owned != nullptr) {
        ++replay.override_checks;
        continue;
      }
      const int64_t hits = request.descriptors[i].hits.value_or(request.hits);
      LimitReplay& l = by_limit[{s.limit->domain, s.limit->id}];
      l.limit = s.limit;
      ++l.checks;
      l.hits += static_cast<uint64_t>(hits);
      l.traffic[s.counter_key].push_back({t_ms * kNanosPerMilli, hits});
      if (s.degraded) ++l.degraded;
      if (s.shadow_over_limit) ++l.shadow_over;
      if (s.soft_over_limit) ++l.soft_over;
      if (s.code == server::Code::kOverLimit && s.over_limit) {
        ++l.over_limit;
      } else {
        ++l.admitted;
      }
      if (s.over_limit) over_identities[&l].insert(s.counter_key);
    }
    if (output == ConfigReplayOutput::kJsonl) {
      std::string answer = server::RenderCheckResponse(*response);
      while (!answer.empty() && answer.back() == '\n') answer.pop_back();  // one line per check
      buf.clear();
      fmt::format_to(std::back_inserter(buf), "{{\"t_ms\":{},\"response\":{}}}\n", t_ms, answer);
      if (std::fwrite(buf.data(), 1, buf.size(), out) != buf.size()) {
        return MakeError(std::string("cannot write the output: ") + std::strerror(errno));
      }
    }
  }
  for (auto& [key, l] : by_limit) {
    const auto it = over_identities.find(&l);
    l.identities_over = it == over_identities.end() ? 0 : it->second.size();
    replay.limits.push_back(std::move(l));
  }
  if (output == ConfigReplayOutput::kSummary) {
    const std::string text = SummaryJson(replay).dump(2) + "\n";
    if (std::fwrite(text.data(), 1, text.size(), out) != text.size()) {
      return MakeError(std::string("cannot write the output: ") + std::strerror(errno));
    }
  }
  if (output != ConfigReplayOutput::kNone && std::fflush(out) != 0) {
    return MakeError(std::string("cannot write the output: ") + std::strerror(errno));
  }
  return replay;
}

nlohmann::ordered_json SummaryJson(const ConfigReplay& replay) {
  nlohmann::ordered_json limits = nlohmann::ordered_json::array();
  for (const LimitReplay& l : replay.limits) {
    const server::Limit& limit = *l.limit;
    std::string spec = limit.kind == server::LimitKind::kUnlimited ? "unlimited"
                       : limit.kind == server::LimitKind::kBlocked ? "blocked"
                                                                   : DescribeLimitSpec(limit.spec);
    limits.push_back(nlohmann::ordered_json{{"domain", limit.domain},
                                            {"name", limit.name},
                                            {"metric", limit.metric_name},
                                            {"spec", spec},
                                            {"mode", std::string(server::ModeName(limit.mode))},
                                            {"checks", l.checks},
                                            {"hits", l.hits},
                                            {"admitted", l.admitted},
                                            {"over_limit", l.over_limit},
                                            {"shadow_over_limit", l.shadow_over},
                                            {"soft_over_limit", l.soft_over},
                                            {"identities", l.traffic.size()},
                                            {"identities_over", l.identities_over}});
  }
  return nlohmann::ordered_json{{"lines", replay.lines},
                                {"requests_ok", replay.requests_ok},
                                {"requests_over", replay.requests_over},
                                {"override_checks", replay.override_checks},
                                {"limits", limits}};
}

}  // namespace sluice::cli
