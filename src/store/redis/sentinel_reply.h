// Reading what Redis Sentinel answers, apart from the I/O: the master's address from SENTINEL
// get-master-addr-by-name, a +switch-master message, and a server's ROLE. Sentinels and masters
// are reached over the network, so every reader checks shape and ranges and refuses anything
// else (tests/fuzz/fuzz_sentinel_reply.cc feeds them arbitrary bytes through hiredis).
#ifndef SLUICE_STORE_REDIS_SENTINEL_REPLY_H_
#define SLUICE_STORE_REDIS_SENTINEL_REPLY_H_

#include <optional>
#include <string>
#include <string_view>

#include "sluice/status.h"
#include "store/redis/redis_client.h"

namespace sluice::internal {

// The channel sentinels announce a completed failover on.
inline constexpr std::string_view kSwitchMasterChannel = "+switch-master";

struct MasterAddress {
  std::string host;
  int port = 0;
  std::string Name() const { return host + ":" + std::to_string(port); }
  bool operator==(const MasterAddress&) const = default;
};

// A host as a sentinel names it: 1-255 bytes, printable ASCII without spaces (an IP address, or
// a host name with `resolve-hostnames yes`). A port: decimal digits, 1-65535.
std::optional<MasterAddress> ReadHostPort(std::string_view host, std::string_view port);

// SENTINEL get-master-addr-by-name's reply: an array of two strings {host, port}. A nil reply
// (the sentinel does not monitor that name) and anything else are errors naming what was wrong.
Result<MasterAddress> ReadMasterAddress(const RedisReply& reply, std::string_view master);

// A +switch-master payload, "<name> <old host> <old port> <new host> <new port>": the new
// address when it is about `master` and well formed; otherwise nothing.
std::optional<MasterAddress> ReadSwitchMaster(std::string_view payload, std::string_view master);

// A pub/sub push {"message", channel, payload}: the payload when it came on `channel`.
std::optional<std::string> ReadMessage(const RedisReply& reply, std::string_view channel);

// ROLE's reply: true only for an array whose first element is "master". A replica answers
// "slave", a sentinel "sentinel".
bool SaysMaster(const RedisReply& reply);

}  // namespace sluice::internal

#endif  // SLUICE_STORE_REDIS_SENTINEL_REPLY_H_
