// The store's hash: no collisions on realistic key sets, every input byte matters, the seed
// changes everything, and the 32 bits the table uses are spread evenly.
#include "store/memory/key_hash.h"

#include <gtest/gtest.h>

#include <string>
#include <unordered_set>
#include <vector>

namespace sluice::internal {
namespace {

TEST(KeyHash, NoCollisionsOnAMillionSequentialKeys) {
  std::unordered_set<uint64_t> seen;
  for (int i = 0; i < 1'000'000; ++i) {
    ASSERT_TRUE(seen.insert(HashKey("user-" + std::to_string(i), 42)).second) << i;
  }
}

TEST(KeyHash, EveryByteAndTheLengthMatter) {
  for (size_t len = 0; len <= 40; ++len) {
    std::string key(len, 'a');
    const uint64_t base = HashKey(key, 7);
    EXPECT_NE(base, HashKey(key + '\0', 7)) << len;  // length is hashed, not only bytes
    for (size_t i = 0; i < len; ++i) {
      std::string flipped = key;
      flipped[i] ^= 1;
      EXPECT_NE(base, HashKey(flipped, 7)) << "len " << len << " byte " << i;
    }
  }
}

TEST(KeyHash, TheSeedChangesTheHash) {
  int same = 0;
  for (int i = 0; i < 1000; ++i) {
    const std::string k = "k" + std::to_string(i);
    same += HashKey(k, 1) == HashKey(k, 2);
  }
  EXPECT_EQ(same, 0);
}

TEST(KeyHash, LowBitsAndHighBitsAreEvenlySpread) {
  // The table uses the low 32 bits (scaled) and the shard the next bits: both must be uniform.
  constexpr int kBuckets = 256;
  constexpr int kKeys = 256 * 1000;
  std::vector<int> low(kBuckets), high(kBuckets);
  for (int i = 0; i < kKeys; ++i) {
    const uint64_t h =
        HashKey("10.0." + std::to_string(i / 256) + "." + std::to_string(i % 256), 9);
    ++low[(static_cast<uint32_t>(h) * uint64_t{kBuckets}) >> 32];
    ++high[(h >> 32) % kBuckets];
  }
  // Chi-square with 255 degrees of freedom: 99.99th percentile is about 370.
  auto chi2 = [](const std::vector<int>& counts) {
    const double expected = static_cast<double>(kKeys) / kBuckets;
    double sum = 0;
    for (int c : counts) sum += (c - expected) * (c - expected) / expected;
    return sum;
  };
  EXPECT_LT(chi2(low), 370.0);
  EXPECT_LT(chi2(high), 370.0);
}

}  // namespace
}  // namespace sluice::internal
