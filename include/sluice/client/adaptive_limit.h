// An adaptive concurrency limit, in-process: how many calls a client lets out to a backend at
// once, learned from the backend's latency instead of set by hand. A fixed limit is right for
// one backend size and wrong after the next deploy; this one follows the latency the backend
// shows (docs/client.md, "Adaptive concurrency limits").
//
//   client::AdaptiveLimit limit(clock, {});
//   auto permit = limit.Acquire();          // std::nullopt: over the limit, shed the call
//   if (!permit) return Overloaded();
//   auto reply = Call(...);
//   if (reply.timed_out || reply.status == 503) permit->Dropped(); else permit->Success();
//
// The algorithm is Netflix concurrency-limits' gradient limit (Gradient2Limit and its
// predecessor GradientLimit, described in "Performance Under Load", Netflix Technology Blog,
// 2018): the limit is multiplied by a gradient, the ratio of the latency the backend has when
// nothing queues to the latency it shows now, and a headroom of sqrt(limit) is added so that a
// little queueing is allowed and the limit can grow:
//
//   gradient  = clamp(tolerance * floor / latency, 0.5, 1)
//   new_limit = limit * gradient + sqrt(limit)
//   limit     = (1 - smoothing) * limit + smoothing * new_limit
//
// What differs from Gradient2, and why:
// - `floor` is the least mean latency of a sample window seen (like GradientLimit's and TCP
//   Vegas' no-load RTT, and Envoy's minRTT), not Gradient2's long-term average: an average
//   follows sustained queueing up, so under a long overload the limit drifts back up into the
//   queue. A floor that only goes down cannot follow a backend that became slower for good, so
//   it is measured again after `floor_reset_windows` windows in a row at the lowest gradient
//   (latency at 2 * tolerance * floor or more, which a working limit does not leave there).
// - Samples are taken per window (`sample_window`, at least `min_samples` calls), as Envoy's
//   gradient controller does, not per call: one slow call does not move the limit.
// - A window with a drop (a timeout, a 503 or 429 from the backend) multiplies the limit by
//   `backoff` instead (Netflix's AIMDLimit's multiplicative decrease, once per window as TCP
//   backs off once per round trip), since a dropped call has no latency to learn from.
// - The limit grows only in a window where the calls in flight reached half of it (Netflix's
//   rule), and to twice those calls at most: a client that sends little learns nothing about
//   the backend's capacity.
// - Until the first sign of queueing (a window with a gradient under 1, or a drop) the limit
//   doubles each window, as TCP's slow start does: a client starting at initial_limit reaches
//   what the backend can take in a few windows, not in the dozens that sqrt(limit) steps take.
//
// A permit released without a verdict (destroyed, or Ignore()) teaches nothing: the call may
// have failed for a reason of its own (a 4xx, a cancellation, an exception). Thread-safe; the
// limit must outlive its permits. Time comes from the Clock given (a ManualClock in tests).
#ifndef SLUICE_CLIENT_ADAPTIVE_LIMIT_H_
#define SLUICE_CLIENT_ADAPTIVE_LIMIT_H_

#include <cstdint>
#include <mutex>
#include <optional>

#include "sluice/clock.h"
#include "sluice/status.h"
#include "sluice/time.h"

namespace sluice::client {

struct AdaptiveLimitOptions {
  int64_t initial_limit = 20;
  int64_t min_limit = 1;
  int64_t max_limit = 1000;
  double tolerance = 1.5;  // latency up to tolerance * floor counts as "not queueing"
  double smoothing = 0.2;  // how far one window moves the limit toward its new value
  double backoff = 0.9;    // the limit's factor after a window with a drop
  Duration sample_window = std::chrono::milliseconds(100);
  int64_t min_samples = 10;  // a window closes after sample_window and this many calls
  int64_t floor_reset_windows = 20;
};

// An error naming the field when a bound, factor or duration is out of range.
Result<AdaptiveLimitOptions> ValidateAdaptiveLimitOptions(const AdaptiveLimitOptions& options);

class AdaptiveLimit {
 public:
  // One call's slot, held until a verdict or destruction. Move-only.
  class Permit {
   public:
    Permit(Permit&& other) noexcept;
    Permit& operator=(Permit&& other) noexcept;
    Permit(const Permit&) = delete;
    Permit& operator=(const Permit&) = delete;
    ~Permit();

    // The call completed: the time since Acquire is a latency sample.
    void Success();
    // The backend dropped the call or it timed out: the limit backs off.
    void Dropped();
    // Releases the slot and teaches nothing (what destruction does).
    void Ignore();
    // False once a verdict was given or the permit was moved from.
    bool held() const { return limit_ != nullptr; }

   private:
    friend class AdaptiveLimit;
    Permit(AdaptiveLimit* limit, Timestamp start) : limit_(limit), start_(start) {}
    AdaptiveLimit* limit_;
    Timestamp start_;
  };

  // `options` must be valid; `clock` must outlive the limit.
  AdaptiveLimit(const Clock& clock, const AdaptiveLimitOptions& options);

  // A permit if in_flight() + 1 <= up_to * limit(), else std::nullopt. `up_to` in (0, 1]
  // reserves the rest of the limit for more important calls: priority shedding with the
  // thresholds of the server's `shed` rules (low 0.6, normal 0.8, critical 1).
  std::optional<Permit> Acquire(double up_to = 1.0);

  int64_t limit() const;
  int64_t in_flight() const;
  // The least window mean latency seen (0 before the first window closed).
  Duration floor() const;

 private:
  enum class Verdict { kSuccess, kDropped, kIgnored };
  void Release(Timestamp start, Verdict verdict);
  void CloseWindowLocked(Timestamp now);

  const Clock& clock_;
  AdaptiveLimitOptions options_;
  mutable std::mutex mu_;
  double limit_;
  int64_t in_flight_ = 0;
  Duration floor_{0};
  int64_t low_gradient_windows_ = 0;  // windows in a row at the gradient's lower clamp
  bool slow_start_ = true;            // no window has shown queueing or a drop yet
  // The current sample window.
  Timestamp window_start_;
  Duration latency_sum_{0};
  int64_t samples_ = 0;
  bool dropped_ = false;
  int64_t peak_in_flight_ = 0;
  // Drops of calls sent before the last backoff are already answered by it (TCP backs off once
  // per window of data in flight, not once per lost packet).
  Timestamp last_backoff_ = Timestamp::min();
};

}  // namespace sluice::client

#endif  // SLUICE_CLIENT_ADAPTIVE_LIMIT_H_
