#include "store/memory/state_codec.h"

#include <array>

#include "core/arith.h"

namespace sluice::internal {
namespace {

// The reflected Castagnoli polynomial's byte table, built once at compile time.
constexpr std::array<uint32_t, 256> MakeCrcTable() {
  std::array<uint32_t, 256> table{};
  for (uint32_t i = 0; i < 256; ++i) {
    uint32_t c = i;
    for (int k = 0; k < 8; ++k) c = (c & 1) ? (c >> 1) ^ 0x82f63b78u : c >> 1;
    table[i] = c;
  }
  return table;
}
constexpr std::array<uint32_t, 256> kCrcTable = MakeCrcTable();

}  // namespace

uint32_t Crc32c(std::string_view bytes, uint32_t crc) {
  crc = ~crc;
  for (const char ch : bytes) crc = kCrcTable[(crc ^ static_cast<uint8_t>(ch)) & 0xff] ^ (crc >> 8);
  return ~crc;
}

void EncodeLogState(const SlidingWindowLog::State& state, const TimeFrame& frame, ByteWriter& out) {
  out.Put<int64_t>(state.last_ns + frame.to_wall_ns);
  out.Put<uint32_t>(state.stamps.size());
  // The quantum is the spec's (SlidingWindowLogQuantum), as when decoding.
  const int64_t quantum = SlidingWindowLogQuantum(Duration(frame.period_ns));
  const auto now = static_cast<uint32_t>(FloorDiv(state.last_ns, quantum));
  for (uint32_t i = 0; i < state.stamps.size(); ++i) {
    out.Put<uint32_t>(now - state.stamps.at(i));  // the stamp's age, modulo 2^32 as kept
  }
}

bool DecodeLogState(ByteReader& in, const TimeFrame& frame, const LimitSpec& spec,
                    SlidingWindowLog::State& state) {
  int64_t last = 0;
  uint32_t size = 0;
  if (!in.Get(last) || !in.Get(size)) return false;
  // A Charge's debt holds up to twice the limit (SlidingWindowLog::Charge); more is not a log.
  if (int64_t{size} > 2 * spec.limit) return false;
  state.last_ns = last - frame.to_wall_ns;
  const int64_t quantum = SlidingWindowLogQuantum(spec.period);
  if (quantum <= 0) return false;
  const auto now = static_cast<uint32_t>(FloorDiv(state.last_ns, quantum));
  const int64_t window_quanta = spec.period.count() / quantum;
  state.stamps.Clear();
  uint32_t previous_age = UINT32_MAX;
  for (uint32_t i = 0; i < size; ++i) {
    uint32_t age = 0;
    if (!in.Get(age)) return false;
    // Oldest first, and every stamp younger than two windows (sliding_window_log.cc).
    if (age > previous_age || int64_t{age} >= 2 * window_quanta) return false;
    previous_age = age;
    state.stamps.PushBack(now - age, 1);
  }
  return true;
}

uint8_t StateTagFor(const LimitSpec& spec) {
  const bool wide = NeedsWideArithmetic(spec);
  switch (spec.algorithm) {
    case Algorithm::kTokenBucket:
      return wide ? StateCodec<WideTokenBucket>::kTag : StateCodec<TokenBucket>::kTag;
    case Algorithm::kLeakyBucket:
      return wide ? StateCodec<WideLeakyBucket>::kTag : StateCodec<LeakyBucket>::kTag;
    case Algorithm::kGcra:
      return StateCodec<Gcra>::kTag;
    case Algorithm::kFixedWindow:
      return spec.IsCalendar() ? StateCodec<CalendarWindow>::kTag : StateCodec<FixedWindow>::kTag;
    case Algorithm::kSlidingWindowCounter:
      return StateCodec<SlidingWindowCounter>::kTag;
    case Algorithm::kSlidingWindowLog:
      return StateCodec<SlidingWindowLog>::kTag;
  }
  return 0;
}

}  // namespace sluice::internal
