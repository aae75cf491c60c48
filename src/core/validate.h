// Validation shared by the algorithms' Create(). Internal to libsluice.
#ifndef SLUICE_CORE_VALIDATE_H_
#define SLUICE_CORE_VALIDATE_H_

#include "sluice/limit_spec.h"

namespace sluice::internal {

// ValidateLimitSpec, plus: the spec names the algorithm being built.
Result<LimitSpec> ValidateLimitSpecFor(const LimitSpec& spec, Algorithm expected);

}  // namespace sluice::internal

#endif  // SLUICE_CORE_VALIDATE_H_
