// The permits one node granted from a shared store and has not seen released or expired, for
// PermitStats::in_flight: the store holds every node's, and counting them there would cost a
// call. Expiry here is by the node's clock (the `now` its calls get), so the count is an
// estimate of this node's share, never an input to a decision. Bounded: beyond kMaxEntries
// permits, new ones are not tracked (the count then reads low). Thread-safe. Internal.
#ifndef SLUICE_STORE_REDIS_PERMIT_LEDGER_H_
#define SLUICE_STORE_REDIS_PERMIT_LEDGER_H_

#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>

#include "sluice/time.h"

namespace sluice::internal {

class PermitLedger {
 public:
  static constexpr size_t kMaxEntries = size_t{1} << 18;

  // The permit `id` of `key` is held until `until` (granted or renewed).
  void Hold(std::string_view key, std::string_view id, Timestamp now, Timestamp until) {
    std::lock_guard<std::mutex> lock(mu_);
    Expire(now);
    const std::string name = Name(key, id);
    if (auto it = held_.find(name); it != held_.end()) {
      by_expiry_.erase(it->second);
      it->second = by_expiry_.emplace(until, name);
      return;
    }
    if (held_.size() >= kMaxEntries) return;
    held_.emplace(name, by_expiry_.emplace(until, name));
  }

  // The permit is no longer held (released, or the store did not know it).
  void Drop(std::string_view key, std::string_view id, Timestamp now) {
    std::lock_guard<std::mutex> lock(mu_);
    Expire(now);
    if (auto it = held_.find(Name(key, id)); it != held_.end()) {
      by_expiry_.erase(it->second);
      held_.erase(it);
    }
  }

  // As of `now`: the permits whose expiry has passed are dropped first.
  int64_t held(Timestamp now) {
    std::lock_guard<std::mutex> lock(mu_);
    Expire(now);
    return static_cast<int64_t>(held_.size());
  }

 private:
  static std::string Name(std::string_view key, std::string_view id) {
    std::string name(key);
    name.push_back('\0');  // neither a permit id nor a key of the service holds one
    name.append(id);
    return name;
  }
  void Expire(Timestamp now) {
    while (!by_expiry_.empty() && by_expiry_.begin()->first <= now) {
      held_.erase(by_expiry_.begin()->second);
      by_expiry_.erase(by_expiry_.begin());
    }
  }

  mutable std::mutex mu_;
  std::multimap<Timestamp, std::string> by_expiry_;
  std::unordered_map<std::string, std::multimap<Timestamp, std::string>::iterator> held_;
};

}  // namespace sluice::internal

#endif  // SLUICE_STORE_REDIS_PERMIT_LEDGER_H_
