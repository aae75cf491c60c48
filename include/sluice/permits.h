// Concurrency permits: a limit on requests in flight at once rather than per time
// (docs/load-protection.md). A PermitPool is one concurrency limit over many keys, as a Limiter
// is one rate limit over many keys; Store::MakePermitPool makes one whose permits live in that
// store, so every node sharing the store shares the limit. A pool made under the id of one
// alive (LimiterOptions::id: a reload that changed the numbers) holds the permits of that one,
// as they are in the store, against its own max_in_flight.
//
//   auto pool = (*store)->MakePermitPool({.max_in_flight = 100, .ttl = Seconds(30)}, {.id = "x"});
//   (*pool)->AcquireAsync("x#tenant=acme", clock.Now(), {.permit = id}, [](const PermitAnswer& a) {
//     if (a.granted) ...  // hold the slot; ReleaseAsync(key, now, id, ...) when done
//   });
//
// The invariant every store keeps: at every instant of the store's clock (Redis TIME on the
// key's master; the node's clock for the memory store), the permits granted and neither released
// nor expired number at most max_in_flight. Every call is one atomic step on the key, and cleans
// the key's expired permits in that step. A permit is live while the store's clock is before its
// expiry (expires_us); at that instant it is expired.
//
// Lost writes are outside the invariant: a Redis restarted without persistence, a failover to a
// replica that lacked the latest writes, or a memory store restarted without its snapshot
// (memory_store.h) or after a crash (the permits granted since the last snapshot) forgets
// permits that are still held, and their holders go on. Real concurrency is then at most
// max_in_flight plus the permits lost, for at most ttl (when the last of them would have expired).
#ifndef SLUICE_PERMITS_H_
#define SLUICE_PERMITS_H_

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <string_view>

#include "sluice/decision.h"  // kNever
#include "sluice/time.h"

namespace sluice {

// The longest permit id a store keeps (an acquire, release or renew of a longer or empty one is
// answered `invalid`): room for 128 random bits and more in any printable encoding, while a
// flood of acquires cannot make a store hold long strings.
inline constexpr size_t kMaxPermitIdBytes = 64;

// The permit ttls every store keeps (MakePermitPool refuses others): Redis keeps expiries in
// microseconds and key TTLs in milliseconds; a year keeps every expiry far inside 64 bits.
inline constexpr Duration kMinPermitTtl = std::chrono::milliseconds(1);
inline constexpr Duration kMaxPermitTtl = std::chrono::hours(24 * 366);

struct PermitSpec {
  int64_t max_in_flight = 0;  // > 0 (and below 2^53, what Redis's Lua counts exactly)
  Duration ttl{0};  // how long a permit lives unless renewed: kMinPermitTtl..kMaxPermitTtl

  bool operator==(const PermitSpec&) const = default;
};

struct PermitAcquire {
  // The permit's id, chosen by the caller: unique (at least 128 random bits), so that nobody else
  // can release or renew it; 1 to kMaxPermitIdBytes bytes. The store keeps it as given. An
  // acquire of an id the key already holds takes no second slot: it is granted and renews it
  // (so a retried acquire whose answer was lost is harmless).
  std::string_view permit;
  // Slots that must stay free after this one is granted (priority shedding: a low-priority
  // request leaves room for more important ones); 0: it may take the last slot. Granted when the
  // live permits of the key number fewer than max_in_flight - reserve.
  int64_t reserve = 0;
};

// The answer to an acquire, a release or a renew.
struct PermitAnswer {
  // Acquire: the slot is held until expires_us (or a release). Release: the permit was held and
  // is now free. Renew: the permit was held and now lives until expires_us.
  bool granted = false;
  // The store could not be asked (down, timed out): nothing is known to have changed. An acquire
  // is then decided by the limit's failure mode, above the store.
  bool degraded = false;
  int64_t in_flight = 0;      // permits of the key held after the call
  int64_t store_time_us = 0;  // the store's clock when it decided (microseconds since the epoch)
  int64_t expires_us = 0;     // granted acquire or renew: the permit's expiry, store clock
  // Refused acquire: until the earliest held permit of the key expires (when `full`: the
  // earliest that frees memory; when no permit is held: ttl). kNever when no wait helps: the
  // reserve is max_in_flight or more, so no acquire of it can ever be granted.
  Duration retry_after{0};
  // Not granted because the store's memory bound leaves no room for another permit (the memory
  // store: it refuses rather than evict a key holding live permits). Not degraded: the store
  // answered, and nothing changed.
  bool full = false;
  // Not granted because the call was malformed: an empty permit id or one over
  // kMaxPermitIdBytes, or a key over the store's bound. Nothing changed.
  bool invalid = false;
};

// What a pool has seen, for /metrics.
struct PermitStats {
  // Permits this node knows to be held now (the memory store: all of them; a shared store: those
  // it granted and has not seen released or expired).
  int64_t in_flight = 0;
  // Permits that expired without a release (a holder that crashed or never released): worth an
  // alert.
  uint64_t expired = 0;
};

class PermitPool {
 public:
  virtual ~PermitPool() = default;

  // `done` gets the answer, possibly on another thread (a store's I/O thread) and possibly before
  // the call returns; it must not block. The pool must outlive every call in flight.
  using Callback = std::function<void(const PermitAnswer&)>;

  // Takes a slot of `key` for `request.permit` if fewer than max_in_flight - reserve are held
  // (after expired ones are dropped).
  virtual void AcquireAsync(std::string_view key, Timestamp now, const PermitAcquire& request,
                            Callback done) = 0;
  // Frees the slot `permit` holds. An unknown, expired or already released permit: not granted,
  // nothing changes.
  virtual void ReleaseAsync(std::string_view key, Timestamp now, std::string_view permit,
                            Callback done) = 0;
  // Extends a held permit to ttl from now (the store's clock). An unknown or expired one: not
  // granted; it is not taken again (an acquire does that, and may be refused).
  virtual void RenewAsync(std::string_view key, Timestamp now, std::string_view permit,
                          Callback done) = 0;

  virtual const PermitSpec& spec() const = 0;
  // As of `now` (the clock the calls get): a permit whose expiry has passed is no longer in
  // flight even when no call has touched its key since. The memory store also counts it expired
  // then, so a holder that crashed on a key nobody asks for again still shows in
  // sluice_permits_expired_total; a shared store counts it when its next call on the key drops
  // it (Redis: a lower bound, see redis_script_permits.h).
  virtual PermitStats Stats(Timestamp now) const = 0;
};

}  // namespace sluice

#endif  // SLUICE_PERMITS_H_
