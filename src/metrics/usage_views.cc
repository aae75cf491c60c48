#include "metrics/usage_views.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <cmath>
#include <functional>
#include <limits>
#include <mutex>
#include <tuple>
#include <unordered_map>

#include "metrics/hyperloglog.h"
#include "metrics/label_table.h"

namespace sluice::server {
namespace {

enum State { kSeen, kNear, kOver, kShadowOver, kStateCount };

constexpr int64_t kNoEpoch = std::numeric_limits<int64_t>::min();
constexpr size_t kSlots = UsageViews::kSlotsPerStripe;
static_assert((kSlots & (kSlots - 1)) == 0, "slots per stripe: a power of two");
// Past this many entries a stripe halves its sample, so that probes stay short and an empty
// slot always ends them.
constexpr uint32_t kMaxEntries = kSlots * 3 / 4;

// The sample at `level` keeps the identities whose hash starts with `level` zero bits: every
// identity at 0, half at 1, ... The same identities in every bucket, so the buckets' samples
// combine.
bool Sampled(uint64_t hash, uint8_t level) { return level == 0 || (hash >> (64 - level)) == 0; }

// One stripe of a bucket's sampled peaks: an open-addressing table of (identity hash, peak).
// Writers hold `mu`; Record's fast path reads the slots without it to skip an identity whose
// peak is already as high (a torn read there can only cost a needless lock, or skip one
// update of a sketch). Report reads them without it too.
struct Stripe {
  std::mutex mu;
  std::atomic<uint8_t> level{0};
  uint32_t entries = 0;                              // guarded by mu
  std::array<std::atomic<uint64_t>, kSlots> keys{};  // 0: empty; a key is its hash | 1
  std::array<std::atomic<uint32_t>, kSlots> peaks{};

  static size_t Home(uint64_t hash) { return (hash >> 3) & (kSlots - 1); }  // low 3: stripe

  // The slot holding `key`, or the empty slot ending its probe. Needs entries < kSlots.
  size_t Probe(uint64_t key) const {
    size_t i = Home(key);
    for (;;) {
      const uint64_t k = keys[i].load(std::memory_order_acquire);
      if (k == 0 || k == key) return i;
      i = (i + 1) & (kSlots - 1);
    }
  }

  // Guarded by mu.
  void ClearSlots() {
    for (size_t i = 0; i < kSlots; ++i) {
      keys[i].store(0, std::memory_order_relaxed);
      peaks[i].store(0, std::memory_order_relaxed);
    }
    entries = 0;
  }

  // Guarded by mu: one level up, keeping only the entries still in the sample.
  void HalveSample() {
    const uint8_t next = level.load(std::memory_order_relaxed) + 1;
    std::array<std::pair<uint64_t, uint32_t>, kSlots> kept;
    size_t n = 0;
    for (size_t i = 0; i < kSlots; ++i) {
      const uint64_t k = keys[i].load(std::memory_order_relaxed);
      if (k != 0 && Sampled(k, next)) kept[n++] = {k, peaks[i].load(std::memory_order_relaxed)};
    }
    ClearSlots();
    level.store(next, std::memory_order_relaxed);
    for (size_t j = 0; j < n; ++j) Insert(kept[j].first, kept[j].second);
  }

  // Guarded by mu.
  void Insert(uint64_t key, uint32_t peak) {
    const size_t i = Probe(key);
    peaks[i].store(peak, std::memory_order_relaxed);
    keys[i].store(key, std::memory_order_release);
    ++entries;
  }

  void RecordPeak(uint64_t hash, uint32_t used) {
    if (!Sampled(hash, level.load(std::memory_order_relaxed))) return;
    const uint64_t key = hash | 1;
    {  // the fast path: most decisions do not raise their identity's peak
      size_t i = Home(key);
      for (size_t probes = 0; probes < kSlots; ++probes, i = (i + 1) & (kSlots - 1)) {
        const uint64_t k = keys[i].load(std::memory_order_acquire);
        if (k == 0) break;
        if (k == key) {
          if (peaks[i].load(std::memory_order_relaxed) >= used) return;
          break;
        }
      }
    }
    std::lock_guard lock(mu);
    if (!Sampled(hash, level.load(std::memory_order_relaxed))) return;
    size_t i = Probe(key);
    if (keys[i].load(std::memory_order_relaxed) == key) {
      if (peaks[i].load(std::memory_order_relaxed) < used) {
        peaks[i].store(used, std::memory_order_relaxed);
      }
      return;
    }
    while (entries >= kMaxEntries) {
      HalveSample();
      if (!Sampled(hash, level.load(std::memory_order_relaxed))) return;
    }
    Insert(key, used);
  }
};

struct Bucket {
  std::atomic<int64_t> epoch{kNoEpoch};  // which period/kBuckets slice of time it holds
  std::array<HyperLogLog, kStateCount> states;
  std::array<Stripe, UsageViews::kStripes> stripes;
};

}  // namespace

struct UsageViews::LimitViews {
  std::mutex rotate_mu;  // one bucket is cleared for a new slice at a time
  std::array<Bucket, kBuckets> buckets;
};

struct UsageViews::Impl {
  explicit Impl(size_t max_limits) : views(std::max<size_t>(max_limits, 1)) {}
  LabelTable<LimitViews> views;
};

size_t UsageViews::BytesPerLimit() {
  // The views, and the label table's entry around them (two names, a hash) and its slots.
  return sizeof(LabelTable<LimitViews>::Entry) + 128 + 2 * sizeof(void*);
}

UsageViews::UsageViews(const UsageOptions& options)
    : options_(options),
      max_limits_(options.max_bytes / BytesPerLimit()),
      impl_(std::make_unique<Impl>(max_limits_)) {}

UsageViews::~UsageViews() = default;

namespace {

int64_t BucketNanos(Duration period) {
  return std::max<int64_t>(1, period.count() / UsageViews::kBuckets);
}

int64_t EpochOf(Timestamp t, int64_t bucket_ns) {
  const int64_t ns = t.time_since_epoch().count();
  return ns >= 0 ? ns / bucket_ns : -((-ns + bucket_ns - 1) / bucket_ns);
}

Bucket& BucketOf(std::array<Bucket, UsageViews::kBuckets>& buckets, int64_t epoch) {
  const int64_t n = UsageViews::kBuckets;
  return buckets[static_cast<size_t>(((epoch % n) + n) % n)];
}

bool Live(const Bucket& b, int64_t now_epoch) {
  const int64_t e = b.epoch.load(std::memory_order_acquire);
  return e != kNoEpoch && e <= now_epoch && e > now_epoch - UsageViews::kBuckets;
}

uint64_t RoundedEstimate(const HyperLogLog::Registers& r) {
  return static_cast<uint64_t>(std::llround(HyperLogLog::Estimate(r)));
}

}  // namespace

void UsageViews::Record(std::string_view domain, std::string_view limit, std::string_view identity,
                        Timestamp now, int64_t capacity, int64_t used, UsageOutcome outcome) {
  LimitViews* v = impl_->views.Find(domain, limit);
  if (v == nullptr) v = impl_->views.FindOrInsert(domain, limit, max_limits_);
  if (v == nullptr) return;  // past the memory bound: Report says the limit is not tracked
  const int64_t epoch = EpochOf(now, BucketNanos(options_.period));
  Bucket& b = BucketOf(v->buckets, epoch);
  if (const int64_t held = b.epoch.load(std::memory_order_acquire); held != epoch) {
    if (held > epoch) return;  // a decision timed a whole period before the newest: stale
    std::lock_guard lock(v->rotate_mu);
    if (b.epoch.load(std::memory_order_relaxed) < epoch) {
      // A decision that read the old epoch just before this may still land in the cleared
      // bucket: one stale entry at a slice's edge, which a sketch can afford.
      for (auto& s : b.states) s.Clear();
      for (auto& s : b.stripes) {
        std::lock_guard stripe_lock(s.mu);
        s.ClearSlots();
        s.level.store(0, std::memory_order_relaxed);
      }
      b.epoch.store(epoch, std::memory_order_release);
    } else if (b.epoch.load(std::memory_order_relaxed) > epoch) {
      return;
    }
  }
  const uint64_t hash = MixHash(std::hash<std::string_view>{}(identity));
  b.states[kSeen].Add(hash);
  switch (outcome) {
    case UsageOutcome::kOver:
      b.states[kOver].Add(hash);
      break;
    case UsageOutcome::kShadowOver:
      b.states[kShadowOver].Add(hash);
      break;
    case UsageOutcome::kAllowed:
      if (capacity > 0 &&
          static_cast<double>(used) >= options_.near_limit_ratio * static_cast<double>(capacity)) {
        b.states[kNear].Add(hash);
      }
      break;
    case UsageOutcome::kUnknown:
      return;  // the store failed: no usage known
  }
  if (capacity <= 0) return;
  const auto peak =
      static_cast<uint32_t>(std::clamp<int64_t>(used, 0, std::numeric_limits<uint32_t>::max()));
  b.stripes[hash & (kStripes - 1)].RecordPeak(hash, peak);
}

Result<UsageReport> UsageViews::Report(std::string_view domain, std::string_view limit) const {
  UsageReport report;
  report.period = options_.period;
  LimitViews* v = impl_->views.Find(domain, limit);
  if (v == nullptr) {
    if (impl_->views.size() >= max_limits_) {
      return MakeError("limit '" + std::string(limit) +
                       "' is not tracked: the usage views' memory bound holds " +
                       std::to_string(max_limits_) + " limits");
    }
    return report;  // no decision yet
  }
  const int64_t now = EpochOf(options_.clock->Now(), BucketNanos(options_.period));
  HyperLogLog::Registers seen{};
  uint8_t level = 0;
  for (const Bucket& b : v->buckets) {
    if (!Live(b, now)) continue;
    b.states[kSeen].MergeInto(seen);
    for (const Stripe& s : b.stripes)
      level = std::max(level, s.level.load(std::memory_order_relaxed));
  }
  report.identities = RoundedEstimate(seen);
  // Each sampled identity's peak over the live buckets, at the sparsest bucket's sample rate
  // (then every bucket kept all of the sample's identities it saw).
  std::unordered_map<uint64_t, uint32_t> peaks;
  for (const Bucket& b : v->buckets) {
    if (!Live(b, now)) continue;
    for (const Stripe& s : b.stripes) {
      for (size_t i = 0; i < kSlots; ++i) {
        const uint64_t k = s.keys[i].load(std::memory_order_acquire);
        if (k == 0 || !Sampled(k, level)) continue;
        uint32_t& p = peaks[k];
        p = std::max(p, s.peaks[i].load(std::memory_order_relaxed));
      }
    }
  }
  std::vector<uint32_t> values;
  values.reserve(peaks.size());
  for (const auto& [k, p] : peaks) values.push_back(p);
  std::sort(values.begin(), values.end());
  report.sampled = values.size();
  if (!values.empty()) {
    // Nearest rank: the smallest value with at least q of the sample at or below it.
    const auto rank = [&](double q) {
      const auto r = static_cast<size_t>(std::ceil(q * static_cast<double>(values.size())));
      return static_cast<int64_t>(values[std::clamp<size_t>(r, 1, values.size()) - 1]);
    };
    report.peaks = {rank(0.50), rank(0.90), rank(0.95), rank(0.99), values.back()};
  }
  return report;
}

std::vector<IdentityCounts> UsageViews::Identities() const {
  std::vector<IdentityCounts> out;
  auto entries = impl_->views.Snapshot();
  std::sort(entries.begin(), entries.end(), [](const auto* a, const auto* b) {
    return std::tie(a->first, a->second) < std::tie(b->first, b->second);
  });
  const int64_t now = EpochOf(options_.clock->Now(), BucketNanos(options_.period));
  for (const auto* e : entries) {
    std::array<HyperLogLog::Registers, kStateCount> merged{};
    for (const Bucket& b : e->value.buckets) {
      if (!Live(b, now)) continue;
      for (int s = 0; s < kStateCount; ++s) b.states[s].MergeInto(merged[s]);
    }
    out.push_back({e->first, e->second, RoundedEstimate(merged[kSeen]),
                   RoundedEstimate(merged[kNear]), RoundedEstimate(merged[kOver]),
                   RoundedEstimate(merged[kShadowOver])});
  }
  return out;
}

}  // namespace sluice::server
