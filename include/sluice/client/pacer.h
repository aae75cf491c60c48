// Self-pacing: a client-side limiter that learns a server's policy from what its answers say
// (RateLimit-Policy / RateLimit, or the legacy fields, read by server_hints.h) and spaces the
// client's requests so that a well-behaved client stays under the limit without taking 429s.
//
//   client::Pacer pacer;
//   for (each request) {
//     sleep_until(pacer.NextSendTime(clock.Now()));
//     pacer.OnSend(clock.Now());
//     auto response = send(...);
//     pacer.Observe(client::ReadServerHints(response.headers, clock.Now()), clock.Now());
//   }
//
// How: for each policy the server named, the latest answer says r units remain until the quota
// is replenished in t seconds; the pacer spreads those r over t (one request every t / r after
// the last one, or every w / q if that is sooner), counting its own sends against r until the
// next answer, and waits out t when r is 0. With only a policy (q per w) it sends one request every
// w / q. A Retry-After holds every send until it has passed. Before any answer, nothing is known
// and nothing is held. Thread-safe. Time is a parameter.
#ifndef SLUICE_CLIENT_PACER_H_
#define SLUICE_CLIENT_PACER_H_

#include <map>
#include <mutex>
#include <optional>
#include <string>

#include "sluice/client/server_hints.h"
#include "sluice/time.h"

namespace sluice::client {

class Pacer {
 public:
  // What an answer said, at `now` (when it arrived).
  void Observe(const ServerHints& hints, Timestamp now);
  // The earliest time the next request should go; <= now means now.
  Timestamp NextSendTime(Timestamp now);
  // A request went at `now`: it spends one unit of every policy.
  void OnSend(Timestamp now);

 private:
  struct Policy {
    std::optional<int64_t> quota;
    std::optional<Duration> window;
    std::optional<int64_t> remaining;   // as of the last answer, less the sends since
    std::optional<Timestamp> reset_at;  // when the server said the quota is full again
  };
  Timestamp PolicyNext(Policy& p, Timestamp now) const;

  std::mutex mu_;
  std::map<std::string, Policy> policies_;
  Timestamp hold_until_{};
  std::optional<Timestamp> last_send_;
};

}  // namespace sluice::client

#endif  // SLUICE_CLIENT_PACER_H_
