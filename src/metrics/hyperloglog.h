// A HyperLogLog cardinality sketch whose registers are atomics, so that every thread can add to
// it at once without a lock: an add is one relaxed load, and a compare-and-swap only when the
// register grows (rarely, once the sketch has seen a few times its register count).
//
//   HyperLogLog seen;
//   seen.Add(MixHash(std::hash<std::string_view>{}(identity)));
//   HyperLogLog::Registers union_of{};  seen.MergeInto(union_of);  other.MergeInto(union_of);
//   double distinct = HyperLogLog::Estimate(union_of);
//
// 2^11 registers of one byte: 2 KiB. The estimate's relative standard error is
// 1.04 / sqrt(2048) = 2.3% at every cardinality (kRelativeError); small sets (up to a few
// hundred) come out almost exactly. Estimate() is Ertl's improved raw estimator ("New
// cardinality estimation algorithms for HyperLogLog sketches", 2017), which needs neither the
// bias tables of HyperLogLog++ nor a switch to linear counting. Sketches merge exactly
// (register-wise max): the union of several is the sketch of the union.
#ifndef SLUICE_METRICS_HYPERLOGLOG_H_
#define SLUICE_METRICS_HYPERLOGLOG_H_

#include <array>
#include <atomic>
#include <cstdint>

namespace sluice::server {

// A 64-bit finalizer (splitmix64's) over a hash whose low or high bits may be weak, such as
// std::hash of a string: the sketch reads both ends of the hash.
inline uint64_t MixHash(uint64_t h) {
  h ^= h >> 30;
  h *= 0xbf58476d1ce4e5b9ULL;
  h ^= h >> 27;
  h *= 0x94d049bb133111ebULL;
  h ^= h >> 31;
  return h;
}

class HyperLogLog {
 public:
  static constexpr int kPrecision = 11;
  static constexpr size_t kRegisterCount = size_t{1} << kPrecision;
  static constexpr double kRelativeError = 0.023;  // 1.04 / sqrt(kRegisterCount)
  using Registers = std::array<uint8_t, kRegisterCount>;

  // Thread-safe, lock-free. `hash` must be well mixed (MixHash).
  void Add(uint64_t hash) {
    const size_t index = hash >> (64 - kPrecision);
    const uint8_t rank = RankOf(hash);
    std::atomic<uint8_t>& r = registers_[index];
    uint8_t seen = r.load(std::memory_order_relaxed);
    while (seen < rank && !r.compare_exchange_weak(seen, rank, std::memory_order_relaxed)) {
    }
  }

  // Empties the sketch. Adds racing with it may survive it.
  void Clear() {
    for (auto& r : registers_) r.store(0, std::memory_order_relaxed);
  }

  // out = max(out, this) register by register: afterwards `out` is the union's sketch.
  void MergeInto(Registers& out) const {
    for (size_t i = 0; i < kRegisterCount; ++i) {
      const uint8_t r = registers_[i].load(std::memory_order_relaxed);
      if (r > out[i]) out[i] = r;
    }
  }

  // The number of distinct hashes added to the sketch(es) `registers` was merged from.
  static double Estimate(const Registers& registers);

  // The register value a hash sets: one plus the leading zeros of the bits after the index, at
  // most 64 - kPrecision + 1.
  static uint8_t RankOf(uint64_t hash);

 private:
  std::array<std::atomic<uint8_t>, kRegisterCount> registers_{};
};

}  // namespace sluice::server

#endif  // SLUICE_METRICS_HYPERLOGLOG_H_
