#include "store/redis/redis_script_choice.h"

#include "core/arith.h"
#include "store/redis/redis_limiter.h"
#include "store/redis/redis_script_log.h"

namespace sluice::internal {

Result<ScriptCall> ScriptFor(const LimitSpec& spec) {
  auto valid = ValidateLimitSpec(spec);
  if (!valid) return std::unexpected(valid.error());
  if (spec.algorithm == Algorithm::kSlidingWindowLog) {
    auto params = SlidingWindowLogParams(spec);
    if (!params) return std::unexpected(params.error());
    return ScriptCall{&kSlidingWindowLogScript, std::move(*params)};
  }
  if (spec.period.count() % kNanosPerUs != 0) {
    return MakeError("the redis store counts in microseconds: period must be a whole number of us");
  }
  const int64_t period_us = spec.period.count() / kNanosPerUs;
  auto out_of_range = [&] {
    return MakeError(DescribeLimitSpec(spec) +
                     " is outside the redis store's exact range (Lua integers below 2^53)");
  };
  switch (spec.algorithm) {
    case Algorithm::kTokenBucket:
    case Algorithm::kGcra:
    case Algorithm::kLeakyBucket: {
      const auto rate = Reduce(spec.limit, period_us);
      const __int128 cap = static_cast<__int128>(spec.Capacity()) * rate.d;
      // Four capacities: a backlog of one capacity of debt plus a charge of two stays exact.
      if (4 * cap * rate.n >= kLuaExact) return out_of_range();
      ScriptCall call;
      call.params = {std::to_string(static_cast<int64_t>(cap)), std::to_string(rate.n),
                     std::to_string(rate.d)};
      if (spec.algorithm == Algorithm::kLeakyBucket) {
        call.params.push_back(spec.shaper ? "1" : "0");
        if (spec.HasMaxDelay() && spec.max_delay.count() % kNanosPerUs != 0) {
          return MakeError(
              "the redis store counts in microseconds: max_delay must be a whole "
              "number of us");
        }
        call.params.push_back(
            spec.HasMaxDelay() ? std::to_string(spec.max_delay.count() / kNanosPerUs) : "-1");
      }
      call.script = spec.algorithm == Algorithm::kTokenBucket ? &kTokenBucketScript
                    : spec.algorithm == Algorithm::kGcra      ? &kGcraScript
                                                              : &kLeakyBucketScript;
      return call;
    }
    case Algorithm::kFixedWindow:
    case Algorithm::kSlidingWindowCounter: {
      if (static_cast<__int128>(spec.limit) * period_us * 4 >= kLuaExact) return out_of_range();
      ScriptCall call;
      call.params = {std::to_string(spec.limit), std::to_string(period_us)};
      call.script = spec.algorithm == Algorithm::kFixedWindow ? &kFixedWindowScript
                                                              : &kSlidingWindowCounterScript;
      return call;
    }
    default:
      return MakeError("the redis store does not support " +
                       std::string(AlgorithmName(spec.algorithm)));
  }
}

}  // namespace sluice::internal
