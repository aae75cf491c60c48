#include "sluiced/store_events.h"

#include <spdlog/spdlog.h>

namespace sluice::server {

// The Redis store's state changes, already rate-limited by the store (redis_events.h).
void LogRedisEvent(const RedisEvent& e) {
  using Kind = RedisEventKind;
  spdlog::level::level_enum level = spdlog::level::info;
  switch (e.kind) {
    case Kind::kConnectionLost:
    case Kind::kAuthFailed:
    case Kind::kCommandError:
    case Kind::kKeysEvicted:  // limits over-admitted
      level = spdlog::level::err;
      break;
    case Kind::kBreakerOpened:
      level = spdlog::level::warn;
      break;
    case Kind::kEvictionPolicy:
      level = e.unsafe ? spdlog::level::err : spdlog::level::info;
      break;
    default:
      break;
  }
  if (e.suppressed == 0) {
    spdlog::log(level, "{}", e.message);
  } else {
    spdlog::log(level, "{} ({} similar events not logged)", e.message, e.suppressed);
  }
}

}  // namespace sluice::server
