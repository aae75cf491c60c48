// Which script the Redis store runs for a limit, and the spec's arguments it sends between `now`
// and `cost`: one derivation, used by the store and by bench/redis_load (whose ceiling run must
// ask Redis exactly what the store asks). Internal.
#ifndef SLUICE_STORE_REDIS_REDIS_SCRIPT_CALL_H_
#define SLUICE_STORE_REDIS_REDIS_SCRIPT_CALL_H_

#include <string>
#include <vector>

#include "sluice/limit_spec.h"
#include "sluice/status.h"
#include "store/redis/redis_client.h"

namespace sluice::internal {

struct ScriptCall {
  const LuaScript* script = nullptr;
  std::vector<std::string> params;
};

// An error when the spec is invalid or outside what the store counts exactly.
Result<ScriptCall> ScriptFor(const LimitSpec& spec);

}  // namespace sluice::internal

#endif  // SLUICE_STORE_REDIS_REDIS_SCRIPT_CALL_H_
