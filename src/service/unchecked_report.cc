#include "service/unchecked_report.h"

#include <utility>

namespace sluice::server {
namespace {

constexpr std::array<UncheckedDescriptor, 4> kMetricReasons = {
    UncheckedDescriptor::kPastMaxDescriptors, UncheckedDescriptor::kTooManyEntries,
    UncheckedDescriptor::kKeyTooLong, UncheckedDescriptor::kConcurrency};

std::string Describe(const std::array<uint64_t, 3>& n) {
  const CheckLimits& l = kCheckLimits;
  return "answered " + std::to_string(n[0] + n[1] + n[2]) +
         " request descriptors OK without a check since the last warning (" + std::to_string(n[0]) +
         " past the first " + std::to_string(l.max_descriptors) + " of a request, " +
         std::to_string(n[1]) + " with more than " + std::to_string(l.max_entries) + " entries, " +
         std::to_string(n[2]) + " with a key over " + std::to_string(l.max_key_bytes) +
         " bytes); sluice_descriptors_unchecked_total counts them all";
}

}  // namespace

void UncheckedReport::Record(const UncheckedCounts& counts) {
  if (!counts.any()) return;
  for (size_t r = 0; r < counts.by_reason.size(); ++r) {
    if (metrics_ != nullptr && counts.by_reason[r] != 0) {
      metrics_->RecordUncheckedDescriptors(kMetricReasons[r], counts.by_reason[r]);
    }
  }
  // A concurrency rule skipped by a check is the documented answer, not a client's fault: it is
  // counted, not logged.
  if (!warn_ || counts.by_reason[0] + counts.by_reason[1] + counts.by_reason[2] == 0) return;
  std::string message;
  {
    std::lock_guard lock(mu_);
    for (size_t r = 0; r < since_warning_.size(); ++r) since_warning_[r] += counts.by_reason[r];
    const Timestamp now = clock_->Now();
    if (warned_ && now - last_warning_ < kWarnEvery) return;
    warned_ = true;
    last_warning_ = now;
    message = Describe(since_warning_);
    since_warning_ = {};
  }
  warn_(message);  // outside the lock: the hook may take its time
}

}  // namespace sluice::server
