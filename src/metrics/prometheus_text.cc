#include "metrics/prometheus_text.h"

#include <charconv>
#include <cmath>

namespace sluice::server {
namespace {

// Length of the valid UTF-8 sequence at the start of `s`, or 0 if it is not one (overlong
// forms, surrogates and code points above U+10FFFF are invalid, as Go's utf8.ValidString has
// them, which is what Prometheus checks with).
size_t Utf8SequenceLength(std::string_view s) {
  const auto b0 = static_cast<unsigned char>(s[0]);
  if (b0 < 0x80) return 1;
  size_t n = 0;
  unsigned char lo = 0x80;
  unsigned char hi = 0xBF;
  if (b0 >= 0xC2 && b0 <= 0xDF) {
    n = 2;
  } else if (b0 >= 0xE0 && b0 <= 0xEF) {
    n = 3;
    if (b0 == 0xE0) lo = 0xA0;  // overlong
    if (b0 == 0xED) hi = 0x9F;  // surrogates
  } else if (b0 >= 0xF0 && b0 <= 0xF4) {
    n = 4;
    if (b0 == 0xF0) lo = 0x90;  // overlong
    if (b0 == 0xF4) hi = 0x8F;  // above U+10FFFF
  } else {
    return 0;
  }
  if (s.size() < n) return 0;
  const auto b1 = static_cast<unsigned char>(s[1]);
  if (b1 < lo || b1 > hi) return 0;
  for (size_t i = 2; i < n; ++i) {
    const auto b = static_cast<unsigned char>(s[i]);
    if (b < 0x80 || b > 0xBF) return 0;
  }
  return n;
}

void AppendLabels(std::string& out, std::string_view labels, std::string_view extra) {
  if (labels.empty() && extra.empty()) return;
  out += '{';
  out += labels;
  if (!labels.empty() && !extra.empty()) out += ',';
  out += extra;
  out += '}';
}

}  // namespace

void AppendLabelValue(std::string& out, std::string_view value) {
  static constexpr std::string_view kReplacement = "\xEF\xBF\xBD";
  while (!value.empty()) {
    const char c = value[0];
    const size_t n = Utf8SequenceLength(value);
    if (n == 0) {
      out += kReplacement;
      value.remove_prefix(1);
      continue;
    }
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '"') {
      out += "\\\"";
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out.append(value.data(), n);
    }
    value.remove_prefix(n);
  }
}

void AppendLabel(std::string& out, std::string_view name, std::string_view value) {
  out += name;
  out += "=\"";
  AppendLabelValue(out, value);
  out += '"';
}

void AppendHelpAndType(std::string& out, std::string_view name, std::string_view help,
                       std::string_view type) {
  out += "# HELP ";
  out += name;
  out += ' ';
  for (char c : help) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out += c;
    }
  }
  out += "\n# TYPE ";
  out += name;
  out += ' ';
  out += type;
  out += '\n';
}

void AppendNumber(std::string& out, uint64_t value) {
  char buf[24];
  const auto r = std::to_chars(buf, buf + sizeof buf, value);
  out.append(buf, r.ptr);
}

void AppendNumber(std::string& out, double value) {
  if (std::isnan(value)) {
    out += "NaN";
  } else if (std::isinf(value)) {
    out += value > 0 ? "+Inf" : "-Inf";
  } else {
    char buf[32];  // the shortest round-trip form of a double fits in 24
    const auto r = std::to_chars(buf, buf + sizeof buf, value);
    out.append(buf, r.ptr);
  }
}

void AppendSample(std::string& out, std::string_view name, std::string_view labels,
                  std::string_view extra, uint64_t value) {
  out += name;
  AppendLabels(out, labels, extra);
  out += ' ';
  AppendNumber(out, value);
  out += '\n';
}

void AppendSample(std::string& out, std::string_view name, std::string_view labels,
                  std::string_view extra, double value) {
  out += name;
  AppendLabels(out, labels, extra);
  out += ' ';
  AppendNumber(out, value);
  out += '\n';
}

void AppendHistogram(std::string& out, std::string_view name, std::string_view labels,
                     std::span<const std::string_view> le, std::span<const uint64_t> counts,
                     double sum) {
  std::string bucket(name);
  bucket += "_bucket";
  std::string extra;
  uint64_t cumulative = 0;
  for (size_t i = 0; i < counts.size(); ++i) {
    cumulative += counts[i];
    extra.assign("le=\"");
    extra += i < le.size() ? le[i] : std::string_view("+Inf");
    extra += '"';
    AppendSample(out, bucket, labels, extra, cumulative);
  }
  std::string suffixed(name);
  suffixed += "_sum";
  AppendSample(out, suffixed, labels, {}, sum);
  suffixed.replace(suffixed.size() - 4, 4, "_count");
  AppendSample(out, suffixed, labels, {}, cumulative);
}

}  // namespace sluice::server
