// Parsing and printing of human durations: "250ms", "1s", "1m", "1h", "1d" (also "us", "ns",
// "w"). A bare number is rejected: a limit with an ambiguous unit is a bug waiting to happen.
#ifndef SLUICE_DURATION_H_
#define SLUICE_DURATION_H_

#include <string>
#include <string_view>

#include "sluice/status.h"
#include "sluice/time.h"

namespace sluice {

Result<Duration> ParseDuration(std::string_view text);

// The shortest exact spelling, e.g. 60s -> "1m", 1500ms -> "1500ms".
std::string FormatDuration(Duration d);

}  // namespace sluice

#endif  // SLUICE_DURATION_H_
