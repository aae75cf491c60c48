#include "store/memory/permit_table.h"

#include <algorithm>
#include <bit>
#include <expected>
#include <random>

#include "store/memory/key_hash.h"

namespace sluice::internal {
namespace {

constexpr size_t kAllocHeader = 16;
constexpr size_t kTreeNodeHeader = 32;  // a red-black node's colour and three pointers

using KeyPermits = PermitTable::KeyPermits;
using Shard = PermitTable::Shard;
using KeyIt = PermitTable::KeyMap::iterator;
using IdIt = std::map<std::string, Timestamp, std::less<>>::iterator;

// Microseconds of the store's clock. An expiry is rounded up, so that one read from an answer
// is never before the permit really expires (the invariant is checked from answers' times).
int64_t FloorMicros(Timestamp t) {
  const int64_t ns = ToNanos(t);
  return ns >= 0 ? ns / 1000 : -((-ns + 999) / 1000);
}
int64_t CeilMicros(Timestamp t) { return -FloorMicros(FromNanos(-ToNanos(t))); }

// Calls read the clock before they take the shard's lock, so they can reach it out of order by
// as long as one waits between the two; a clock further behind than this was stepped back.
constexpr Duration kMaxCallReorder = std::chrono::seconds(1);

// The time a call on the shard is decided at, under its lock: `now` as the caller read it, or
// the shard's clock if a call that read a later time got the lock first. The answers' times then
// follow the order the shard decides in, which the invariant is stated in (a permit granted after
// a release is never reported as granted before it), and a permit still lives at least ttl from
// when its holder sent the call. A clock stepped back by more than kMaxCallReorder is followed:
// holding the shard's clock ahead would make every new permit outlive its ttl by the step.
Timestamp Advance(Shard& shard, Timestamp now) {
  if (now >= shard.clock || shard.clock - now > kMaxCallReorder) shard.clock = now;
  return shard.clock;
}

Timestamp Earliest(const KeyPermits& k) { return k.by_expiry.begin()->first; }

// Runs `change` on the key at `it` and keeps the shard's index of earliest expiries right; a key
// left without permits is dropped with its bytes.
template <typename F>
void Modify(Shard& shard, KeyIt it, F&& change) {
  KeyPermits& k = it->second;
  if (!k.by_expiry.empty()) shard.earliest.erase({Earliest(k), &it->first});
  change(k);
  if (!k.by_expiry.empty()) {
    shard.earliest.insert({Earliest(k), &it->first});
    return;
  }
  shard.bytes -= PermitTable::KeyBytes(it->first.size());
  shard.keys.erase(it);
}

void Erase(Shard& shard, KeyPermits& k, IdIt p) {
  k.by_expiry.erase({p->second, p->first});
  shard.bytes -= PermitTable::PermitBytes(p->first.size());
  --shard.in_flight;
  k.by_id.erase(p);
}

// Drops every permit of the shard expired at `now` (expiry <= now), earliest keys first.
void DropExpired(Shard& shard, Timestamp now) {
  while (!shard.earliest.empty() && shard.earliest.begin()->first <= now) {
    const KeyIt it = shard.keys.find(*shard.earliest.begin()->second);
    Modify(shard, it, [&](KeyPermits& k) {
      while (!k.by_expiry.empty() && Earliest(k) <= now) {
        Erase(shard, k, k.by_id.find(k.by_expiry.begin()->second));
        ++shard.expired;
      }
    });
  }
}

void SetExpiry(KeyPermits& k, IdIt p, Timestamp expiry) {
  k.by_expiry.erase({p->second, p->first});
  p->second = expiry;
  k.by_expiry.insert({expiry, p->first});
}

PermitAnswer Answer(bool granted, Timestamp now, int64_t in_flight) {
  PermitAnswer a;
  a.granted = granted;
  a.in_flight = in_flight;
  a.store_time_us = FloorMicros(now);
  return a;
}

PermitAnswer InvalidAnswer(Timestamp now) {
  PermitAnswer a = Answer(false, now, 0);
  a.invalid = true;
  return a;
}

// Moves a held permit's expiry to now + ttl: the answer to its renewal, and to an acquire of an
// id the key already holds.
PermitAnswer Extend(Shard& shard, KeyIt it, IdIt p, Timestamp now, Duration ttl) {
  const Timestamp expiry = now + ttl;
  const int64_t held = static_cast<int64_t>(it->second.by_id.size());
  Modify(shard, it, [&](KeyPermits& k) { SetExpiry(k, p, expiry); });
  PermitAnswer a = Answer(true, now, held);
  a.expires_us = CeilMicros(expiry);
  return a;
}

// `permit` held on `key`, or the answer to a release or renew of a permit the key does not hold:
// not granted, with what the key holds.
struct HeldPermit {
  KeyIt key;
  IdIt id;
};
std::expected<HeldPermit, PermitAnswer> FindHeld(Shard& shard, std::string_view key,
                                                 std::string_view permit, Timestamp now) {
  const KeyIt it = shard.keys.find(key);
  if (it == shard.keys.end()) return std::unexpected(Answer(false, now, 0));
  const IdIt p = it->second.by_id.find(permit);
  if (p == it->second.by_id.end()) {
    return std::unexpected(Answer(false, now, static_cast<int64_t>(it->second.by_id.size())));
  }
  return HeldPermit{it, p};
}

// Holds `permit` of `key` (not held there yet; `it` is the key's entry or keys.end()) until
// `expiry`.
void Hold(Shard& shard, KeyIt it, std::string_view key, std::string_view permit, Timestamp expiry) {
  if (it == shard.keys.end()) {
    it = shard.keys.try_emplace(std::string(key)).first;
    shard.bytes += PermitTable::KeyBytes(key.size());
  }
  Modify(shard, it, [&](KeyPermits& k) {
    const auto p = k.by_id.try_emplace(std::string(permit), expiry).first;
    k.by_expiry.insert({expiry, p->first});
  });
  shard.bytes += PermitTable::PermitBytes(permit.size());
  ++shard.in_flight;
}

// Whether the key at `it` (keys.end(): a key without permits) holds `permit`.
bool Holds(KeyIt it, const Shard& shard, std::string_view permit) {
  return it != shard.keys.end() && it->second.by_id.contains(permit);
}

int64_t Held(const Shard& shard, std::string_view key) {
  const auto it = shard.keys.find(key);
  return it == shard.keys.end() ? 0 : static_cast<int64_t>(it->second.by_id.size());
}

}  // namespace

size_t PermitTable::KeyBytes(size_t key_size) {
  return (key_size + 1 + kAllocHeader) +  // the key's characters
         (sizeof(void*) + sizeof(std::pair<const std::string, KeyPermits>) + sizeof(size_t) +
          kAllocHeader) +     // its hash node
         2 * sizeof(void*) +  // its bucket: the array grows to twice the keys before a rehash
         (kTreeNodeHeader + sizeof(std::pair<Timestamp, const std::string*>) + kAllocHeader);
}

size_t PermitTable::PermitBytes(size_t id_size) {
  return (id_size + 1 + kAllocHeader) +
         (kTreeNodeHeader + sizeof(std::pair<const std::string, Timestamp>) + kAllocHeader) +
         (kTreeNodeHeader + sizeof(std::pair<Timestamp, std::string_view>) + kAllocHeader);
}

Result<std::unique_ptr<PermitTable>> PermitTable::Make(const PermitSpec& spec, size_t max_bytes,
                                                       size_t shards, size_t max_key_bytes,
                                                       uint64_t seed) {
  if (spec.max_in_flight <= 0) return MakeError("a concurrency limit's max_in_flight must be > 0");
  if (spec.ttl < kMinPermitTtl || spec.ttl > kMaxPermitTtl) {
    return MakeError("a concurrency limit's permit_ttl must be between 1ms and 366 days");
  }
  // One key at max_in_flight must fit a shard, or the limit could not be reached.
  const size_t one_key = KeyBytes(max_key_bytes) +
                         static_cast<size_t>(spec.max_in_flight) * PermitBytes(kMaxPermitIdBytes);
  const size_t fixed = sizeof(PermitTable) + kAllocHeader;
  shards = std::bit_ceil(std::max<size_t>(shards, 1));
  const auto fits = [&](size_t n) {
    return max_bytes > fixed + n * (sizeof(Shard) + kAllocHeader) &&
           (max_bytes - fixed - n * (sizeof(Shard) + kAllocHeader)) / n >= one_key;
  };
  while (shards > 1 && !fits(shards)) shards /= 2;
  if (!fits(shards)) {
    return MakeError("the memory store's bound leaves " + std::to_string(max_bytes) +
                     " bytes for a concurrency limit of " + std::to_string(spec.max_in_flight) +
                     " permits, which needs at least " + std::to_string(fixed + one_key) +
                     " (raise the memory bound, e.g. --memory-max-bytes, or use fewer limits)");
  }
  const size_t budget = (max_bytes - fixed - shards * (sizeof(Shard) + kAllocHeader)) / shards;
  if (seed == 0) {
    std::random_device rd;
    seed = (uint64_t{rd()} << 32) ^ rd() ^ 1;
  }
  return std::unique_ptr<PermitTable>(
      new PermitTable(spec, max_bytes, shards, max_key_bytes, seed, budget));
}

PermitTable::PermitTable(const PermitSpec& spec, size_t max_bytes, size_t shards,
                         size_t max_key_bytes, uint64_t seed, size_t budget)
    : spec_(spec),
      max_bytes_(max_bytes),
      max_key_bytes_(max_key_bytes),
      seed_(seed),
      shard_mask_(shards - 1),
      shards_(std::make_unique<Shard[]>(shards)) {
  for (size_t i = 0; i < shards; ++i) shards_[i].budget = budget;
}

bool PermitTable::Valid(std::string_view key, std::string_view permit) const {
  return !permit.empty() && permit.size() <= kMaxPermitIdBytes && key.size() <= max_key_bytes_;
}

PermitTable::Shard& PermitTable::ShardFor(std::string_view key) const {
  return shards_[(HashKey(key, seed_) >> 32) & shard_mask_];
}

template <typename Decide>
PermitAnswer PermitTable::OnShard(std::string_view key, std::string_view permit, Timestamp now,
                                  const Decide& decide) {
  if (!Valid(key, permit)) return InvalidAnswer(now);
  Shard& shard = ShardFor(key);
  std::unique_lock<std::mutex> lock(shard.mu);
  if (PermitTable* next = successor_.get(); next != nullptr) {
    lock.unlock();
    return next->OnShard(key, permit, now, decide);
  }
  now = Advance(shard, now);
  DropExpired(shard, now);
  return decide(*this, shard, now);
}

PermitAnswer PermitTable::Acquire(std::string_view key, Timestamp now,
                                  const PermitAcquire& request) {
  return OnShard(key, request.permit, now, [&](PermitTable& t, Shard& shard, Timestamp at) {
    return t.AcquireIn(shard, key, at, request);
  });
}

PermitAnswer PermitTable::Release(std::string_view key, Timestamp now, std::string_view permit) {
  return OnShard(key, permit, now, [&](PermitTable&, Shard& shard, Timestamp at) {
    const auto held = FindHeld(shard, key, permit, at);
    if (!held) return held.error();
    Modify(shard, held->key, [&](KeyPermits& k) { Erase(shard, k, held->id); });
    return Answer(true, at, Held(shard, key));
  });
}

PermitAnswer PermitTable::Renew(std::string_view key, Timestamp now, std::string_view permit) {
  return OnShard(key, permit, now, [&](PermitTable& t, Shard& shard, Timestamp at) {
    const auto held = FindHeld(shard, key, permit, at);
    if (!held) return held.error();
    return Extend(shard, held->key, held->id, at, t.spec_.ttl);
  });
}

PermitAnswer PermitTable::AcquireIn(Shard& shard, std::string_view key, Timestamp now,
                                    const PermitAcquire& request) {
  auto it = shard.keys.find(key);
  if (it != shard.keys.end()) {
    if (auto p = it->second.by_id.find(request.permit); p != it->second.by_id.end()) {
      return Extend(shard, it, p, now, spec_.ttl);
    }
  }
  const int64_t held = it == shard.keys.end() ? 0 : static_cast<int64_t>(it->second.by_id.size());
  const int64_t room = spec_.max_in_flight - std::max<int64_t>(request.reserve, 0);
  const size_t need =
      PermitBytes(request.permit.size()) + (it == shard.keys.end() ? KeyBytes(key.size()) : 0);
  if (held >= room || shard.bytes + need > shard.budget) {
    PermitAnswer a = Answer(false, now, held);
    a.full = held < room;
    // Over the limit: until the key's earliest permit expires; full: until the shard's does;
    // a reserve of every slot: never.
    const bool any = a.full ? !shard.earliest.empty() : held > 0;
    a.retry_after = room <= 0 ? kNever
                    : !any    ? spec_.ttl
                    : a.full  ? shard.earliest.begin()->first - now
                              : Earliest(it->second) - now;
    return a;
  }
  const Timestamp expiry = now + spec_.ttl;
  Hold(shard, it, key, request.permit, expiry);
  PermitAnswer a = Answer(true, now, held + 1);
  a.expires_us = CeilMicros(expiry);
  return a;
}

uint64_t PermitTable::ForEachLivePermit(Timestamp now, const PermitVisitor& f) const {
  struct Live {
    std::string key;
    std::string permit;
    Timestamp expiry;
  };
  std::vector<Live> live;
  uint64_t count = 0;
  for (size_t i = 0; i <= shard_mask_; ++i) {
    live.clear();
    {
      std::lock_guard<std::mutex> lock(shards_[i].mu);
      for (const auto& [key, k] : shards_[i].keys) {
        for (const auto& [id, expiry] : k.by_id) {
          if (expiry > now) live.push_back({key, id, expiry});
        }
      }
    }
    for (const Live& p : live) f(p.key, p.permit, p.expiry);
    count += live.size();
  }
  return count;
}

bool PermitTable::RestorePermit(std::string_view key, std::string_view permit, Timestamp expiry,
                                Timestamp now) {
  if (!Valid(key, permit) || expiry <= now) return false;
  Shard& shard = ShardFor(key);
  std::lock_guard<std::mutex> lock(shard.mu);
  const KeyIt it = shard.keys.find(key);
  if (Holds(it, shard, permit)) return false;
  const size_t need =
      PermitBytes(permit.size()) + (it == shard.keys.end() ? KeyBytes(key.size()) : 0);
  if (shard.bytes + need > shard.budget) return false;
  Hold(shard, it, key, permit, expiry);
  return true;
}

void TakePermitsOf(const std::shared_ptr<PermitTable>& table, PermitTable& old) {
  // Every shard of `old` locked at once: no call on it sees a part moved and a part not.
  std::vector<std::unique_lock<std::mutex>> locks;
  for (size_t i = 0; i <= old.shard_mask_; ++i) locks.emplace_back(old.shards_[i].mu);
  uint64_t expired = 0;
  for (size_t i = 0; i <= old.shard_mask_; ++i) {
    Shard& from = old.shards_[i];
    expired += from.expired;
    for (const auto& [key, k] : from.keys) {
      Shard& to = table->ShardFor(key);
      std::lock_guard<std::mutex> lock(to.mu);
      for (const auto& [id, expiry] : k.by_id) {
        const KeyIt it = to.keys.find(key);
        if (!Holds(it, to, id)) Hold(to, it, key, id, expiry);
      }
    }
    from.earliest.clear();
    from.keys.clear();
    from.bytes = 0;
    from.in_flight = 0;
  }
  {
    std::lock_guard<std::mutex> lock(table->shards_[0].mu);
    table->shards_[0].expired += expired;
  }
  old.successor_ = table;
}

PermitStats PermitTable::Stats(Timestamp now) const {
  PermitStats s;
  for (size_t i = 0; i <= shard_mask_; ++i) {
    std::lock_guard<std::mutex> lock(shards_[i].mu);
    // What the shard's next call would drop first: its cost is the permits' own, paid once.
    DropExpired(shards_[i], Advance(shards_[i], now));
    s.in_flight += shards_[i].in_flight;
    s.expired += shards_[i].expired;
  }
  return s;
}

void PermitTable::AddStats(StoreStats& s) const {
  size_t bytes = max_bytes_;
  for (size_t i = 0; i <= shard_mask_; ++i) {
    std::lock_guard<std::mutex> lock(shards_[i].mu);
    s.keys += shards_[i].keys.size();
    bytes -= shards_[i].budget - shards_[i].bytes;
  }
  s.bytes += bytes;
  s.max_bytes += max_bytes_;
}

void LivePermitTables::Add(std::string_view id, const std::shared_ptr<PermitTable>& table) {
  std::lock_guard<std::mutex> lock(mu_);
  for (auto it = tables_.rbegin(); it != tables_.rend() && !id.empty(); ++it) {
    if (it->first == id) {
      TakePermitsOf(table, *it->second);
      break;
    }
  }
  tables_.emplace_back(std::string(id), table.get());
}

void LivePermitTables::Remove(const PermitTable* table) {
  std::lock_guard<std::mutex> lock(mu_);
  std::erase_if(tables_, [&](const auto& listed) { return listed.second == table; });
}

void LivePermitTables::AddStats(StoreStats& s) const {
  std::lock_guard<std::mutex> lock(mu_);
  for (const auto& [id, table] : tables_) table->AddStats(s);
}

void LivePermitTables::ForEach(
    const std::function<void(const std::string& id, const PermitTable&)>& f) const {
  std::lock_guard<std::mutex> lock(mu_);
  for (const auto& [id, table] : tables_) f(id, *table);
}

namespace {

class MemoryPermitPool final : public PermitPool {
 public:
  MemoryPermitPool(std::shared_ptr<PermitTable> table, std::shared_ptr<LivePermitTables> live)
      : table_(std::move(table)), live_(std::move(live)) {}
  ~MemoryPermitPool() override {
    if (live_ != nullptr) live_->Remove(table_.get());
  }
  MemoryPermitPool(const MemoryPermitPool&) = delete;
  MemoryPermitPool& operator=(const MemoryPermitPool&) = delete;

  void AcquireAsync(std::string_view key, Timestamp now, const PermitAcquire& request,
                    Callback done) override {
    done(table_->Acquire(key, now, request));
  }
  void ReleaseAsync(std::string_view key, Timestamp now, std::string_view permit,
                    Callback done) override {
    done(table_->Release(key, now, permit));
  }
  void RenewAsync(std::string_view key, Timestamp now, std::string_view permit,
                  Callback done) override {
    done(table_->Renew(key, now, permit));
  }
  const PermitSpec& spec() const override { return table_->spec(); }
  PermitStats Stats(Timestamp now) const override { return table_->Stats(now); }

 private:
  // Shared with the table that replaces it (TakePermitsOf), which this one hands calls on to.
  const std::shared_ptr<PermitTable> table_;
  const std::shared_ptr<LivePermitTables> live_;
};

}  // namespace

Result<std::unique_ptr<PermitPool>> MakeMemoryPermitPool(
    const PermitSpec& spec, size_t max_bytes, size_t shards, size_t max_key_bytes,
    std::string_view id, std::shared_ptr<LivePermitTables> live,
    const std::function<void(PermitTable&)>& restore) {
  auto made = PermitTable::Make(spec, max_bytes, shards, max_key_bytes, /*seed=*/0);
  if (!made) return std::unexpected(made.error());
  std::shared_ptr<PermitTable> table = std::move(*made);
  if (restore) restore(*table);
  if (live != nullptr) live->Add(id, table);
  return std::unique_ptr<PermitPool>(
      std::make_unique<MemoryPermitPool>(std::move(table), std::move(live)));
}

}  // namespace sluice::internal
