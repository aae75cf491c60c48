// How each algorithm's counter state is written in a snapshot and read back (docs/quotas.md,
// "Counters that survive a restart"). Internal to the memory store.
//
// A state of plain integers is one entry below: a tag and its fields, each marked with what it
// holds -- a count (copied as is), an instant (nanoseconds on the store's clock, saved as a
// wall-clock instant) or a window number (floor(t / period), saved as its window's wall-clock
// start). Adding an algorithm's state is one StateCodec specialisation and one entry of
// SnapshotAlgs. A state with heap parts (the sliding log) writes itself.
//
// Time: a store's instants are its clock's, which the sluiced process anchors to the wall clock
// at its start and then advances with the steady clock. `to_wall` is what turns one into the
// wall-clock instant: system_clock::now() - clock.Now(), taken when saving; loading subtracts the
// new process's own. A window number is moved to the window of the new clock nearest to the saved
// window's start: the same window unless the two clocks differ by half a window or more.
#ifndef SLUICE_STORE_MEMORY_STATE_CODEC_H_
#define SLUICE_STORE_MEMORY_STATE_CODEC_H_

#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "sluice/calendar_window.h"
#include "sluice/fixed_window.h"
#include "sluice/gcra.h"
#include "sluice/leaky_bucket.h"
#include "sluice/limit_spec.h"
#include "sluice/sliding_window_counter.h"
#include "sluice/sliding_window_log.h"
#include "sluice/token_bucket.h"
#include "store/memory/snapshot_bytes.h"

namespace sluice::internal {

enum class FieldKind : uint8_t { kCount, kInstant, kWindow };

template <auto kMember, FieldKind kKind = FieldKind::kCount>
struct Field {
  static constexpr auto member = kMember;
  static constexpr FieldKind kind = kKind;
};

template <typename... F>
struct Fields {};

// What a codec needs besides the state: the spec's period (window numbers) and the clock shift.
struct TimeFrame {
  int64_t period_ns = 1;
  int64_t to_wall_ns = 0;  // add to a store instant to get the wall-clock one
};

template <typename Alg>
struct StateCodec;  // the entries

template <>
struct StateCodec<TokenBucket> {
  static constexpr uint8_t kTag = 1;
  using S = TokenBucket::State;
  using Layout = Fields<Field<&S::scaled_tokens>, Field<&S::last_ns, FieldKind::kInstant>>;
};
template <>
struct StateCodec<WideTokenBucket> {
  static constexpr uint8_t kTag = 2;
  using S = WideTokenBucket::State;
  using Layout = Fields<Field<&S::scaled_tokens>, Field<&S::last_ns, FieldKind::kInstant>>;
};
template <>
struct StateCodec<LeakyBucket> {
  static constexpr uint8_t kTag = 3;
  using S = LeakyBucket::State;
  using Layout = Fields<Field<&S::scaled_level>, Field<&S::last_ns, FieldKind::kInstant>>;
};
template <>
struct StateCodec<WideLeakyBucket> {
  static constexpr uint8_t kTag = 4;
  using S = WideLeakyBucket::State;
  using Layout = Fields<Field<&S::scaled_level>, Field<&S::last_ns, FieldKind::kInstant>>;
};
template <>
struct StateCodec<Gcra> {
  static constexpr uint8_t kTag = 5;
  using S = Gcra::State;
  using Layout = Fields<Field<&S::tat_ns, FieldKind::kInstant>, Field<&S::tat_frac>>;
};
template <>
struct StateCodec<FixedWindow> {
  static constexpr uint8_t kTag = 6;
  using S = FixedWindow::State;
  using Layout = Fields<Field<&S::window, FieldKind::kWindow>, Field<&S::count>>;
};
template <>
struct StateCodec<SlidingWindowCounter> {
  static constexpr uint8_t kTag = 7;
  using S = SlidingWindowCounter::State;
  using Layout =
      Fields<Field<&S::window, FieldKind::kWindow>, Field<&S::current>, Field<&S::previous>>;
};
// The log: its time, then each stamp's age in quanta from that time (stamps are kept modulo 2^32
// quanta of the store's clock, which a new clock does not share).
template <>
struct StateCodec<SlidingWindowLog> {
  static constexpr uint8_t kTag = 8;
};

// A calendar window's bounds are instants like any other: saved as wall-clock ones, so the open
// window ends when it would have (the next is worked out from the zone rules by the new process).
// Then the id of the zone the window was opened in (docs/quotas.md, "A zone per customer").
template <>
struct StateCodec<CalendarWindow> {
  static constexpr uint8_t kTag = 10;
  using S = CalendarWindow::State;
  using Layout = Fields<Field<&S::start_ns, FieldKind::kInstant>,
                        Field<&S::end_ns, FieldKind::kInstant>, Field<&S::count>, Field<&S::zone>>;
};
// A calendar window saved before zones were recorded (tag 9, written by the sluiced of
// 2026-12-05 only): its bounds and count, read with no zone. RestoreLimitSection reads it for
// a calendar limiter; never written.
struct CalendarWindowBeforeZones {};
template <>
struct StateCodec<CalendarWindowBeforeZones> {
  static constexpr uint8_t kTag = 9;
  using S = CalendarWindow::State;
  using Layout = Fields<Field<&S::start_ns, FieldKind::kInstant>,
                        Field<&S::end_ns, FieldKind::kInstant>, Field<&S::count>>;
};

// Every algorithm whose state a snapshot holds.
template <typename... A>
struct AlgList {};
using SnapshotAlgs = AlgList<TokenBucket, WideTokenBucket, LeakyBucket, WideLeakyBucket, Gcra,
                             FixedWindow, SlidingWindowCounter, SlidingWindowLog, CalendarWindow>;

// Calls f(std::type_identity<Alg>{}) for the algorithm of SnapshotAlgs whose tag is `tag`;
// false if none has it.
template <typename F, typename... A>
bool WithAlgOfTag(uint8_t tag, AlgList<A...>, F&& f) {
  return ((StateCodec<A>::kTag == tag ? (f(std::type_identity<A>{}), true) : false) || ...);
}

// Writes `state` (of the algorithm of `Alg`).
template <typename Alg>
void EncodeState(const typename Alg::State& state, const TimeFrame& frame, ByteWriter& out);
// Reads a state written by EncodeState into `state`; false if the bytes are short or wrong.
template <typename Alg>
bool DecodeState(ByteReader& in, const TimeFrame& frame, const LimitSpec& spec,
                 typename Alg::State& state);

// ---- implementation ----

void EncodeLogState(const SlidingWindowLog::State& state, const TimeFrame& frame, ByteWriter& out);
bool DecodeLogState(ByteReader& in, const TimeFrame& frame, const LimitSpec& spec,
                    SlidingWindowLog::State& state);

template <FieldKind kKind, typename T>
void EncodeField(T v, const TimeFrame& frame, ByteWriter& out) {
  if constexpr (kKind == FieldKind::kInstant) {
    static_assert(std::is_same_v<T, int64_t>);
    out.Put<int64_t>(v + frame.to_wall_ns);
  } else if constexpr (kKind == FieldKind::kWindow) {
    static_assert(std::is_same_v<T, int64_t>);
    out.Put<int64_t>(v * frame.period_ns + frame.to_wall_ns);
  } else {
    out.Put<T>(v);
  }
}

template <FieldKind kKind, typename T>
bool DecodeField(ByteReader& in, const TimeFrame& frame, T& v) {
  if (!in.Get(v)) return false;
  if constexpr (kKind == FieldKind::kInstant) {
    v -= frame.to_wall_ns;
  } else if constexpr (kKind == FieldKind::kWindow) {
    const int64_t start = v - frame.to_wall_ns + frame.period_ns / 2;
    v = start / frame.period_ns - (start % frame.period_ns < 0 ? 1 : 0);
  }
  return true;
}

// A field is read and written through its byte offset, by memcpy: a wide state's 128-bit field
// is only 8-byte aligned (WideInt, limit_spec.h), which the member's type, as a template
// deduces it, no longer says -- a reference to it would claim 16.
template <typename M>
struct MemberOf;
template <typename S, typename T>
struct MemberOf<T S::*> {
  using type = T;
};
template <auto kMember>
std::ptrdiff_t OffsetOf() {
  // The Itanium C++ ABI (GCC, Clang) represents a data member pointer as the member's offset.
  static_assert(sizeof(kMember) == sizeof(std::ptrdiff_t));
  return std::bit_cast<std::ptrdiff_t>(kMember);
}

template <typename F, typename S>
void EncodeMember(const S& s, const TimeFrame& frame, ByteWriter& out) {
  typename MemberOf<std::remove_cv_t<decltype(F::member)>>::type v;
  std::memcpy(&v, reinterpret_cast<const char*>(&s) + OffsetOf<F::member>(), sizeof v);
  EncodeField<F::kind>(v, frame, out);
}
template <typename F, typename S>
bool DecodeMember(ByteReader& in, const TimeFrame& frame, S& s) {
  typename MemberOf<std::remove_cv_t<decltype(F::member)>>::type v{};
  if (!DecodeField<F::kind>(in, frame, v)) return false;
  std::memcpy(reinterpret_cast<char*>(&s) + OffsetOf<F::member>(), &v, sizeof v);
  return true;
}

template <typename S, typename... F>
void EncodeFields(const S& s, Fields<F...>, const TimeFrame& frame, ByteWriter& out) {
  (EncodeMember<F>(s, frame, out), ...);
}
template <typename S, typename... F>
bool DecodeFields(ByteReader& in, Fields<F...>, const TimeFrame& frame, S& s) {
  return (DecodeMember<F>(in, frame, s) && ...);
}

template <typename Alg>
void EncodeState(const typename Alg::State& state, const TimeFrame& frame, ByteWriter& out) {
  if constexpr (std::is_same_v<Alg, SlidingWindowLog>) {
    EncodeLogState(state, frame, out);
  } else {
    EncodeFields(state, typename StateCodec<Alg>::Layout{}, frame, out);
  }
}

template <typename Alg>
bool DecodeState(ByteReader& in, const TimeFrame& frame, const LimitSpec& spec,
                 typename Alg::State& state) {
  if constexpr (std::is_same_v<Alg, SlidingWindowLog>) {
    return DecodeLogState(in, frame, spec, state);
  } else {
    (void)spec;
    return DecodeFields(in, typename StateCodec<Alg>::Layout{}, frame, state);
  }
}

// The tag of the state a memory store keeps for `spec` (wide buckets for a wide spec).
uint8_t StateTagFor(const LimitSpec& spec);

}  // namespace sluice::internal

#endif  // SLUICE_STORE_MEMORY_STATE_CODEC_H_
