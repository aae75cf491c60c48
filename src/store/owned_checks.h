// OwnedChecks: a request's checks with keys of their own, for a store layer that reads them
// again when an asynchronous answer comes (the caller's keys may be gone by then). Internal.
#ifndef SLUICE_STORE_OWNED_CHECKS_H_
#define SLUICE_STORE_OWNED_CHECKS_H_

#include <span>
#include <string>
#include <vector>

#include "sluice/limiter.h"

namespace sluice::internal {

struct OwnedChecks {
  explicit OwnedChecks(std::span<const LimitCheck> asked) : checks(asked.begin(), asked.end()) {
    keys.reserve(asked.size());  // no reallocation: the checks' keys point into these strings
    for (LimitCheck& c : checks) c.key = keys.emplace_back(c.key);
  }
  OwnedChecks(const OwnedChecks&) = delete;
  OwnedChecks& operator=(const OwnedChecks&) = delete;

  std::vector<std::string> keys;
  std::vector<LimitCheck> checks;
};

}  // namespace sluice::internal

#endif  // SLUICE_STORE_OWNED_CHECKS_H_
