// Limiter: one configured limit applied to many keys (one counter per key), backed by a store.
// This is the interface the CLI and the server program against; the memory store implements it
// and so do the remote stores.
//
//   auto limiter = MakeMemoryLimiter(spec);   // memory_store.h
//   Decision d = (*limiter)->Decide("api_key=k1", clock.Now(), /*cost=*/1);
//
// Implementations are thread-safe.
#ifndef SLUICE_LIMITER_H_
#define SLUICE_LIMITER_H_

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <span>
#include <string_view>

#include "sluice/adjustment.h"
#include "sluice/decision.h"
#include "sluice/limit_spec.h"
#include "sluice/stats_sink.h"
#include "sluice/status.h"
#include "sluice/time.h"

namespace sluice {

struct CalendarZone;  // calendar_window.h

struct StoreStats {
  uint64_t keys = 0;         // counters currently held
  uint64_t bytes = 0;        // accounted memory: entries, index, long keys, logs
  uint64_t max_bytes = 0;    // the configured bound
  uint64_t evictions = 0;    // live counters dropped to stay within max_bytes (LRU)
  uint64_t expirations = 0;  // replenished counters dropped (no effect on decisions)
  // Of the expirations, those dropped to make room within max_bytes (the evictions that changed
  // no decision: /metrics' sluice_store_evictions_total{reason="replenished"}).
  uint64_t evicted_replenished = 0;
  uint64_t store_errors = 0;     // remote stores: calls that failed (timeouts included)
  uint64_t short_circuited = 0;  // remote stores: calls refused at once by the open breaker
  // Remote stores whose server may evict keys on its own (Redis with maxmemory): whether the
  // store watches it, whether its eviction policy can drop counters (then limits over-admit),
  // and how many keys the server evicted while watched (every key of the server, not only
  // counters: Redis does not say which).
  bool server_eviction_watched = false;
  bool server_eviction_unsafe = false;
  uint64_t server_evicted_keys = 0;
  // A store with an over-limit cache in front (over_limit_cache.h): decisions it answered from
  // memory, and decisions it passed to the store behind it. bytes, max_bytes and evictions are
  // then the cache's.
  bool over_limit_cache = false;
  uint64_t cached_decisions = 0;
  uint64_t forwarded_decisions = 0;
  // Leased limits (leased_store.h): decisions answered from the units a node held (or refused
  // there until the shared quota's retry time), leases that granted units, leases that expired
  // with units unspent, give-backs of unspent units, and the units held now.
  uint64_t leased_decisions = 0;
  uint64_t leases_taken = 0;
  uint64_t leases_expired = 0;
  uint64_t lease_returns = 0;
  int64_t lease_units_held = 0;
  // A store with a batched layer (batched_store.h): decisions taken from this node's local
  // views without asking the store behind it; hits taken here and not yet sent to it; and hits
  // this node admitted that its syncs found beyond the shared limit (its over-admission, where
  // the shared store's answer shows it: the bucket algorithms). keys and bytes include the views.
  bool batched = false;
  uint64_t local_decisions = 0;
  uint64_t batched_pending_hits = 0;
  uint64_t batched_over_admitted_hits = 0;
};

struct DecideRequest {
  std::string_view key;
  Timestamp now;
  int64_t cost = 1;
};

class Limiter;
class Store;

// A lease (LimiterOptions::sync leased; docs/redis.md, "Leased"): units of a key's quota taken
// ahead of use by one node, which then admits up to that many requests without asking the store.
struct LeaseRequest {
  int64_t cost = 0;  // the request's own cost, decided as Decide decides it (0: no request)
  int64_t want = 0;  // if it is allowed: units to take beyond it, as many of these as are free
  std::string_view holder;  // the node taking them, to count the nodes drawing on the key
  Duration ttl{0};          // how long the node means to hold them
};

struct LeaseGrant {
  Decision decision;     // Decide(cost)'s, with `remaining` after the units were taken
  int64_t units = 0;     // taken beyond the cost: the caller holds them now
  int64_t holders = 0;   // nodes that took units of the key within their ttl; 0: not counted
  int64_t stamp_us = 0;  // when, in the store's clock (microseconds): GiveBack takes it
};

// One of several limits one request is checked against (Store::DecideAll, and DecideAll in
// decide_all.h for limiters of any store).
struct LimitCheck {
  Limiter* limiter = nullptr;
  std::string_view key;
  int64_t cost = 1;
  // Charged (Limiter::Charge) rather than decided: taken even beyond the limit, and never given
  // back when another check refuses the request. Its verdict still counts: a charge that did
  // not fit makes the request refused, and the others' admissions are given back.
  bool charge = false;
  // One of the request's quota checks (envoyproxy/ratelimit's quota_mode): its refusal alone
  // does not refuse the request, which is refused when every one of its quota checks is (or any
  // other check is). RequestRefused (decide_all.h) states the rule.
  bool quota = false;
  // Priority shedding (docs/load-protection.md): hits that must still be free after this check
  // is admitted, so that a less important request leaves room for more important ones. 0: it may
  // take the last hit. A store that admits it takes `cost` only when cost + reserve would have
  // fitted, in the same atomic step as the decision; refused for the reserve alone, the decision
  // is kOverLimit with the time at which cost + reserve fits (kNever if it never can).
  int64_t reserve = 0;
  // A calendar limit's zone for this request (a rule's timezone_from, or the identity's zone in
  // its plan file; docs/quotas.md, "A zone per customer"); null: the spec's own. Must outlive
  // the call. Other limits ignore it.
  const CalendarZone* zone = nullptr;
};

class Limiter {
 public:
  virtual ~Limiter() = default;

  // Decides for `key` at `now`; cost is the request's weight (hits). cost 0 asks without
  // consuming. A negative cost or an over-long key yields kInvalidRequest and changes nothing.
  virtual Decision Decide(std::string_view key, Timestamp now, int64_t cost) = 0;

  // Charges `cost` for work already done -- hits known only after the request was served (an
  // LLM's tokens, Envoy's hits sent when a stream ends), or counted even when refused (Envoy's
  // ratelimit service counts every hit). The verdict is Decide's: allowed iff the cost fitted.
  // But the cost is taken either way: beyond the limit the key goes into debt, repaid by refill
  // or the next window, and while it is in debt even a cost-0 Decide is over the limit. A key
  // holds at most twice its capacity (one capacity of debt); what does not fit is dropped. The
  // decision reports the state after the charge; retry_after is when a request of the same cost
  // could pass (kNever above the capacity, with kCostExceedsCapacity). Never refund a charge.
  // docs/algorithms.md, "Charges and debt". A store that cannot be asked: degraded, nothing
  // charged. Negative costs and over-long keys: kInvalidRequest, as Decide.
  virtual Decision Charge(std::string_view key, Timestamp now, int64_t cost) = 0;

  // Decide, or with `charge` Charge, a calendar limit in `zone` instead of its spec's zone
  // (LimitCheck::zone): a window it opens is that zone's; an open window opened in another zone
  // still decides. Other limits, and this default, ignore the zone.
  virtual Decision DecideInZone(std::string_view key, Timestamp now, int64_t cost, bool charge,
                                const CalendarZone& zone) {
    (void)zone;
    return charge ? Charge(key, now, cost) : Decide(key, now, cost);
  }

  using DecisionCallback = std::function<void(const Decision&)>;

  // Charge without waiting, as DecideAsync is to Decide.
  virtual void ChargeAsync(std::string_view key, Timestamp now, int64_t cost,
                           DecisionCallback done) {
    done(Charge(key, now, cost));
  }

  // Decide without waiting on a remote store: `done` gets the decision, possibly on another
  // thread (a store's I/O thread) and possibly before DecideAsync returns. `done` must not
  // block (it may call DecideAsync again). The limiter must outlive every call in flight.
  // Stores that decide in memory answer at once; the Redis store pipelines the call and
  // answers from its connection's thread, so one thread can keep many decisions in flight.
  virtual void DecideAsync(std::string_view key, Timestamp now, int64_t cost,
                           DecisionCallback done) {
    done(Decide(key, now, cost));
  }

  // Decides requests[i] into out[i] (out.size() >= requests.size()), in order: exactly what
  // calling Decide for each would return, also when keys repeat. Stores override it to overlap
  // the memory or network latency of the batch (the memory store does).
  virtual void DecideBatch(std::span<const DecideRequest> requests, std::span<Decision> out) {
    for (size_t i = 0; i < requests.size(); ++i) {
      out[i] = Decide(requests[i].key, requests[i].now, requests[i].cost);
    }
  }

  // Gives back `cost` that an allowed Decide(key, at, cost) took -- because another limit the
  // same request was checked against said no (DecideAll), or the request was not served. `now`
  // is the current time. What "give back" means per algorithm:
  //   token bucket, GCRA, leaky bucket: brought up to date at `now`, then `cost` is returned to
  //     the bucket (never above full / below empty);
  //   fixed window: subtracted from the window `at` fell in, if that is still the key's window;
  //   sliding window counter: subtracted from the current window's count if `at` is in it, from
  //     the previous one's if `at` is in that, else nothing (it no longer counts);
  //   sliding window log: the request's hits are removed if still in the window.
  // Refunding at `now` == `at`, with nothing decided for the key in between, leaves the key as
  // if the request had never come (bounds with requests in between: docs/algorithms.md,
  // "Refunds"). A key the store no longer holds is already replenished: nothing to do. Refund
  // only what was admitted and only once (a degraded decision took nothing): a refund for
  // anything else gives away quota. cost <= 0, cost > capacity (never admitted) and over-long
  // keys are ignored. Thread-safe like Decide; no result: a failed refund (remote stores) only
  // leaves the quota taken, the conservative side.
  virtual void Refund(std::string_view key, Timestamp at, Timestamp now, int64_t cost) = 0;

  // Refund without waiting: for callers on a remote store's I/O thread (a DecideAllAsync
  // callback), where waiting for the store would wait for that very thread. The limiter may be
  // destroyed before it completes. Stores that decide in memory refund at once.
  virtual void RefundAsync(std::string_view key, Timestamp at, Timestamp now, int64_t cost) {
    Refund(key, at, now, cost);
  }

  using GivenBackCallback = std::function<void(bool given_back)>;

  // RefundAsync, and `done` once the refund counts -- true -- or has failed -- false: the quota
  // stays taken -- so that what the caller sends for the key after `done` comes after it. For a
  // layer that must not answer a refused request, or ask the store about the key again, before
  // its give-backs count (the leased store). Never waits; `done` may run on the store's I/O
  // thread. Default: RefundAsync, then done(true) -- right for stores that refund at once; a
  // remote store overrides it.
  virtual void RefundThen(std::string_view key, Timestamp at, Timestamp now, int64_t cost,
                          GivenBackCallback done) {
    RefundAsync(key, at, now, cost);
    done(true);
  }

  using LeaseCallback = std::function<void(const LeaseGrant&)>;

  // Decides request.cost like DecideAsync and, when that is allowed, takes up to request.want
  // units more, as many as the key has free, for the caller to admit with later (a lease). The
  // units are taken as an admission of that cost would take them, so a holder that admits at
  // most its units never admits beyond the limit. Stores that can (Redis) do both in one atomic
  // step and count the holders; this default takes the units with a second Decide, which is as
  // safe (each step is atomic) and may grant fewer units under contention.
  virtual void TakeAsync(std::string_view key, Timestamp now, const LeaseRequest& request,
                         LeaseCallback done) {
    LeaseGrant grant;
    grant.decision = Decide(key, now, request.cost);
    grant.stamp_us = ToNanos(now) / 1000;
    if (grant.decision.allowed && !grant.decision.degraded && request.want > 0) {
      const int64_t units = std::min(request.want, grant.decision.remaining);
      if (units > 0) {
        const Decision more = Decide(key, now, units);
        if (more.allowed && !more.degraded) {
          grant.units = units;
          grant.decision.remaining = more.remaining;
          grant.decision.reset_after = more.reset_after;
        }
      }
    }
    done(grant);
  }

  // Gives back `units` a TakeAsync stamped `stamp_us` granted and the holder did not spend: the
  // give-back of an admission at that time (Refund). A fixed window's units are given back only
  // into the window they were taken from.
  virtual void GiveBack(std::string_view key, int64_t stamp_us, Timestamp now, int64_t units) {
    Refund(key, FromNanos(stamp_us * 1000), now, units);
  }

  // GiveBack, and `done` once the units count again (true) or the give-back failed (false), as
  // RefundThen is to RefundAsync. Default: GiveBack, then done(true).
  virtual void GiveBackThen(std::string_view key, int64_t stamp_us, Timestamp now, int64_t units,
                            GivenBackCallback done) {
    GiveBack(key, stamp_us, now, units);
    done(true);
  }

  // Forgets the key's counter (an administrative reset): its next request sees a fresh key.
  virtual void Reset(std::string_view key) = 0;

  // Credits, debits or sets the key's counter (Adjustment) in one atomic step, answering it as
  // read before and after. What a credit means per algorithm: token bucket and GCRA, tokens
  // given back (a debt repaid first); leaky bucket, hits drained from the queue; fixed window
  // and sliding window counter, hits subtracted from the current window (the counter's then
  // from the previous one); the sliding window log cannot be credited (it would have to forget
  // logged requests: reset it instead). A debit is a Charge of the amount on every algorithm.
  // An error: the adjustment does not apply to this limit (a log credit, allow_over_limit off a
  // fixed window, an amount out of range) or the store could not be asked; nothing changed.
  // Default: refused, for a store that cannot do it atomically.
  virtual Result<Adjusted> Adjust(std::string_view key, Timestamp now, const Adjustment& change) {
    (void)key;
    (void)now;
    (void)change;
    return MakeError("this store cannot adjust a counter");
  }

  // Takes over the counters of `old`, the limiter this one replaces for the same limit under an
  // earlier spec (a reload that changed the limit), their usage converted to this limiter's
  // spec as of `now` (docs/quotas.md, "Changing a limit mid-period"). Call it before this
  // limiter decides anything; `old` may still be deciding meanwhile. A store that keeps each
  // counter under the limit's id with the spec it was written under (Redis) converts a counter
  // when it is next used instead: nothing to do here (the default). A limiter of another store,
  // or of another algorithm or window length, leaves this one empty.
  virtual void TakeOver(Limiter& old, Timestamp now) {
    (void)old;
    (void)now;
  }

  virtual StoreStats Stats() const = 0;
  virtual const LimitSpec& spec() const = 0;

  // Reports this limit's own series to `sink`, labelled with `limit_labels` (how the caller
  // names the limit: its domain and limit), for /metrics. Each store layer reports what it keeps
  // for the limit after what the layers it wraps report. Default: nothing.
  virtual void ReportStats(StatsSink& sink, std::span<const StatLabel> limit_labels) const {
    (void)sink;
    (void)limit_labels;
  }

  // The store that made this limiter (Store::MakeLimiter), which alone may decide it in
  // Store::DecideAll; null for a limiter made outside any store. Stores tell their own limiters
  // by this identity, never by their type.
  const Store* owner() const { return owner_; }

 protected:
  Limiter() = default;
  explicit Limiter(const Store* owner) : owner_(owner) {}

 private:
  const Store* owner_ = nullptr;
};

}  // namespace sluice

#endif  // SLUICE_LIMITER_H_
