#include "metrics/prometheus_validator.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <regex>
#include <set>
#include <string>

namespace sluice::server::test {
namespace {

const std::regex& HelpLine() {
  // Only \\ and \n are escapes in HELP text.
  static const std::regex re(R"(^# HELP ([a-zA-Z_:][a-zA-Z0-9_:]*) ((?:[^\\\n]|\\[\\n])*)$)");
  return re;
}
const std::regex& TypeLine() {
  static const std::regex re(
      R"(^# TYPE ([a-zA-Z_:][a-zA-Z0-9_:]*) (counter|gauge|histogram|summary|untyped)$)");
  return re;
}
// A label pair and a sample value; the raw strings use a delimiter because the patterns
// contain )".
constexpr std::string_view kLabel = R"re([a-zA-Z_][a-zA-Z0-9_]*="(?:[^"\\\n]|\\[\\"n])*")re";
constexpr std::string_view kValue =
    R"re([+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?|[+-]?Inf|NaN)re";

const std::regex& SampleLine() {
  static const std::regex re(std::string(R"re(^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{((?:)re") +
                             std::string(kLabel) + "(?:," + std::string(kLabel) +
                             R"re()*,?)?)\})? ()re" + std::string(kValue) +
                             R"re()(?: (-?[0-9]+))?$)re");
  return re;
}
const std::regex& Label() {
  static const std::regex re(R"re(([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\\n]|\\[\\"n])*)")re");
  return re;
}

std::string Unescape(const std::string& s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '\\' && i + 1 < s.size()) {
      ++i;
      out += s[i] == 'n' ? '\n' : s[i];
    } else {
      out += s[i];
    }
  }
  return out;
}

bool ValidUtf8(std::string_view s) {
  for (size_t i = 0; i < s.size();) {
    const auto c = static_cast<unsigned char>(s[i]);
    size_t n = c < 0x80                 ? 1
               : c >= 0xC2 && c <= 0xDF ? 2
               : c >= 0xE0 && c <= 0xEF ? 3
               : c >= 0xF0 && c <= 0xF4 ? 4
                                        : 0;
    if (n == 0 || i + n > s.size()) return false;
    for (size_t k = 1; k < n; ++k) {
      if ((static_cast<unsigned char>(s[i + k]) & 0xC0) != 0x80) return false;
    }
    i += n;
  }
  return true;
}

double ParseValue(const std::string& v) {
  if (v == "+Inf" || v == "Inf") return INFINITY;
  if (v == "-Inf") return -INFINITY;
  if (v == "NaN") return NAN;
  return std::stod(v);
}

struct HistogramState {
  double last_le = -INFINITY;
  double last_count = 0;
  std::optional<double> inf_count;
  std::optional<double> count;
  bool has_sum = false;
};

}  // namespace

Exposition ParseExposition(std::string_view text) {
  Exposition out;
  if (!text.empty() && text.back() != '\n') out.errors.push_back("no line feed at the end");
  if (!ValidUtf8(text)) out.errors.push_back("not valid UTF-8");

  std::map<std::string, std::string> types;  // family -> type
  std::set<std::string> helps;
  std::set<std::string> done;  // families whose group has ended
  std::string current;         // family of the group being read
  std::set<std::string> series;
  // family + labels without le -> state
  std::map<std::string, HistogramState> histograms;

  size_t line_no = 0;
  size_t pos = 0;
  while (pos < text.size()) {
    const size_t end = std::min(text.find('\n', pos), text.size());
    const std::string line(text.substr(pos, end - pos));
    pos = end + 1;
    ++line_no;
    auto error = [&](const std::string& what) {
      out.errors.push_back("line " + std::to_string(line_no) + ": " + what + ": " + line);
    };
    if (line.empty()) continue;
    std::smatch m;
    if (line.starts_with("# HELP ")) {
      if (!std::regex_match(line, m, HelpLine())) {
        error("bad HELP");
      } else if (!helps.insert(m[1]).second) {
        error("second HELP");
      }
      continue;
    }
    if (line.starts_with("# TYPE ")) {
      if (!std::regex_match(line, m, TypeLine())) {
        error("bad TYPE");
      } else if (types.contains(m[1])) {
        error("second TYPE");
      } else if (done.contains(m[1]) || current == m[1].str()) {
        error("TYPE after samples");
      } else {
        types[m[1]] = m[2];
      }
      continue;
    }
    if (line.starts_with("#")) continue;  // a comment

    if (!std::regex_match(line, m, SampleLine())) {
      error("bad sample line");
      continue;
    }
    Sample sample{m[1], {}, ParseValue(m[3])};
    const std::string label_text = m[2];
    std::set<std::string> label_names;
    for (std::sregex_iterator it(label_text.begin(), label_text.end(), Label()), last; it != last;
         ++it) {
      if (!label_names.insert((*it)[1]).second) error("label twice");
      sample.labels.emplace_back((*it)[1], Unescape((*it)[2]));
    }

    // The family: the name itself, or a histogram's name without _bucket/_sum/_count.
    std::string family = sample.name;
    std::string suffix;
    if (!types.contains(family)) {
      for (std::string_view s : {"_bucket", "_sum", "_count"}) {
        if (family.ends_with(s)) {
          const std::string base = family.substr(0, family.size() - s.size());
          if (types.contains(base) && types[base] == "histogram") {
            family = base;
            suffix = s;
          }
        }
      }
    }
    if (!types.contains(family)) {
      error("no TYPE for the family");
      continue;
    }
    if (family != current) {
      if (done.contains(family)) error("family not contiguous");
      if (!current.empty()) done.insert(current);
      current = family;
    }
    const std::string& type = types[family];
    if (type == "histogram" && suffix.empty()) error("histogram sample without a suffix");
    if ((type == "counter" || type == "histogram") && !(sample.value >= 0)) {
      error("negative or NaN count");
    }

    auto sorted = sample.labels;
    std::sort(sorted.begin(), sorted.end());
    std::string key = sample.name;
    std::string key_without_le = family;
    for (const auto& [k, v] : sorted) {
      key += "|" + k + "=" + v;
      if (k != "le") key_without_le += "|" + k + "=" + v;
    }
    if (!series.insert(key).second) error("duplicate series");

    if (type == "histogram") {
      HistogramState& h = histograms[key_without_le];
      if (suffix == "_bucket") {
        auto le = std::find_if(sample.labels.begin(), sample.labels.end(),
                               [](const auto& l) { return l.first == "le"; });
        if (le == sample.labels.end()) {
          error("bucket without le");
          continue;
        }
        double bound = 0;
        try {
          bound = ParseValue(le->second);
        } catch (const std::exception&) {
          error("le is not a number");
          continue;
        }
        if (h.inf_count) error("bucket after +Inf");
        if (!(bound > h.last_le)) error("le not ascending");
        if (sample.value < h.last_count) error("buckets not cumulative");
        h.last_le = bound;
        h.last_count = sample.value;
        if (std::isinf(bound)) h.inf_count = sample.value;
      } else if (suffix == "_sum") {
        h.has_sum = true;
      } else {
        h.count = sample.value;
      }
    }
    out.samples.push_back(std::move(sample));
  }

  for (const auto& [key, h] : histograms) {
    if (!h.inf_count) out.errors.push_back(key + ": no +Inf bucket");
    if (!h.count) out.errors.push_back(key + ": no _count");
    if (h.inf_count && h.count && *h.inf_count != *h.count) {
      out.errors.push_back(key + ": +Inf bucket differs from _count");
    }
    if (!h.has_sum) out.errors.push_back(key + ": no _sum");
  }
  return out;
}

std::optional<double> SampleValue(const Exposition& e, std::string_view name,
                                  std::vector<std::pair<std::string, std::string>> labels) {
  std::sort(labels.begin(), labels.end());
  for (const Sample& s : e.samples) {
    if (s.name != name) continue;
    auto sorted = s.labels;
    std::sort(sorted.begin(), sorted.end());
    if (sorted == labels) return s.value;
  }
  return std::nullopt;
}

}  // namespace sluice::server::test
