#include "sluice/quota_sync.h"

#include "sluice/limit_spec.h"

namespace sluice {

bool SharedSyncCanServe(const LimitSpec& spec) {
  switch (spec.algorithm) {
    case Algorithm::kTokenBucket:
    case Algorithm::kGcra:
      return true;
    case Algorithm::kFixedWindow:
      // Leases and batches are sized by a fixed-length period, which a calendar window is not.
      return !spec.IsCalendar();
    case Algorithm::kLeakyBucket:
      return !spec.shaper;
    case Algorithm::kSlidingWindowLog:
    case Algorithm::kSlidingWindowCounter:
      return false;
  }
  return false;
}

}  // namespace sluice
