#include "sluice/client/pacer.h"

#include <algorithm>

namespace sluice::client {

void Pacer::Observe(const ServerHints& hints, Timestamp now) {
  std::lock_guard lock(mu_);
  if (hints.retry_after) hold_until_ = std::max(hold_until_, now + hints.retry_after->wait);
  for (const QuotaPolicy& q : hints.policies) {
    Policy& p = policies_[q.name];
    p.quota = q.quota;
    p.window = q.window;
  }
  for (const QuotaState& s : hints.states) {
    Policy& p = policies_[s.name];
    p.remaining = s.remaining;
    p.reset_at = s.reset ? std::optional<Timestamp>(now + s.reset->wait) : std::nullopt;
  }
}

Timestamp Pacer::PolicyNext(Policy& p, Timestamp now) const {
  if (p.reset_at && now >= *p.reset_at) {
    // Replenished: the whole quota is there again, if the server said how much it is.
    p.remaining = p.quota;
    p.reset_at.reset();
  }
  const Timestamp last = last_send_.value_or(Timestamp::min());
  if (p.remaining) {
    if (*p.remaining <= 0) {
      if (p.reset_at) return *p.reset_at;
      // Spent, and no word on when it comes back: one request per w / q, or per second.
      const Duration gap =
          p.quota && *p.quota > 0 && p.window ? *p.window / *p.quota : std::chrono::seconds(1);
      return last_send_ ? *last_send_ + gap : now;
    }
    // r > 0, fresh from the last answer: the next request fits whenever it goes; the spacing
    // only keeps the client from spending it all in a burst and then waiting. Spread what
    // remains until the reset, but never slower than the policy's own rate (w / q): a sliding
    // window gives units back before it is whole again.
    if (p.reset_at && last_send_) {
      Duration gap = (*p.reset_at - last) / *p.remaining;
      if (p.quota && *p.quota > 0 && p.window) gap = std::min(gap, *p.window / *p.quota);
      return last + gap;
    }
  }
  if (p.quota && p.window && last_send_) {
    if (*p.quota <= 0) return p.reset_at.value_or(*last_send_ + *p.window);
    if (!p.remaining || !p.reset_at) return last + *p.window / *p.quota;
  }
  return now;
}

Timestamp Pacer::NextSendTime(Timestamp now) {
  std::lock_guard lock(mu_);
  Timestamp next = std::max(now, hold_until_);
  for (auto& [name, p] : policies_) next = std::max(next, PolicyNext(p, now));
  return next;
}

void Pacer::OnSend(Timestamp now) {
  std::lock_guard lock(mu_);
  last_send_ = now;
  for (auto& [name, p] : policies_) {
    if (p.remaining && *p.remaining > 0) --*p.remaining;
  }
}

}  // namespace sluice::client
