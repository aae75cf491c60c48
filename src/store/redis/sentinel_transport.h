// The Redis store's transport through Redis Sentinel: a standalone transport to the master the
// sentinels name (sentinel.h), replaced by one to the new master after a failover.
#ifndef SLUICE_STORE_REDIS_SENTINEL_TRANSPORT_H_
#define SLUICE_STORE_REDIS_SENTINEL_TRANSPORT_H_

#include <memory>

#include "sluice/redis_store.h"
#include "store/redis/redis_transport.h"
#include "store/redis/sentinel.h"

namespace sluice::internal {

// Nothing is known of the master until the watch's first resolution (moments after this
// returns, unless no sentinel answers): until then, and whenever no master can be trusted,
// calls fail at once with a connection error, so each limit's failure_mode decides and the
// decision is marked degraded, as for any Redis that cannot answer.
std::unique_ptr<RedisTransport> MakeSentinelTransport(SentinelSettings settings, int connections,
                                                      NodeSettings node);

// The sentinels of `options` (their password; the connect timeout for each connection and
// answer) and the master's name, with `master` (credentials, database, timeouts) for the master.
// Defined in redis_store.cc.
SentinelSettings SentinelFor(const RedisStoreOptions& options, const RedisEndpoint& master);

}  // namespace sluice::internal

#endif  // SLUICE_STORE_REDIS_SENTINEL_TRANSPORT_H_
