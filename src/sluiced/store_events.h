// sluiced's log lines for the Redis store's state changes (connections lost and back, breakers,
// eviction policy, evicted keys): each at the level its consequence deserves.
#ifndef SLUICE_SLUICED_STORE_EVENTS_H_
#define SLUICE_SLUICED_STORE_EVENTS_H_

#include "sluice/redis_store.h"

namespace sluice::server {

// A RedisEventHook (OpenStoreOptions::redis_events).
void LogRedisEvent(const RedisEvent& e);

}  // namespace sluice::server

#endif  // SLUICE_SLUICED_STORE_EVENTS_H_
