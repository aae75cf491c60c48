// `sluice simulate overload`: a backend of N workers behind a FIFO queue, clients that give up
// at a deadline, and a 3x load spike, under one concurrency policy (none, a fixed limit, or
// client::AdaptiveLimit), with priority shedding when a limit is in force. A discrete-event
// simulation on a manual clock with seeded randomness: a run is a pure function of its options.
//
// What it shows is what Netflix's "Performance Under Load" and Stripe's "Scaling your API with
// rate limiters" say: without a limit the queue grows until every answer comes after its
// caller's deadline, and the workers spend themselves on calls nobody waits for (goodput
// collapses while the workers are 100% busy); with a limit, the excess is refused at once, the
// low priorities first, and the calls admitted are answered in time (docs/client.md).
#ifndef SLUICE_CLI_OVERLOAD_H_
#define SLUICE_CLI_OVERLOAD_H_

#include <array>
#include <cstdint>
#include <cstdio>
#include <string_view>
#include <vector>

#include "sluice/status.h"
#include "sluice/time.h"

namespace sluice::cli {

enum class OverloadPolicy { kNone, kFixed, kAdaptive };
inline constexpr OverloadPolicy kAllOverloadPolicies[] = {
    OverloadPolicy::kNone, OverloadPolicy::kFixed, OverloadPolicy::kAdaptive};
std::string_view OverloadPolicyName(OverloadPolicy policy);  // "none", "fixed", "adaptive"
Result<OverloadPolicy> ParseOverloadPolicy(std::string_view name);

// Priorities, most important first, with the share of the limit each may fill (the thresholds
// of the server's `shed` rules: low 0.6, normal 0.8, critical all of it).
enum Priority { kCritical = 0, kNormal = 1, kLow = 2 };
inline constexpr int kPriorities = 3;
inline constexpr std::array<std::string_view, kPriorities> kPriorityNames = {"critical", "normal",
                                                                             "low"};
inline constexpr std::array<double, kPriorities> kPriorityShare = {1.0, 0.8, 0.6};

struct OverloadOptions {
  int64_t workers = 50;
  Duration service = std::chrono::milliseconds(10);  // mean; each call 0.5x to 1.5x of it
  double rate = 3000;                                // calls per second outside the spike
  double spike_factor = 3;
  Duration spike_start = std::chrono::seconds(10);
  Duration spike_length = std::chrono::seconds(10);
  Duration duration = std::chrono::seconds(30);  // arrivals stop here
  Duration deadline = std::chrono::milliseconds(200);
  int64_t fixed_limit = 100;  // the `fixed` policy's limit
  // Arrivals by priority: critical, normal, low.
  std::array<double, kPriorities> mix = {0.2, 0.5, 0.3};
  uint64_t seed = 1;
};

// An error naming the option when a count, rate or duration is out of range.
Result<OverloadOptions> ValidateOverloadOptions(const OverloadOptions& options);

struct PriorityCounts {
  int64_t offered = 0;
  int64_t shed = 0;       // refused by the client's limit, at once
  int64_t good = 0;       // answered within the deadline
  int64_t timed_out = 0;  // admitted, not answered within the deadline
};

// One second of a run: arrivals, shed and timeouts by when they happened, good by completion.
struct OverloadSecond {
  int64_t offered = 0, shed = 0, good = 0, timed_out = 0;
  int64_t limit = 0;    // the client's limit at the end of the second (0: none)
  int64_t backend = 0;  // calls in the backend (working or queued) at the end of the second
};

struct OverloadResult {
  OverloadPolicy policy = OverloadPolicy::kNone;
  std::array<PriorityCounts, kPriorities> by_priority{};
  int64_t spike_good = 0;  // good calls that arrived during the spike
  Duration p99{0};         // of admitted calls' latency; a timeout counts as the deadline
  std::vector<OverloadSecond> seconds;
};

// Runs one policy; `options` must be valid.
OverloadResult SimulateOverload(OverloadPolicy policy, const OverloadOptions& options);

enum class OverloadOutput { kText, kCsv, kTimelineCsv };

// Text (a block per policy), CSV (a row per policy) or a timeline CSV (a row per policy and
// second); the columns are documented in docs/client.md. False if a write failed.
bool PrintOverload(const std::vector<OverloadResult>& results, const OverloadOptions& options,
                   OverloadOutput output, std::FILE* out);

}  // namespace sluice::cli

#endif  // SLUICE_CLI_OVERLOAD_H_
