// Which script decides a limit in Redis, and its spec arguments; a limit outside what the
// scripts decide exactly is refused here. One derivation, used by the store and by
// bench/redis_load (whose ceiling run must ask Redis exactly what the store asks). Internal.
#ifndef SLUICE_STORE_REDIS_REDIS_SCRIPT_CHOICE_H_
#define SLUICE_STORE_REDIS_REDIS_SCRIPT_CHOICE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "sluice/limit_spec.h"
#include "sluice/status.h"
#include "store/redis/redis_scripts.h"

namespace sluice::internal {

// The script and its spec arguments (between now and cost) for one limit, and the index of its
// body in the multi-limit, lease and refund scripts (redis_script_multi.h).
struct ScriptCall {
  const LuaScript* script = nullptr;
  std::vector<std::string> params;
  int id = 0;
};

// `generation` (LimiterOptions::spec_generation) goes with a narrow bucket's spec arguments:
// its key records the spec it was written under (redis_scripts.h, bucket_read).
Result<ScriptCall> ScriptFor(const LimitSpec& spec, int64_t generation = 0);

// The same for a spec ValidateLimitSpec accepts, without checking that again: only the Redis
// store's own bounds (docs/redis.md, "The whole range"). Tests reach wider specs through it.
Result<ScriptCall> ScriptForValidSpec(const LimitSpec& spec, int64_t generation = 0);

}  // namespace sluice::internal

#endif  // SLUICE_STORE_REDIS_REDIS_SCRIPT_CHOICE_H_
