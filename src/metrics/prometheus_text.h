// Building blocks of the Prometheus text exposition format (version 0.0.4): escaping and the
// shape of HELP/TYPE, sample and histogram lines. Knows nothing about sluice's families.
//
// Label sets are passed pre-rendered (`domain="a",limit="b"`, empty for none) because a series'
// labels never change: metrics.cc renders them once, when the series is created.
#ifndef SLUICE_METRICS_PROMETHEUS_TEXT_H_
#define SLUICE_METRICS_PROMETHEUS_TEXT_H_

#include <cstdint>
#include <span>
#include <string>
#include <string_view>

namespace sluice::server {

// A label value between its quotes: '\' '"' and line feed escaped as \\ \" \n. Bytes that are
// not valid UTF-8 become U+FFFD, because Prometheus rejects the whole scrape for one of them and
// a value may come from a client (limits with detailed_metric).
void AppendLabelValue(std::string& out, std::string_view value);

// `name="value"` with the value escaped as above.
void AppendLabel(std::string& out, std::string_view name, std::string_view value);

// "# HELP name text\n" (text escaped: '\' and line feed) and "# TYPE name type\n".
void AppendHelpAndType(std::string& out, std::string_view name, std::string_view help,
                       std::string_view type);

// Numbers as the format spells them: integers in decimal, doubles in their shortest round-trip
// form, infinities as +Inf/-Inf and NaN as NaN.
void AppendNumber(std::string& out, uint64_t value);
void AppendNumber(std::string& out, double value);

// One sample line: name{labels,extra} value. `labels` and `extra` are rendered label lists,
// either may be empty.
void AppendSample(std::string& out, std::string_view name, std::string_view labels,
                  std::string_view extra, uint64_t value);
void AppendSample(std::string& out, std::string_view name, std::string_view labels,
                  std::string_view extra, double value);

// A histogram series: name_bucket{labels,le="..."} cumulative counts for each bound and +Inf,
// then name_sum and name_count. `counts` holds one non-cumulative count per bound plus a last one
// for observations above every bound, so counts.size() == le.size() + 1; `le` are the bounds as
// they should be printed, ascending.
void AppendHistogram(std::string& out, std::string_view name, std::string_view labels,
                     std::span<const std::string_view> le, std::span<const uint64_t> counts,
                     double sum);

}  // namespace sluice::server

#endif  // SLUICE_METRICS_PROMETHEUS_TEXT_H_
