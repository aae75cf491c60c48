// Randomness for the client's jitter, injected so that tests and simulations are reproducible:
// nothing in sluice::client draws from a global generator.
//
//   client::SeededRandom rng(42);
//   client::Backoff backoff(policy, rng);
#ifndef SLUICE_CLIENT_RANDOM_H_
#define SLUICE_CLIENT_RANDOM_H_

#include <cstdint>
#include <random>

namespace sluice::client {

class Random {
 public:
  virtual ~Random() = default;
  // Uniform on [0, 1).
  virtual double Uniform01() = 0;
};

// A 64-bit Mersenne Twister from a seed. The conversion to [0, 1) is written here (53 high bits),
// not std::uniform_real_distribution's, whose algorithm the standard leaves to the library: the
// same seed gives the same numbers with every standard library. Not thread-safe.
class SeededRandom final : public Random {
 public:
  explicit SeededRandom(uint64_t seed) : engine_(seed) {}
  double Uniform01() override { return static_cast<double>(engine_() >> 11) * 0x1.0p-53; }

 private:
  std::mt19937_64 engine_;
};

}  // namespace sluice::client

#endif  // SLUICE_CLIENT_RANDOM_H_
