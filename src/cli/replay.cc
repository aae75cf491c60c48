#include "cli/replay.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>
#include <map>
#include <nlohmann/json.hpp>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "sluice/duration.h"
#include "util/json_string.h"

namespace sluice::cli {
namespace {

constexpr int64_t kNanosPerMilli = 1'000'000;

// Per key: admitted/rejected counts and the most hits admitted in any interval (t - D, t].
class KeySummary {
 public:
  void Add(int64_t t_ns, int64_t cost, bool allowed, int64_t window_ns) {
    if (!allowed) {
      ++rejected_;
      return;
    }
    ++admitted_;
    while (head_ < window_.size() && window_[head_].first <= t_ns - window_ns) {
      in_window_ -= window_[head_++].second;
    }
    // A vector used as a queue: compact once the consumed prefix is half of it. (std::deque
    // costs ~600 bytes per key before holding anything.)
    if (head_ > 0 && head_ * 2 >= window_.size()) {
      window_.erase(window_.begin(), window_.begin() + static_cast<std::ptrdiff_t>(head_));
      head_ = 0;
    }
    window_.emplace_back(t_ns, cost);
    in_window_ += cost;
    max_in_window_ = std::max(max_in_window_, in_window_);
  }
  nlohmann::json ToJson() const {
    return {{"admitted", admitted_},
            {"rejected", rejected_},
            {"max_admitted_in_window", max_in_window_}};
  }

 private:
  uint64_t admitted_ = 0;
  uint64_t rejected_ = 0;
  int64_t in_window_ = 0;
  int64_t max_in_window_ = 0;
  std::vector<std::pair<int64_t, int64_t>> window_;  // admitted (t, cost), from head_ on
  size_t head_ = 0;
};

struct StringHash {
  using is_transparent = void;
  size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
};

void AppendDecision(std::string& out, const TraceLine& line, const Decision& d, bool shaper) {
  fmt::format_to(std::back_inserter(out), "{{\"t_ms\":{},\"key\":", line.t_ms);
  util::AppendJsonStringOfUtf8(out, line.key);  // the trace reader checked it is UTF-8
  fmt::format_to(std::back_inserter(out),
                 ",\"allowed\":{},\"remaining\":{},\"retry_after_ms\":", d.allowed, d.remaining);
  if (d.reason == DecisionReason::kCostExceedsCapacity) {
    out += "null,\"reason\":\"cost_exceeds_capacity\"";
  } else if (d.reason == DecisionReason::kInvalidRequest) {
    out += "null,\"reason\":\"invalid_request\"";
  } else {
    fmt::format_to(std::back_inserter(out), "{}", CeilMillis(d.retry_after));
  }
  if (shaper) fmt::format_to(std::back_inserter(out), ",\"delay_ms\":{}", CeilMillis(d.delay));
  out += "}\n";
}

}  // namespace

int64_t CeilMillis(Duration d) {
  const int64_t ns = d.count();
  return ns / kNanosPerMilli + (ns % kNanosPerMilli > 0 ? 1 : 0);
}

Result<ReplayResult> Replay(TraceReader& reader, Limiter& limiter, ReplayOutput output,
                            std::FILE* out) {
  const LimitSpec& spec = limiter.spec();
  const int64_t window_ns = spec.period.count();
  const bool shaper = spec.shaper;
  ReplayResult result;
  std::unordered_map<std::string, KeySummary, StringHash, std::equal_to<>> keys;
  std::string buf;
  buf.reserve(1 << 20);
  bool write_failed = false;
  auto flush = [&] {
    if (!buf.empty() && std::fwrite(buf.data(), 1, buf.size(), out) != buf.size()) {
      write_failed = true;
    }
    buf.clear();
  };
  auto write_error = [] {
    return MakeError(std::string("cannot write the output: ") + std::strerror(errno));
  };

  // Lines are decided 16 at a time through DecideBatch, which starts every key's memory load
  // before deciding any (a trace over many keys is bound by cache misses); its decisions are
  // exactly those of one Decide per line, in order.
  constexpr size_t kBatch = 16;
  std::array<TraceLine, kBatch> lines;
  std::array<std::string, kBatch> line_keys;  // the reader's key views die at its next line
  std::array<DecideRequest, kBatch> requests;
  std::array<Decision, kBatch> decisions;
  auto decide = [&](size_t n) -> bool {
    limiter.DecideBatch(std::span(requests.data(), n), std::span(decisions.data(), n));
    for (size_t i = 0; i < n; ++i) {
      const TraceLine& line = lines[i];
      const Decision& d = decisions[i];
      ++result.lines;
      ++(d.allowed ? result.admitted : result.rejected);
      if (output == ReplayOutput::kJsonl) {
        AppendDecision(buf, line, d, shaper);
        if (buf.size() >= (1 << 20) - 8192) {
          flush();
          if (write_failed) return false;
        }
      } else {
        auto it = keys.find(line.key);
        if (it == keys.end()) it = keys.emplace(std::string(line.key), KeySummary{}).first;
        it->second.Add(line.t_ms * kNanosPerMilli, line.cost, d.allowed, window_ns);
      }
    }
    return true;
  };

  while (true) {
    size_t n = 0;
    Result<std::optional<TraceLine>> next;
    while (n < kBatch) {
      next = reader.Next();
      if (!next || !next->has_value()) break;
      line_keys[n].assign((*next)->key);
      lines[n] = {(*next)->t_ms, line_keys[n], (*next)->cost};
      requests[n] = {line_keys[n], FromNanos(lines[n].t_ms * kNanosPerMilli), lines[n].cost};
      ++n;
    }
    // The lines before a malformed one are decided and written before its error is returned.
    if (!decide(n)) return write_error();
    if (!next) {
      flush();
      return std::unexpected(next.error());
    }
    if (!next->has_value()) break;
  }
  result.store = limiter.Stats();
  if (output == ReplayOutput::kSummary) {
    nlohmann::json per_key = nlohmann::json::object();
    std::map<std::string_view, const KeySummary*> sorted;
    for (const auto& [k, v] : keys) sorted.emplace(k, &v);
    for (const auto& [k, v] : sorted) per_key[std::string(k)] = v->ToJson();
    nlohmann::json summary = {
        {"algorithm", AlgorithmName(spec.algorithm)},
        {"limit", spec.limit},
        {"per", FormatDuration(spec.period)},
        {"burst", spec.Capacity()},
        {"shaper", spec.shaper},
        {"lines", result.lines},
        {"admitted", result.admitted},
        {"rejected", result.rejected},
        {"keys", per_key},
    };
    buf += summary.dump(2);
    buf += '\n';
  }
  flush();
  if (write_failed || std::fflush(out) != 0) return write_error();
  return result;
}

}  // namespace sluice::cli
