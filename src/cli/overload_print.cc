// `sluice simulate overload`'s output: text for a person, a CSV row per policy for a script, a
// CSV row per policy and second for the plot's timeline (columns in docs/client.md).
#include <fmt/format.h>

#include <string>

#include "cli/overload.h"

namespace sluice::cli {
namespace {

double Seconds(Duration d) { return std::chrono::duration<double>(d).count(); }
double Millis(Duration d) { return std::chrono::duration<double, std::milli>(d).count(); }

PriorityCounts Total(const OverloadResult& r) {
  PriorityCounts t;
  for (const PriorityCounts& c : r.by_priority) {
    t.offered += c.offered;
    t.shed += c.shed;
    t.good += c.good;
    t.timed_out += c.timed_out;
  }
  return t;
}

double Capacity(const OverloadOptions& o) {
  return static_cast<double>(o.workers) / Seconds(o.service);
}

std::string Text(const OverloadResult& r, const OverloadOptions& o) {
  const PriorityCounts t = Total(r);
  std::string text = fmt::format("policy: {}", OverloadPolicyName(r.policy));
  if (r.policy == OverloadPolicy::kFixed) text += fmt::format(" (limit {})", o.fixed_limit);
  text += "\n";
  text +=
      fmt::format("goodput: {:.1f}/s over the run, {:.1f}/s during the spike (capacity {:.0f}/s)\n",
                  static_cast<double>(t.good) / Seconds(o.duration),
                  static_cast<double>(r.spike_good) / Seconds(o.spike_length), Capacity(o));
  text += fmt::format("p99 latency: {:.1f} ms (a timeout counts as the {:.0f} ms deadline)\n",
                      Millis(r.p99), Millis(o.deadline));
  text += fmt::format("{:<10}{:>10}{:>10}{:>10}{:>11}\n", "priority", "offered", "good", "shed",
                      "timed out");
  for (int p = 0; p < kPriorities; ++p) {
    const PriorityCounts& c = r.by_priority[static_cast<size_t>(p)];
    text += fmt::format("{:<10}{:>10}{:>10}{:>10}{:>11}\n", kPriorityNames[static_cast<size_t>(p)],
                        c.offered, c.good, c.shed, c.timed_out);
  }
  text += fmt::format("{:<10}{:>10}{:>10}{:>10}{:>11}\n", "all", t.offered, t.good, t.shed,
                      t.timed_out);
  return text;
}

std::string CsvRow(const OverloadResult& r, const OverloadOptions& o) {
  const PriorityCounts t = Total(r);
  const auto& c = r.by_priority;
  return fmt::format(
      "{},{},{:.3f},{:g},{:g},{},{},{:.3f},{},{},{},{},{},{},{:.1f},{:.1f},{:.1f},{:.3f},"
      "{},{},{},{},{},{},{},{},{}\n",
      OverloadPolicyName(r.policy), o.workers, Millis(o.service), o.rate, o.spike_factor,
      o.spike_start / std::chrono::milliseconds(1), o.spike_length / std::chrono::milliseconds(1),
      Millis(o.deadline), r.policy == OverloadPolicy::kFixed ? o.fixed_limit : 0, o.seed, t.offered,
      t.good, t.shed, t.timed_out, Capacity(o), static_cast<double>(t.good) / Seconds(o.duration),
      static_cast<double>(r.spike_good) / Seconds(o.spike_length), Millis(r.p99),
      c[kCritical].offered, c[kNormal].offered, c[kLow].offered, c[kCritical].shed, c[kNormal].shed,
      c[kLow].shed, c[kCritical].good, c[kNormal].good, c[kLow].good);
}

}  // namespace

bool PrintOverload(const std::vector<OverloadResult>& results, const OverloadOptions& o,
                   OverloadOutput output, std::FILE* out) {
  std::string text;
  if (output == OverloadOutput::kCsv) {
    text +=
        "policy,workers,service_ms,rate,spike_factor,spike_start_ms,spike_length_ms,deadline_ms,"
        "fixed_limit,seed,offered,good,shed,timed_out,capacity_per_s,goodput_per_s,"
        "spike_goodput_per_s,p99_ms,offered_critical,offered_normal,offered_low,shed_critical,"
        "shed_normal,shed_low,good_critical,good_normal,good_low\n";
  } else if (output == OverloadOutput::kTimelineCsv) {
    text += "policy,second,offered,good,shed,timed_out,limit,backend\n";
  }
  for (const OverloadResult& r : results) {
    if (output == OverloadOutput::kCsv) {
      text += CsvRow(r, o);
    } else if (output == OverloadOutput::kTimelineCsv) {
      for (size_t s = 0; s < r.seconds.size(); ++s) {
        const OverloadSecond& sec = r.seconds[s];
        text += fmt::format("{},{},{},{},{},{},{},{}\n", OverloadPolicyName(r.policy), s,
                            sec.offered, sec.good, sec.shed, sec.timed_out, sec.limit, sec.backend);
      }
    } else {
      if (!text.empty()) text += "\n";
      text += Text(r, o);
    }
  }
  return std::fwrite(text.data(), 1, text.size(), out) == text.size() && std::fflush(out) == 0;
}

}  // namespace sluice::cli
