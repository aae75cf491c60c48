#include "sluice/client/adaptive_limit.h"

#include <algorithm>
#include <cmath>
#include <utility>

namespace sluice::client {
namespace {

constexpr double kLowestGradient = 0.5;  // one window at most halves the new limit

bool InUnit(double x) { return std::isfinite(x) && x > 0 && x <= 1; }

}  // namespace

Result<AdaptiveLimitOptions> ValidateAdaptiveLimitOptions(const AdaptiveLimitOptions& o) {
  if (o.min_limit < 1) return MakeError("adaptive limit min_limit must be at least 1");
  if (o.max_limit < o.min_limit) return MakeError("adaptive limit max_limit must be >= min_limit");
  if (o.initial_limit < o.min_limit || o.initial_limit > o.max_limit) {
    return MakeError("adaptive limit initial_limit must be within [min_limit, max_limit]");
  }
  if (!std::isfinite(o.tolerance) || o.tolerance < 1) {
    return MakeError("adaptive limit tolerance must be a number >= 1");
  }
  if (!InUnit(o.smoothing)) return MakeError("adaptive limit smoothing must be in (0, 1]");
  if (!InUnit(o.backoff) || o.backoff == 1) {
    return MakeError("adaptive limit backoff must be in (0, 1)");
  }
  if (o.sample_window <= Duration{0}) {
    return MakeError("adaptive limit sample_window must be positive");
  }
  if (o.min_samples < 1) return MakeError("adaptive limit min_samples must be at least 1");
  if (o.floor_reset_windows < 1) {
    return MakeError("adaptive limit floor_reset_windows must be at least 1");
  }
  return o;
}

AdaptiveLimit::Permit::Permit(Permit&& other) noexcept
    : limit_(std::exchange(other.limit_, nullptr)), start_(other.start_) {}

AdaptiveLimit::Permit& AdaptiveLimit::Permit::operator=(Permit&& other) noexcept {
  if (this != &other) {
    Ignore();
    limit_ = std::exchange(other.limit_, nullptr);
    start_ = other.start_;
  }
  return *this;
}

AdaptiveLimit::Permit::~Permit() { Ignore(); }

void AdaptiveLimit::Permit::Success() {
  if (auto* l = std::exchange(limit_, nullptr)) l->Release(start_, Verdict::kSuccess);
}

void AdaptiveLimit::Permit::Dropped() {
  if (auto* l = std::exchange(limit_, nullptr)) l->Release(start_, Verdict::kDropped);
}

void AdaptiveLimit::Permit::Ignore() {
  if (auto* l = std::exchange(limit_, nullptr)) l->Release(start_, Verdict::kIgnored);
}

AdaptiveLimit::AdaptiveLimit(const Clock& clock, const AdaptiveLimitOptions& options)
    : clock_(clock),
      options_(options),
      limit_(static_cast<double>(options.initial_limit)),
      window_start_(clock.Now()) {}

std::optional<AdaptiveLimit::Permit> AdaptiveLimit::Acquire(double up_to) {
  const Timestamp now = clock_.Now();
  std::lock_guard lock(mu_);
  const double share = std::clamp(std::isfinite(up_to) ? up_to : 0.0, 0.0, 1.0);
  // Compared in whole calls: limit() is what callers see, and what in_flight() must stay under.
  if (static_cast<double>(in_flight_ + 1) > share * std::floor(limit_)) return std::nullopt;
  ++in_flight_;
  peak_in_flight_ = std::max(peak_in_flight_, in_flight_);
  return Permit(this, now);
}

int64_t AdaptiveLimit::limit() const {
  std::lock_guard lock(mu_);
  return static_cast<int64_t>(limit_);
}

int64_t AdaptiveLimit::in_flight() const {
  std::lock_guard lock(mu_);
  return in_flight_;
}

Duration AdaptiveLimit::floor() const {
  std::lock_guard lock(mu_);
  return floor_;
}

void AdaptiveLimit::Release(Timestamp start, Verdict verdict) {
  const Timestamp now = clock_.Now();
  std::lock_guard lock(mu_);
  --in_flight_;
  if (verdict == Verdict::kSuccess) {
    latency_sum_ += std::max(now - start, Duration{1});  // a zero latency would make no ratio
    ++samples_;
  } else if (verdict == Verdict::kDropped && start >= last_backoff_) {
    dropped_ = true;
  }
  if (verdict == Verdict::kIgnored || now - window_start_ < options_.sample_window) return;
  // A window with a drop closes without min_samples: a backend dropping calls may answer few.
  if (dropped_ || samples_ >= options_.min_samples) CloseWindowLocked(now);
}

void AdaptiveLimit::CloseWindowLocked(Timestamp now) {
  double next = limit_;
  if (dropped_) {
    next = limit_ * options_.backoff;
    last_backoff_ = now;
    slow_start_ = false;
  } else {
    const double latency =
        static_cast<double>(latency_sum_.count()) / static_cast<double>(samples_);
    if (floor_ == Duration{0} || latency < static_cast<double>(floor_.count())) {
      floor_ = Duration(static_cast<int64_t>(latency));
    }
    const double gradient = std::clamp(
        options_.tolerance * static_cast<double>(floor_.count()) / latency, kLowestGradient, 1.0);
    // A backend slower for good keeps every window at the lowest gradient: measure it again.
    low_gradient_windows_ = gradient == kLowestGradient ? low_gradient_windows_ + 1 : 0;
    if (low_gradient_windows_ >= options_.floor_reset_windows) {
      floor_ = Duration(static_cast<int64_t>(latency));
      low_gradient_windows_ = 0;
    }
    if (gradient < 1) slow_start_ = false;
    if (slow_start_) {
      next = 2 * limit_;
    } else {
      const double target = limit_ * gradient + std::sqrt(limit_);
      next = (1 - options_.smoothing) * limit_ + options_.smoothing * target;
    }
    // A limit is learned only as far as it is used: growth stops at twice the calls that were
    // in flight at once in the window (none if they were under half the limit).
    const double used = 2 * static_cast<double>(peak_in_flight_);
    if (next > limit_) next = std::max(limit_, std::min(next, used));
  }
  limit_ = std::clamp(next, static_cast<double>(options_.min_limit),
                      static_cast<double>(options_.max_limit));
  window_start_ = now;
  latency_sum_ = Duration{0};
  samples_ = 0;
  dropped_ = false;
  peak_in_flight_ = in_flight_;
}

}  // namespace sluice::client
