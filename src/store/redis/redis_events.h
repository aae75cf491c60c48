// Rate limiting of the Redis store's events (RedisEvent, sluice/redis_store.h), decided here and
// nowhere else, on the store's Clock. A flapping server or a script failing on every call must
// not flood the log, yet the log must end on the true state and say how much it left out.
//
// Per server and kind, the first event passes at once; another of that kind within `interval`
// of the last one passed is held (a newer one replaces it) and passed on by Flush() once the
// interval is over. Kinds that describe one state (connection lost / restored / connected;
// breaker opened / closed) form a group: an event passed on drops the older held events of its
// group, so the log's last word on a state is always the newest. Every event passed on carries
// in `suppressed` how many events of its group were dropped since the group's last one.
// Thread-safe; the sink is called without the lock held.
#ifndef SLUICE_STORE_REDIS_REDIS_EVENTS_H_
#define SLUICE_STORE_REDIS_REDIS_EVENTS_H_

#include <array>
#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <string>

#include "sluice/clock.h"
#include "sluice/redis_store.h"

namespace sluice::internal {

class EventThrottle {
 public:
  EventThrottle(RedisEventHook sink, const Clock& clock, Duration interval)
      : sink_(std::move(sink)), clock_(clock), interval_(interval) {}

  void Emit(RedisEvent event);
  // Passes on the held events whose interval is over, oldest first.
  void Flush();

 private:
  static constexpr size_t kKinds = static_cast<size_t>(RedisEventKind::kKeysEvicted) + 1;

  struct Held {
    RedisEvent event;
    uint64_t seq = 0;
  };
  struct Server {
    std::array<std::optional<Timestamp>, kKinds> last_passed{};
    std::array<std::optional<Held>, kKinds> held{};
    std::array<uint64_t, kKinds> dropped{};  // indexed by the group's first kind
  };

  static size_t Group(RedisEventKind kind);

  const RedisEventHook sink_;
  const Clock& clock_;
  const Duration interval_;
  std::mutex mu_;
  std::map<std::string, Server> servers_;  // guarded by mu_; a handful of servers
  uint64_t seq_ = 0;                       // guarded by mu_
};

}  // namespace sluice::internal

#endif  // SLUICE_STORE_REDIS_REDIS_EVENTS_H_
