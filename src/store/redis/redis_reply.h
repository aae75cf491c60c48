// Reading what Redis answers, apart from the I/O: a limiter script's decision reply and a
// cluster's MOVED/ASK redirection. A reply comes from the network, so each reader checks the
// reply's shape and ranges and refuses what the scripts or Redis cannot have sent, rather than
// computing with it (tests/fuzz/fuzz_redis_reply.cc feeds them arbitrary bytes through hiredis).
#ifndef SLUICE_STORE_REDIS_REDIS_REPLY_H_
#define SLUICE_STORE_REDIS_REDIS_REPLY_H_

#include <cstdint>
#include <string>
#include <string_view>

#include "sluice/decision.h"
#include "store/redis/redis_client.h"

struct redisReader;

namespace sluice::internal {

// No reply sluice reads has more elements than this: a multi-limit reply has one per limit of a
// request, CLUSTER SLOTS one per slot range.
inline constexpr int kMaxReplyElements = 1 << 20;

// Makes `reader` (a connection's hiredis reader) refuse an array reply of more than
// kMaxReplyElements elements as an out-of-memory error, which fails the connection. hiredis 0.14
// allocates an array's element table as soon as it reads the count: "*1854775808" from whatever
// answers on Redis's port cost 14 GB of address space and seconds of CPU (found by
// tests/fuzz/fuzz_redis_reply.cc).
void BoundReplies(redisReader* reader);

// Lua numbers are doubles: a script's integers are exact only up to 2^53 in magnitude, so no
// script reply holds a larger one.
inline constexpr int64_t kLuaExact = int64_t{1} << 53;

// A limiter script's reply {allowed, remaining, reset_us, retry_us[, delay_us[, flags]]} into
// `d` (allowed, reason, remaining and the durations; d.limit is the caller's; flags are the
// caller's to read: the calendar script's zone mismatch). False, with `d` unchanged, unless the
// reply is an array of 4 to 6 integers, allowed and the mismatch are 0 or 1, and every number
// is within kLuaExact (so microseconds convert to nanoseconds without overflow).
bool ReadDecision(const RedisReply& reply, Decision& d);

// An integer a Lua script can have computed exactly (|n| <= 2^53).
bool IsScriptInteger(const RedisReply& r);

// "MOVED 3999 127.0.0.1:6381" / "ASK 3999 127.0.0.1:6381" (with `kind` "MOVED " or "ASK ") ->
// "127.0.0.1:6381".
bool ParseRedirect(std::string_view message, std::string_view kind, std::string& address);

// "host:port" (the last colon splits, so an IPv6 host keeps its colons), port 1..65535.
bool SplitAddress(std::string_view address, std::string& host, int& port);

}  // namespace sluice::internal

#endif  // SLUICE_STORE_REDIS_REDIS_REPLY_H_
