#include "cli/overload.h"

#include <algorithm>
#include <cmath>
#include <deque>
#include <memory>
#include <optional>
#include <queue>
#include <string>

#include "sluice/client/adaptive_limit.h"
#include "sluice/client/random.h"
#include "sluice/clock.h"

namespace sluice::cli {
namespace {

constexpr int64_t kMaxWorkers = 100'000;
constexpr double kMaxCalls = 20'000'000;  // arrivals in a run, spike included

double Seconds(Duration d) { return std::chrono::duration<double>(d).count(); }

enum class EventKind { kArrival, kCompletion, kDeadline };

struct Event {
  Duration at;
  int64_t seq;  // ties in time keep the order events were made in: runs are reproducible
  EventKind kind;
  int64_t call;
  bool operator>(const Event& o) const { return at != o.at ? at > o.at : seq > o.seq; }
};

struct Call {
  Duration arrival;
  Priority priority;
  Duration service;   // drawn on arrival: every policy sees the same calls
  bool done = false;  // answered or timed out: its outcome is counted
  std::optional<client::AdaptiveLimit::Permit> permit;
};

// One run. The client side holds the limit and the deadlines; the backend serves its queue in
// order, and serves calls whose client already gave up (it cannot know): that is the waste that
// makes goodput collapse.
class Simulation {
 public:
  Simulation(OverloadPolicy policy, const OverloadOptions& o)
      : o_(o), rng_(o.seed), free_workers_(o.workers) {
    r_.policy = policy;
    r_.seconds.resize(static_cast<size_t>(std::ceil(Seconds(o.duration + o.deadline))) + 1);
    if (policy == OverloadPolicy::kNone) return;
    client::AdaptiveLimitOptions lo;
    // The ceiling an operator would give a backend this size: the default 1000 would hold a
    // backend of thousands of workers under its capacity.
    lo.max_limit = std::max(lo.max_limit, 4 * o.workers);
    if (policy == OverloadPolicy::kFixed) {
      lo.initial_limit = lo.min_limit = lo.max_limit = o.fixed_limit;
    }
    limit_ = std::make_unique<client::AdaptiveLimit>(clock_, lo);
  }

  OverloadResult Run() {
    if (const Duration first = NextArrival(Duration{0}); first < o_.duration) {
      Push(first, EventKind::kArrival, -1);
    }
    const Duration end = o_.duration + o_.deadline;  // every call's outcome is known by then
    int64_t second = 0;
    while (!events_.empty() && events_.top().at <= end) {
      const Event e = events_.top();
      events_.pop();
      for (; Duration(std::chrono::seconds(second + 1)) <= e.at; ++second) CloseSecond(second);
      clock_.Set(FromNanos(e.at.count()));
      switch (e.kind) {
        case EventKind::kArrival:
          Arrive(e.at);
          break;
        case EventKind::kCompletion:
          Complete(e.at, e.call);
          break;
        case EventKind::kDeadline:
          Expire(e.call);
          break;
      }
    }
    for (; second < static_cast<int64_t>(r_.seconds.size()); ++second) CloseSecond(second);
    if (!latencies_.empty()) {
      const size_t k = (latencies_.size() * 99 + 99) / 100 - 1;  // nearest rank
      std::nth_element(latencies_.begin(), latencies_.begin() + static_cast<ptrdiff_t>(k),
                       latencies_.end());
      r_.p99 = latencies_[k];
    }
    return std::move(r_);
  }

 private:
  double RateAt(Duration t) const {
    const bool spike = t >= o_.spike_start && t < o_.spike_start + o_.spike_length;
    return o_.rate * (spike ? o_.spike_factor : 1.0);
  }

  // Poisson arrivals at the rate of the moment (the rate changes only at the spike's edges, and
  // an exponential gap is memoryless, so drawing it at the current rate is exact but for the
  // one gap that crosses an edge).
  Duration NextArrival(Duration now) {
    const double gap = -std::log(1.0 - rng_.Uniform01()) / RateAt(now);
    return now + Duration(static_cast<int64_t>(gap * 1e9));
  }

  void Push(Duration at, EventKind kind, int64_t call) { events_.push({at, seq_++, kind, call}); }

  OverloadSecond& SecondOf(Duration t) {
    return r_
        .seconds[std::min(static_cast<size_t>(t / std::chrono::seconds(1)), r_.seconds.size() - 1)];
  }

  void CloseSecond(int64_t s) {
    if (s >= static_cast<int64_t>(r_.seconds.size())) return;
    OverloadSecond& sec = r_.seconds[static_cast<size_t>(s)];
    sec.limit = limit_ ? limit_->limit() : 0;
    sec.backend = o_.workers - free_workers_ + static_cast<int64_t>(queue_.size());
  }

  Priority DrawPriority() {
    const double u = rng_.Uniform01() * (o_.mix[0] + o_.mix[1] + o_.mix[2]);
    if (u < o_.mix[0]) return kCritical;
    return u < o_.mix[0] + o_.mix[1] ? kNormal : kLow;
  }

  void Arrive(Duration now) {
    const Duration next = NextArrival(now);
    if (next < o_.duration) Push(next, EventKind::kArrival, -1);
    const Priority p = DrawPriority();
    // Drawn for every call, admitted or not, so that the stream of random numbers, hence the
    // calls, are the same under every policy.
    const double factor = 0.5 + rng_.Uniform01();  // 0.5x to 1.5x the mean
    const Duration service(static_cast<int64_t>(static_cast<double>(o_.service.count()) * factor));
    ++r_.by_priority[p].offered;
    ++SecondOf(now).offered;
    std::optional<client::AdaptiveLimit::Permit> permit;
    if (limit_) {
      permit = limit_->Acquire(kPriorityShare[p]);
      if (!permit) {
        ++r_.by_priority[p].shed;
        ++SecondOf(now).shed;
        return;
      }
    }
    const auto id = static_cast<int64_t>(calls_.size());
    calls_.push_back({now, p, service, false, std::move(permit)});
    Push(now + o_.deadline, EventKind::kDeadline, id);
    if (free_workers_ > 0) {
      --free_workers_;
      Serve(now, id);
    } else {
      queue_.push_back(id);
    }
  }

  void Serve(Duration now, int64_t id) {
    Push(now + calls_[static_cast<size_t>(id)].service, EventKind::kCompletion, id);
  }

  void Complete(Duration now, int64_t id) {
    Call& c = calls_[static_cast<size_t>(id)];
    if (!c.done) {
      c.done = true;
      ++r_.by_priority[c.priority].good;
      ++SecondOf(now).good;
      if (c.arrival >= o_.spike_start && c.arrival < o_.spike_start + o_.spike_length) {
        ++r_.spike_good;
      }
      latencies_.push_back(now - c.arrival);
      if (c.permit) c.permit->Success();
    }
    if (queue_.empty()) {
      ++free_workers_;
      return;
    }
    const int64_t next = queue_.front();
    queue_.pop_front();
    Serve(now, next);
  }

  // The client gives up: its slot is released as a drop (the backend, which never hears of it,
  // still holds the call in its queue or on a worker).
  void Expire(int64_t id) {
    Call& c = calls_[static_cast<size_t>(id)];
    if (c.done) return;
    c.done = true;
    ++r_.by_priority[c.priority].timed_out;
    ++SecondOf(c.arrival + o_.deadline).timed_out;
    latencies_.push_back(o_.deadline);
    if (c.permit) c.permit->Dropped();
  }

  const OverloadOptions& o_;
  ManualClock clock_;
  client::SeededRandom rng_;
  std::unique_ptr<client::AdaptiveLimit> limit_;
  std::priority_queue<Event, std::vector<Event>, std::greater<>> events_;
  int64_t seq_ = 0;
  std::vector<Call> calls_;
  std::deque<int64_t> queue_;
  int64_t free_workers_;
  std::vector<Duration> latencies_;
  OverloadResult r_;
};

}  // namespace

std::string_view OverloadPolicyName(OverloadPolicy policy) {
  switch (policy) {
    case OverloadPolicy::kNone:
      return "none";
    case OverloadPolicy::kFixed:
      return "fixed";
    case OverloadPolicy::kAdaptive:
      return "adaptive";
  }
  return "none";
}

Result<OverloadPolicy> ParseOverloadPolicy(std::string_view name) {
  for (OverloadPolicy p : kAllOverloadPolicies) {
    if (OverloadPolicyName(p) == name) return p;
  }
  return MakeError("unknown --policy '" + std::string(name) + "' (none, fixed or adaptive)");
}

Result<OverloadOptions> ValidateOverloadOptions(const OverloadOptions& o) {
  if (o.workers < 1 || o.workers > kMaxWorkers) {
    return MakeError("--workers must be 1.." + std::to_string(kMaxWorkers));
  }
  if (o.service <= Duration{0}) return MakeError("--service must be positive");
  if (!std::isfinite(o.rate) || o.rate <= 0) return MakeError("--rate must be positive");
  if (!std::isfinite(o.spike_factor) || o.spike_factor < 1) {
    return MakeError("--spike must be at least 1");
  }
  if (o.duration <= Duration{0}) return MakeError("--duration must be positive");
  if (o.spike_start < Duration{0} || o.spike_length < Duration{0} ||
      o.spike_start + o.spike_length > o.duration) {
    return MakeError("--spike-start and --spike-length must fall within --duration");
  }
  if (o.deadline <= Duration{0}) return MakeError("--deadline must be positive");
  if (o.fixed_limit < 1) return MakeError("--fixed-limit must be at least 1");
  for (double m : o.mix) {
    if (!std::isfinite(m) || m < 0) return MakeError("the priority mix must be numbers >= 0");
  }
  if (o.mix[0] + o.mix[1] + o.mix[2] <= 0)
    return MakeError("the priority mix must not be all zero");
  if (o.rate * o.spike_factor * Seconds(o.duration) > kMaxCalls) {
    return MakeError("--rate x --spike x --duration must stay under 20 million calls");
  }
  return o;
}

OverloadResult SimulateOverload(OverloadPolicy policy, const OverloadOptions& options) {
  return Simulation(policy, options).Run();
}

}  // namespace sluice::cli
