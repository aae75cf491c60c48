#include "store/redis/redis_script_choice.h"

#include "core/arith.h"
#include "store/redis/redis_limiter.h"
#include "store/redis/redis_script_log.h"
#include "store/redis/redis_script_multi.h"
#include "store/redis/redis_script_wide.h"

namespace sluice::internal {

namespace {

// The wide scripts divide by n, d and the window (muldiv: below 2^45, over a year of us), keep
// counts below 2^33 and times -- two fill times of a bucket -- below 2^53 us (docs/redis.md).
constexpr int64_t kWideDivisor = int64_t{1} << 45;

Result<ScriptCall> BucketCall(const LimitSpec& spec, int64_t period_us, const Error& out_of_range,
                              int64_t generation) {
  const auto rate = Reduce(spec.limit, period_us);
  const __int128 cap = static_cast<__int128>(spec.Capacity()) * rate.d;
  // Four capacities: a backlog of one capacity of debt plus a charge of two stays exact.
  const bool narrow = 4 * cap * rate.n < kLuaExact;
  // Two fill times in us, (2C + 2) x d / n, below 2^53; GCRA's theoretical arrival time is now
  // plus that, so below 3 x 2^51 (~214 years) for it, to stay below 2^53 until 2041.
  const __int128 two_fills_bound =
      spec.algorithm == Algorithm::kGcra ? 3 * (kLuaExact / 4) : kLuaExact;
  if (!narrow &&
      (rate.n >= kWideDivisor || rate.d >= kWideDivisor || spec.Capacity() >= (int64_t{1} << 33) ||
       (2 * static_cast<__int128>(spec.Capacity()) + 2) * rate.d >= two_fills_bound * rate.n)) {
    return std::unexpected(out_of_range);
  }
  ScriptCall call;
  call.params = {std::to_string(narrow ? static_cast<int64_t>(cap) : spec.Capacity()),
                 std::to_string(rate.n), std::to_string(rate.d)};
  if (spec.algorithm == Algorithm::kLeakyBucket) {
    call.params.push_back(spec.shaper ? "1" : "0");
    if (spec.HasMaxDelay() && spec.max_delay.count() % kNanosPerUs != 0) {
      return MakeError(
          "the redis store counts in microseconds: max_delay must be a whole number of us");
    }
    call.params.push_back(spec.HasMaxDelay() ? std::to_string(spec.max_delay.count() / kNanosPerUs)
                                             : "-1");
  }
  if (narrow) {
    call.params.push_back(std::to_string(generation));
    call.script = spec.algorithm == Algorithm::kTokenBucket ? &kTokenBucketScript
                  : spec.algorithm == Algorithm::kGcra      ? &kGcraScript
                                                            : &kLeakyBucketScript;
  } else {
    call.script = spec.algorithm == Algorithm::kTokenBucket ? &kTokenBucketWideScript
                  : spec.algorithm == Algorithm::kGcra      ? &kGcraWideScript
                                                            : &kLeakyBucketWideScript;
  }
  call.id = ScriptAlgorithmId(spec.algorithm) + (narrow ? 0 : kWideScriptId);
  return call;
}

}  // namespace

Result<ScriptCall> ScriptFor(const LimitSpec& spec, int64_t generation) {
  auto valid = ValidateLimitSpec(spec);
  if (!valid) return std::unexpected(valid.error());
  return ScriptForValidSpec(spec, generation);
}

Result<ScriptCall> ScriptForValidSpec(const LimitSpec& spec, int64_t generation) {
  if (spec.IsCalendar()) {
    // The window's bounds are per call (RedisLimiter::AppendArgs); the spec gives the limit.
    return ScriptCall{&kCalendarWindowScript, {std::to_string(spec.limit)}, kCalendarScriptId};
  }
  if (spec.algorithm == Algorithm::kSlidingWindowLog) {
    auto params = SlidingWindowLogParams(spec);
    if (!params) return std::unexpected(params.error());
    return ScriptCall{&kSlidingWindowLogScript, std::move(*params),
                      ScriptAlgorithmId(spec.algorithm)};
  }
  if (spec.period.count() % kNanosPerUs != 0) {
    return MakeError("the redis store counts in microseconds: period must be a whole number of us");
  }
  const int64_t period_us = spec.period.count() / kNanosPerUs;
  const Error out_of_range{DescribeLimitSpec(spec) +
                           " is outside the redis store's range (a period below 2^45 us, about "
                           "407 days, and two fill times below 2^53 us, for gcra 3 x 2^51)"};
  switch (spec.algorithm) {
    case Algorithm::kTokenBucket:
    case Algorithm::kGcra:
    case Algorithm::kLeakyBucket:
      return BucketCall(spec, period_us, out_of_range, generation);
    case Algorithm::kFixedWindow:
    case Algorithm::kSlidingWindowCounter: {
      // The fixed window only adds counts; the counter's estimate passes 2^53 past this.
      const bool narrow = spec.algorithm == Algorithm::kFixedWindow ||
                          static_cast<__int128>(spec.limit) * period_us * 4 < kLuaExact;
      if (!narrow && (period_us >= kWideDivisor || spec.limit >= (int64_t{1} << 33))) {
        return std::unexpected(out_of_range);
      }
      ScriptCall call;
      call.params = {std::to_string(spec.limit), std::to_string(period_us)};
      call.script = spec.algorithm == Algorithm::kFixedWindow ? &kFixedWindowScript
                    : narrow                                  ? &kSlidingWindowCounterScript
                                                              : &kSlidingWindowCounterWideScript;
      call.id = ScriptAlgorithmId(spec.algorithm) + (narrow ? 0 : kWideScriptId);
      return call;
    }
    default:
      return MakeError("the redis store does not support " +
                       std::string(AlgorithmName(spec.algorithm)));
  }
}

}  // namespace sluice::internal
