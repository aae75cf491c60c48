// Redis Sentinel: finding the master and following its failovers (docs/redis.md, "Sentinel").
//
// A SentinelWatch has one thread of its own. It asks the sentinels, in order and rotating past
// any that does not answer within the connect timeout, SENTINEL get-master-addr-by-name, then
// connects to the address named and trusts it only if ROLE says "master" (a sentinel may still
// name a demoted master, or one whose promotion has not finished). It keeps a connection to one
// sentinel subscribed to +switch-master and moves to the new master a message names (ROLE
// checked again). Asked to (Recheck: a connection failure, a READONLY reply), it asks the
// sentinels again, at most once per kRecheckGap while they keep answering and with a doubling
// backoff while they do not.
//
// The thread waits in poll() on the subscription and an eventfd: it costs nothing while nothing
// happens, and stops as soon as the watch is destroyed. A subscription (re)made means messages
// may have been missed, so the master is asked for again after each.
//
// rediss+sentinel://: every connection (questions, the subscription, the ROLE check) is a
// RedisConnection with the store's TLS context, the same as the master's pipelined ones. Each
// sentinel is verified against its own host as the address names it; the master against
// SentinelSettings::MasterAt's name (docs/security.md, "Redis Sentinel").
#ifndef SLUICE_STORE_REDIS_SENTINEL_H_
#define SLUICE_STORE_REDIS_SENTINEL_H_

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "sluice/status.h"
#include "store/redis/redis_client.h"
#include "store/redis/redis_connection.h"
#include "store/redis/redis_pipeline.h"
#include "store/redis/sentinel_reply.h"

namespace sluice::internal {

struct SentinelSettings {
  // Host, port and the sentinels' own password (user empty, db 0); connect_timeout bounds each
  // connection and each answer.
  std::vector<RedisEndpoint> sentinels;
  std::string master;  // the name the sentinels monitor
  // The master's credentials, database, timeouts and TLS (host and port are the sentinels' to
  // say; tls_name set: --redis-tls-server-name).
  RedisEndpoint master_template;

  // The master at `address`. Over TLS, one the sentinels name by IP is verified against the
  // configured server name, else the first sentinel host in the address that is a DNS name (a
  // certificate seldom lists every server's IP), else its IP; one named by a DNS name (sentinels
  // with resolve-hostnames) against the server name, else that name.
  RedisEndpoint MasterAt(const MasterAddress& address) const;
};

// What the watch found: a master that said ROLE master (`address`), or that there is none to
// trust right now (nullopt; `why` says why), or that the sentinels could not be asked or the
// master not reached (`unreachable`: the last master found may still be the right one).
struct SentinelFinding {
  std::optional<MasterAddress> address;
  bool unreachable = false;
  std::string why;
};

class SentinelWatch {
 public:
  static constexpr std::chrono::milliseconds kRecheckGap{50};
  static constexpr std::chrono::milliseconds kMaxBackoff{1000};

  // `found` runs on the watch's thread after every resolution, `tidy` every time the thread
  // wakes; neither may destroy the watch. Nothing runs before Start.
  SentinelWatch(SentinelSettings settings, std::function<void(const SentinelFinding&)> found,
                std::function<void()> tidy);
  ~SentinelWatch();
  SentinelWatch(const SentinelWatch&) = delete;
  SentinelWatch& operator=(const SentinelWatch&) = delete;

  // Starts the thread: it resolves the master at once, then watches.
  void Start();

  // Ask the sentinels again soon. Thread-safe, never blocks.
  void Recheck();

  // Stops the thread (at once: it only ever waits in poll() or for a bounded answer); Recheck
  // does nothing after. The destructor stops it too.
  void Stop();

  // The thread runs `tidy` by `at`, in addition to its own deadlines. Called from `found` or
  // `tidy`, or followed by Recheck (which wakes the thread).
  void WakeBy(std::chrono::steady_clock::time_point at);

  const SentinelSettings& settings() const { return settings_; }

 private:
  void Run();
  void Wake();
  SentinelFinding Resolve();
  SentinelFinding Verify(const MasterAddress& address);
  bool Subscribe();
  // Reads what the subscription has; false when it is gone. A switch of our master is acted on.
  bool ReadSubscription(bool& resolve);
  void DropSubscription();

  const SentinelSettings settings_;
  const std::function<void(const SentinelFinding&)> found_;
  const std::function<void()> tidy_;
  int wake_fd_ = -1;
  std::atomic<bool> recheck_{false};
  std::atomic<bool> stopping_{false};
  std::atomic<int64_t> wake_by_{0};  // steady_clock ticks; 0: none
  // Owned by the thread.
  std::unique_ptr<RedisConnection> sub_;
  size_t next_sentinel_ = 0;  // the one asked first next time: the last that answered
  std::thread thread_;
};

}  // namespace sluice::internal

#endif  // SLUICE_STORE_REDIS_SENTINEL_H_
