#include "store/redis/redis_events.h"

#include <algorithm>
#include <utility>
#include <vector>

namespace sluice::internal {

size_t EventThrottle::Group(RedisEventKind kind) {
  switch (kind) {
    case RedisEventKind::kConnected:
    case RedisEventKind::kConnectionLost:
    case RedisEventKind::kConnectionRestored:
      return static_cast<size_t>(RedisEventKind::kConnected);
    case RedisEventKind::kBreakerOpened:
    case RedisEventKind::kBreakerClosed:
      return static_cast<size_t>(RedisEventKind::kBreakerOpened);
    default:
      return static_cast<size_t>(kind);
  }
}

void EventThrottle::Emit(RedisEvent event) {
  if (!sink_) return;
  const Timestamp now = clock_.Now();
  const size_t kind = static_cast<size_t>(event.kind);
  const size_t group = Group(event.kind);
  {
    std::lock_guard<std::mutex> lock(mu_);
    Server& s = servers_[event.server];
    const auto& last = s.last_passed[kind];
    if (last.has_value() && now - *last < interval_) {
      if (s.held[kind].has_value()) ++s.dropped[group];  // replaced by a newer one
      s.held[kind] = Held{std::move(event), ++seq_};
      return;
    }
    // Passes: the older held events of its group are stale now.
    for (size_t k = 0; k < kKinds; ++k) {
      if (Group(static_cast<RedisEventKind>(k)) == group && s.held[k].has_value()) {
        s.held[k].reset();
        ++s.dropped[group];
      }
    }
    s.last_passed[kind] = now;
    event.suppressed = std::exchange(s.dropped[group], 0);
  }
  sink_(event);
}

void EventThrottle::Flush() {
  if (!sink_) return;
  const Timestamp now = clock_.Now();
  std::vector<Held> due;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto& [name, s] : servers_) {
      for (size_t k = 0; k < kKinds; ++k) {
        if (!s.held[k].has_value() || now - *s.last_passed[k] < interval_) continue;
        Held h = std::move(*s.held[k]);
        s.held[k].reset();
        s.last_passed[k] = now;
        h.event.suppressed = std::exchange(s.dropped[Group(static_cast<RedisEventKind>(k))], 0);
        due.push_back(std::move(h));
      }
    }
  }
  std::sort(due.begin(), due.end(), [](const Held& a, const Held& b) { return a.seq < b.seq; });
  for (const Held& h : due) sink_(h.event);
}

}  // namespace sluice::internal
