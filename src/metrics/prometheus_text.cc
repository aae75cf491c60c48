#include "metrics/prometheus_text.h"

#include <charconv>
#include <cmath>

#include "util/utf8.h"

namespace sluice::server {
namespace {

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
  while (!value.empty()) {
    const char c = value[0];
    const size_t n = util::Utf8SequenceLength(value, 0);
    if (n == 0) {
      out += util::kReplacementCharacter;
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
