// `sluice replay`: a traffic trace through one algorithm, via the memory store (the very code
// path the server uses), one decision per line.
#ifndef SLUICE_CLI_REPLAY_H_
#define SLUICE_CLI_REPLAY_H_

#include <cstdio>

#include "cli/trace_reader.h"
#include "sluice/limit_spec.h"
#include "sluice/limiter.h"
#include "sluice/status.h"

namespace sluice::cli {

enum class ReplayOutput { kJsonl, kSummary };

struct ReplayResult {
  uint64_t lines = 0;
  uint64_t admitted = 0;
  uint64_t rejected = 0;
  StoreStats store;
};

// Reads every line, decides it with `limiter` at t_ms, and writes jsonl or, at the end, a JSON
// summary to `out`. Stops at the first malformed line with its error.
Result<ReplayResult> Replay(TraceReader& reader, Limiter& limiter, ReplayOutput output,
                            std::FILE* out);

// Milliseconds for a wait, rounded up: a client told to wait must not come back early.
int64_t CeilMillis(Duration d);

}  // namespace sluice::cli

#endif  // SLUICE_CLI_REPLAY_H_
