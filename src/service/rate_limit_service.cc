#include "service/rate_limit_service.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <optional>
#include <span>
#include <utility>

#include "config/limit_unit.h"
#include "service/check_rules.h"
#include "service/limiter_set.h"
#include "service/permit_rules.h"
#include "service/permit_slots.h"
#include "service/permit_token.h"
#include "service/request_zones.h"
#include "service/unchecked_report.h"

namespace sluice::server {
namespace {

constexpr StatFamily kInFlight{
    "sluice_in_flight", StatKind::kGauge,
    "Permits of each concurrency limit held now (the memory store: all of them; a shared store: "
    "those this node granted and has not seen released or expired)."};
constexpr StatFamily kPermitsExpired{
    "sluice_permits_expired_total", StatKind::kCounter,
    "Permits that expired without a release: a holder that crashed or never released."};

// The part of a counter key after the limit id: the limiter is already per limit.
std::string_view IdentityOf(std::string_view key) {
  const size_t hash = key.find('#');
  return hash == std::string_view::npos ? key : key.substr(hash + 1);
}

DecisionResult ResultOf(const DescriptorStatus& s) {
  if (s.degraded) {
    return s.code == Code::kOk && !s.soft_over_limit && !s.shadow_over_limit
               ? DecisionResult::kFailedOpen
               : DecisionResult::kFailedClosed;
  }
  if (s.shadow_over_limit) return DecisionResult::kShadowOverLimit;
  if (s.soft_over_limit) return DecisionResult::kSoftOverLimit;
  return s.code == Code::kOk ? DecisionResult::kOk : DecisionResult::kOverLimit;
}

// Soft limits let the request through with a warning: like shadow ones, they "would have
// rejected" it.
UsageOutcome UsageOutcomeOf(DecisionResult result) {
  switch (result) {
    case DecisionResult::kOk:
      return UsageOutcome::kAllowed;
    case DecisionResult::kOverLimit:
      return UsageOutcome::kOver;
    case DecisionResult::kShadowOverLimit:
    case DecisionResult::kSoftOverLimit:
      return UsageOutcome::kShadowOver;
    case DecisionResult::kFailedOpen:
    case DecisionResult::kFailedClosed:
      break;
  }
  return UsageOutcome::kUnknown;
}

class Service final : public RateLimitService {
 public:
  Service(ServiceOptions options, Metrics* metrics, std::shared_ptr<Store> store)
      : options_(std::move(options)),
        metrics_(metrics),
        clock_(options_.clock != nullptr ? options_.clock : &own_clock_),
        store_(std::move(store)),
        unchecked_(metrics, options_.unchecked_warning, clock_),
        zones_(options_.zone_warning, clock_) {}

  Result<void> Install(std::shared_ptr<const Config> config) {
    const std::shared_ptr<const LimiterSet> previous = current_.load();
    auto set = LimiterSet::Install(std::move(config), previous.get(), *store_, clock_->Now());
    if (!set) return std::unexpected(set.error());
    current_.store(std::move(*set));
    return {};
  }

  Result<CheckResponse> Check(const CheckRequest& request) override;
  void CheckAsync(const CheckRequest& request, CheckCallback done) override;
  void AcquireAsync(const CheckRequest& request, AcquireCallback done) override;
  void ReleaseAsync(std::string_view permit, const DomainGate& may, PermitCallback done) override {
    CallPermit(SlotCall::kRelease, permit, may, std::move(done));
  }
  void RenewAsync(std::string_view permit, const DomainGate& may, PermitCallback done) override {
    CallPermit(SlotCall::kRenew, permit, may, std::move(done));
  }

  Result<void> Reload(std::shared_ptr<const Config> config) override {
    auto installed = Install(std::move(config));
    if (metrics_ != nullptr) metrics_->RecordReload(installed.has_value());
    return installed;
  }

  std::shared_ptr<const Config> config() const override { return current_.load()->config(); }

  StoreStats StoreTotals() const override { return store_->Stats(); }

  void ReportStats(StatsSink& sink) const override {
    ReportStoreStats(store_->Stats(), sink);
    store_->ReportStats(sink);
    zones_.ReportStats(sink);
    const std::shared_ptr<const LimiterSet> set = current_.load();
    if (set == nullptr) return;
    for (const auto& [name, domain] : set->config()->domains()) {
      for (const Limit& limit : domain.limits) {
        const StatLabel labels[] = {{"domain", domain.name}, {"limit", limit.metric_name}};
        if (const Limiter* l = set->Configured(limit.id)) l->ReportStats(sink, labels);
        if (const LimiterSet::Pool* p = set->PoolFor(limit.id)) {
          const PermitStats stats = p->pool->Stats(clock_->Now());
          sink.Add(kInFlight, labels, static_cast<double>(stats.in_flight));
          sink.Add(kPermitsExpired, labels, static_cast<double>(stats.expired));
        }
      }
    }
  }

  bool Ready() override {
    if (draining_.load(std::memory_order_acquire)) return false;  // no store round trip then
    return current_.load() != nullptr && store_->Ready();
  }

  void StartDraining() override { draining_.store(true, std::memory_order_release); }

  Result<CounterState> State(
      std::string_view domain,
      const std::vector<std::pair<std::string, std::string>>& entries) override {
    auto found = Find(domain, entries);
    if (!found) return std::unexpected(found.error());
    const Decision d =
        found->limiter->Decide(IdentityOf(found->match.counter_key), clock_->Now(), 0);
    CounterState state;
    state.counter_key = found->match.counter_key;
    state.limit = found->match.limit;
    state.config = found->set->config();
    state.remaining = d.remaining;
    state.reset_after = d.reset_after;
    return state;
  }

  std::expected<CounterChange, AdminFailure> Adjust(
      std::string_view domain, const std::vector<std::pair<std::string, std::string>>& entries,
      const Adjustment& change, const BeforeWrite& before_write) override {
    auto found = Find(domain, entries);
    if (!found) return std::unexpected(AdminFailure{false, found.error().message});
    if (auto valid = ValidateAdjustment(found->limiter->spec(), change); !valid) {
      return std::unexpected(AdminFailure{false, valid.error().message});
    }
    if (before_write) {
      if (auto ok = before_write(found->match.counter_key); !ok) {
        return std::unexpected(AdminFailure{true, ok.error().message});
      }
    }
    auto adjusted =
        found->limiter->Adjust(IdentityOf(found->match.counter_key), clock_->Now(), change);
    if (!adjusted) return std::unexpected(AdminFailure{true, adjusted.error().message});
    CounterChange out;
    for (CounterState* s : {&out.before, &out.after}) {
      s->counter_key = found->match.counter_key;
      s->limit = found->match.limit;
      s->config = found->set->config();
    }
    out.before.remaining = adjusted->before.remaining;
    out.before.reset_after = adjusted->before.reset_after;
    out.after.remaining = adjusted->after.remaining;
    out.after.reset_after = adjusted->after.reset_after;
    return out;
  }

  Result<void> Reset(std::string_view domain,
                     const std::vector<std::pair<std::string, std::string>>& entries) override {
    auto found = Find(domain, entries);
    if (!found) return std::unexpected(found.error());
    found->limiter->Reset(IdentityOf(found->match.counter_key));
    return {};
  }

 private:
  struct Found {
    std::shared_ptr<const LimiterSet> set;
    MatchResult match;
    Limiter* limiter = nullptr;
    std::shared_ptr<Limiter> hold;  // an override limiter: kept alive while it is used
  };

  Result<Found> Find(std::string_view domain,
                     const std::vector<std::pair<std::string, std::string>>& entries) {
    Found found;
    found.set = current_.load();
    std::vector<DescriptorEntry> view;
    std::deque<std::string> digests;  // long values, counted by digest as Check() counts them
    for (const auto& [k, v] : entries) view.push_back({k, CountedValue(v, digests.emplace_back())});
    auto m = Match(*found.set->config(), domain, view);
    if (!m) return std::unexpected(m.error());
    m->counter_key = BoundedCounterKey(std::move(m->counter_key));
    if (m->limit == nullptr || m->limit->kind != LimitKind::kLimited) {
      return MakeError("no counted limit matches that descriptor");
    }
    auto limiter = found.set->For(*m->limit);
    if (!limiter) return std::unexpected(limiter.error());
    found.match = std::move(*m);
    found.limiter = limiter->limiter;
    found.hold = std::move(limiter->hold);
    return found;
  }

  void Record(std::string_view domain, Timestamp now, const DescriptorStatus& s) {
    if (s.limit == nullptr || s.replaced) return;
    if (metrics_ == nullptr && options_.usage == nullptr) return;
    const int64_t capacity = s.limit->kind == LimitKind::kLimited ? s.limit->spec.Capacity() : 0;
    const int64_t used = capacity - std::clamp<int64_t>(s.remaining, 0, capacity);
    const DecisionResult result = ResultOf(s);
    if (options_.usage != nullptr && capacity > 0) {
      options_.usage->Record(domain, s.limit->metric_name, IdentityOf(s.counter_key), now, capacity,
                             used, UsageOutcomeOf(result));
    }
    if (metrics_ == nullptr) return;
    std::string_view label = s.limit->metric_name;
    std::string detailed;
    if (s.limit->detailed_metric) {
      const size_t hash = s.counter_key.find('#');
      if (hash != std::string::npos) {
        detailed = s.limit->metric_name + "." + s.counter_key.substr(hash + 1);
        label = detailed;
      }
    }
    // A concurrency limit without a rate limit is as used as its key's slots are.
    const double fraction = capacity > 0 ? static_cast<double>(used) / static_cast<double>(capacity)
                            : s.slot && s.limit->concurrency
                                ? static_cast<double>(s.in_flight) /
                                      static_cast<double>(s.limit->concurrency->spec.max_in_flight)
                                : (s.over_limit ? 1.0 : 0.0);
    metrics_->RecordDecision(domain, label, result, fraction);
    const bool near = !s.over_limit && fraction >= metrics_->near_limit_ratio();
    if (s.over_limit || near) {
      metrics_->RecordHeavyHitter(domain, s.counter_key, s.over_limit, near);
    }
    if (s.degraded) metrics_->RecordStoreError();
  }

  struct Checking;
  struct Async;
  // A check up to the store: validated, matched, the limits to decide collected, and for an
  // acquire the concurrency slots to take.
  Result<void> Prepare(const CheckRequest& request, Checking& c, bool acquire);
  // The slot of descriptor `i`'s concurrency limit, for an acquire; a check skips it.
  void AddSlot(Checking& c, size_t i, const Limit& limit, int64_t reserve,
               UncheckedCounts& unchecked) const;
  // The rate limits of a prepared check, then state->finished.
  void Decide(const std::shared_ptr<Async>& state);
  // A release or renew of every slot `text` names.
  void CallPermit(SlotCall call, std::string_view text, const DomainGate& may, PermitCallback done);
  // The enforced decisions in (the shadow and soft limits are observed after them).
  static void ApplyEnforced(Checking& c, std::span<const Decision> out);
  CheckResponse Finish(Checking& c);

  const ServiceOptions options_;
  Metrics* const metrics_;
  MonotonicClock own_clock_;
  const Clock* const clock_;
  const std::shared_ptr<Store> store_;
  std::atomic<std::shared_ptr<const LimiterSet>> current_;
  std::atomic<bool> draining_{false};
  UncheckedReport unchecked_;
  const PermitIds ids_{};
  RequestZones zones_;
};

// A check of one status against the store.
struct Pending {
  size_t status;
  Limiter* limiter;
  std::string_view identity;  // in the status's counter_key
  int64_t hits;
  bool charge;  // Limiter::Charge: over_limit_hits count, or a charge request
  bool quota;   // the limit's quota_mode
  // Hits to leave free (priority shedding, LimitCheck::reserve); 0 without a shed rule.
  int64_t reserve;
  // A calendar limit's zone for this request (RequestZones); unset: the rule's own.
  std::optional<CalendarZone> zone;
};

// A decision as the request's priority sees it: `remaining` is what that priority may still take,
// the free hits beyond its reserve, so that a client pacing itself on it (RateLimit headers,
// x-ratelimit-remaining) is not told of hits kept for others.
Decision ForPriority(Decision d, int64_t reserve) {
  d.remaining = std::max<int64_t>(0, d.remaining - reserve);
  return d;
}

int64_t SaturatingAdd(int64_t a, int64_t b) { return a > INT64_MAX - b ? INT64_MAX : a + b; }

// The priority a request has for a descriptor: the entry it carries (the domain's priority_key,
// stripped before matching) or else the request's own; nullopt for none.
std::optional<std::string_view> PriorityOf(const MatchResult& m, const Domain* domain,
                                           const CheckRequest& request) {
  if (const std::string* entry =
          domain == nullptr ? nullptr : FindAttribute(m.attributes, domain->priority_key)) {
    return *entry;
  }
  if (request.priority) return *request.priority;
  return std::nullopt;
}

// A limit's reserve for a request: its shed rule applied to the request's priority.
int64_t ReserveFor(const Limit& limit, const MatchResult& m, const Domain* domain,
                   const CheckRequest& request) {
  if (!limit.shed || limit.kind != LimitKind::kLimited) return 0;
  return ShedReserve(*limit.shed, PriorityOf(m, domain, request), limit.spec.Capacity());
}

// The slots an acquire must leave free in a concurrency limit (PermitAcquire::reserve).
int64_t SlotReserveFor(const Limit& limit, const MatchResult& m, const Domain* domain,
                       const CheckRequest& request) {
  if (!limit.concurrency || !limit.concurrency->shed) return 0;
  return ShedReserve(*limit.concurrency->shed, PriorityOf(m, domain, request),
                     limit.concurrency->spec.max_in_flight);
}

void Apply(DescriptorStatus& s, const Decision& d) {
  s.remaining = d.remaining;
  s.reset_after = d.reset_after;
  s.retry_after = d.allowed ? Duration(0) : d.retry_after;
  // Hits that can never pass (more than the capacity) leave a fresh key untouched, so its time
  // to a full reset is 0, which a client (Envoy's duration_until_reset, RateLimit's t=) reads
  // as "retry now". Such an answer carries the wait Retry-After gives it: one unit.
  if (!d.allowed && d.retry_after == kNever && s.reset_after <= Duration(0) && s.limit != nullptr) {
    s.reset_after = s.limit->period.length;
  }
  s.delay = d.allowed && s.mode == Mode::kEnforce ? d.delay : Duration(0);
  // || : an acquire's slot (permit_rules.h) may have said so already.
  s.degraded = s.degraded || d.degraded;
  s.over_limit = s.over_limit || !d.allowed;
  if (!d.allowed) {
    if (s.mode == Mode::kShadow) s.shadow_over_limit = true;
    if (s.mode == Mode::kSoft) s.soft_over_limit = true;
    if (s.mode == Mode::kEnforce) s.code = Code::kOverLimit;
  }
}

// One check between its phases (synchronous, or across asynchronous store calls).
struct Service::Checking {
  Timestamp started;
  Timestamp now;
  std::string domain;
  std::shared_ptr<const LimiterSet> set;  // keeps the configured limits' limiters alive
  // Keeps the override limiters alive: the set may drop one (least recently used) meanwhile.
  std::vector<std::shared_ptr<Limiter>> overrides;
  CheckResponse response;
  std::vector<Pending> enforced;   // decided together, all or nothing
  std::vector<Pending> observing;  // shadow and soft: only observe
  bool rejected = false;
  bool charge = false;             // CheckRequest::charge
  std::vector<LimitCheck> checks;  // of `enforced`
  bool settled = false;  // the rules answered (check_rules.h): nothing to decide or record
  bool acquire = false;  // POST /v1/acquire: also takes `slots`
  std::vector<PermitSlot> slots;
  std::vector<size_t> slot_status;              // the status of each slot
  std::vector<FailureMode> slot_failure_modes;  // each slot's limit's
  bool slots_asked = false;                     // the store was asked for them
  std::vector<PermitAnswer> slot_answers;       // the store's, once asked
};

struct Service::Async {
  Checking c;
  std::function<void(CheckResponse)> finished;
  std::atomic<size_t> observing{0};
};

void Service::AddSlot(Checking& c, size_t i, const Limit& limit, int64_t reserve,
                      UncheckedCounts& unchecked) const {
  const LimiterSet::Pool* pool = c.set->PoolFor(limit.id);
  if (!c.acquire || pool == nullptr) {
    unchecked.Add(Unchecked::kConcurrency);
    return;
  }
  const DescriptorStatus& s = c.response.statuses[i];
  constexpr CheckLimits kSlotKeyLimits{.max_counter_key_bytes = kMaxPermitKeyBytes};
  std::string key = pool->store_id + "#" + std::string(IdentityOf(s.counter_key));
  c.slots.push_back({pool->pool, BoundedCounterKey(std::move(key), kSlotKeyLimits), reserve});
  c.slot_status.push_back(i);
  c.slot_failure_modes.push_back(limit.concurrency->failure_mode);
}

Result<void> Service::Prepare(const CheckRequest& request, Checking& c, bool acquire) {
  c.started = clock_->Now();
  c.acquire = acquire;
  c.set = current_.load();
  const LimiterSet& set = *c.set;
  // The one lookup of the request's domain: admission, matching and zones all take it.
  const Domain* domain = set.config()->FindDomain(request.domain);
  auto admitted = AdmitCheck(request, domain);
  if (!admitted) return std::unexpected(admitted.error());
  if (*admitted == Admission::kLimitNothing) {
    c.response = LimitNothing(request);
    c.settled = true;
    return {};
  }
  CheckResponse& response = c.response;
  response.config = set.config();
  response.statuses.resize(request.descriptors.size());
  std::vector<MatchResult> matches(request.descriptors.size());
  std::vector<const Limit*> matched(request.descriptors.size(), nullptr);
  std::vector<std::optional<CalendarZone>> zones(request.descriptors.size());
  std::vector<DescriptorEntry> view;
  std::deque<std::string> digests;  // of long values: `view` points into them
  UncheckedCounts unchecked;
  for (size_t i = 0; i < request.descriptors.size(); ++i) {
    const CheckDescriptor& d = request.descriptors[i];
    // Past the bounds: answered as a descriptor no rule matches (matches[i] stays empty).
    if (const Unchecked why = UncheckedReason(request, i); why != Unchecked::kNo) {
      unchecked.Add(why);
      continue;
    }
    view.clear();
    digests.clear();
    for (const auto& [k, v] : d.entries) {
      const bool long_value = v.size() > kCheckLimits.max_value_bytes;
      view.push_back({k, long_value ? CountedValue(v, digests.emplace_back()) : v});
    }
    const LimitOverride* override = d.limit_override ? &*d.limit_override : nullptr;
    auto m = Match(*domain, view, override);  // admitted: the domain is the config's
    if (!m) return std::unexpected(m.error());
    if (m->limit != nullptr && m->limit->spec.IsCalendar()) {
      auto zone =
          zones_.For(*domain, *m->limit, view, m->attributes, request.caller != Caller::kEnvoy);
      if (!zone) return std::unexpected(zone.error());
      zones[i] = *zone;
    }
    matches[i] = std::move(*m);
    matches[i].counter_key = BoundedCounterKey(std::move(matches[i].counter_key));
    matched[i] = matches[i].limit;
  }
  // Only the checked descriptors can have a limit (ReplacedLimits is quadratic in what it is
  // given).
  const std::vector<bool> replaced = ReplacedLimits(
      std::span(matched).first(std::min(matched.size(), kCheckLimits.max_descriptors)));

  for (size_t i = 0; i < matches.size(); ++i) {
    DescriptorStatus& s = response.statuses[i];
    MatchResult& m = matches[i];
    s.limit = m.limit;
    s.owned = std::move(m.owned);
    s.counter_key = std::move(m.counter_key);
    if (m.limit == nullptr) continue;
    s.mode = m.limit->mode;
    s.replaced = replaced[i];
    if (!s.replaced && m.limit->concurrency) {
      AddSlot(c, i, *m.limit, SlotReserveFor(*m.limit, m, domain, request), unchecked);
    }
    if (s.replaced || m.limit->kind == LimitKind::kUnlimited) continue;
    const int64_t hits = request.descriptors[i].hits.value_or(request.hits);
    if (m.limit->kind == LimitKind::kBlocked) {
      Decision blocked;
      blocked.retry_after = kNever;
      // Nothing replenishes a block; like envoyproxy/ratelimit, report the end of the current
      // unit window (epoch-aligned) rather than 0, which reads as "retry now" to a client.
      const int64_t unit_ns = m.limit->period.length.count();
      blocked.reset_after = Duration(unit_ns - c.started.time_since_epoch().count() % unit_ns);
      Apply(s, blocked);
      c.rejected = c.rejected || s.code == Code::kOverLimit;
      continue;
    }
    auto limiter = set.For(*m.limit);
    if (!limiter) return std::unexpected(limiter.error());
    if (limiter->hold != nullptr) c.overrides.push_back(std::move(limiter->hold));
    // A shed rule drops hits over its thresholds whatever --over-limit-hits says (the config
    // refuses it beside over_limit_hits: count): a charged hit cannot be shed.
    const OverLimitHits server_default =
        m.limit->shed ? OverLimitHits::kDrop : options_.over_limit_hits;
    const bool charge = request.charge ||
                        m.limit->over_limit_hits.value_or(server_default) == OverLimitHits::kCount;
    const bool enforced = s.mode == Mode::kEnforce;
    const int64_t reserve = charge ? 0 : ReserveFor(*m.limit, m, domain, request);
    (enforced ? c.enforced : c.observing)
        .push_back({i, limiter->limiter, IdentityOf(s.counter_key), hits, charge,
                    enforced && m.limit->quota_mode, reserve, zones[i]});
  }
  unchecked_.Record(unchecked);
  c.domain = request.domain;
  c.charge = request.charge;
  c.now = clock_->Now();
  c.checks.reserve(c.enforced.size());
  for (const Pending& p : c.enforced) {
    c.checks.push_back({.limiter = p.limiter,
                        .key = p.identity,
                        .cost = p.hits,
                        .charge = p.charge,
                        .quota = p.quota,
                        .reserve = p.reserve,
                        .zone = p.zone ? &*p.zone : nullptr});
  }
  return {};
}

void Service::ApplyEnforced(Checking& c, std::span<const Decision> out) {
  for (size_t k = 0; k < c.enforced.size(); ++k) {
    Apply(c.response.statuses[c.enforced[k].status], ForPriority(out[k], c.enforced[k].reserve));
  }
  // The store's rule (quota checks refuse only together), which is also what it gave back by.
  c.rejected = c.rejected || RequestRefused(c.checks, out);
}

CheckResponse Service::Finish(Checking& c) {
  if (c.charge) {
    // A charge is not a question: what was done is counted, and the answer says what remains.
    c.rejected = false;
    for (DescriptorStatus& s : c.response.statuses) s.code = Code::kOk;
  }
  c.response.overall = c.rejected ? Code::kOverLimit : Code::kOk;
  // A refused request was given back to every queue it entered: it waits for none. A charge is
  // for work already done: nothing to hold.
  for (DescriptorStatus& s : c.response.statuses) {
    // A refused slot's wait is the status's too (retry_after_ms), beside its rate limit's.
    if (s.slot_refused) s.retry_after = std::max(s.retry_after, s.slot_retry_after);
    if (c.rejected || c.charge) s.delay = Duration(0);
    c.response.delay = std::max(c.response.delay, s.delay);
  }
  for (const DescriptorStatus& s : c.response.statuses) Record(c.domain, c.now, s);
  if (metrics_ != nullptr) {
    const Duration took = clock_->Now() - c.started;
    c.acquire ? metrics_->RecordAcquireDuration(took) : metrics_->RecordDuration(took);
  }
  return std::move(c.response);
}

// Check is CheckAsync, waited for: one decision path. With the memory store the answer is in
// before CheckAsync returns; with Redis it comes from the store's I/O thread.
Result<CheckResponse> Service::Check(const CheckRequest& request) {
  struct Wait {
    std::mutex mu;
    std::condition_variable answered;
    std::optional<Result<CheckResponse>> response;
  };
  auto wait = std::make_shared<Wait>();
  CheckAsync(request, [wait](Result<CheckResponse> response) {
    std::lock_guard<std::mutex> lock(wait->mu);
    wait->response = std::move(response);
    wait->answered.notify_one();
  });
  std::unique_lock<std::mutex> lock(wait->mu);
  wait->answered.wait(lock, [&] { return wait->response.has_value(); });
  return std::move(*wait->response);
}

// The enforced limits are decided together with Store::DecideAllAsync, then the observing ones
// with Limiter::DecideAsync (all at once; the last answer finishes the check). Whatever thread
// answers last runs `done`: with the memory store, this one, before CheckAsync returns.
void Service::CheckAsync(const CheckRequest& request, CheckCallback done) {
  auto state = std::make_shared<Async>();
  if (auto prepared = Prepare(request, state->c, /*acquire=*/false); !prepared) {
    return done(std::unexpected(prepared.error()));
  }
  if (state->c.settled) return done(std::move(state->c.response));
  state->finished = [done = std::move(done)](CheckResponse response) { done(std::move(response)); };
  Decide(state);
}

void Service::Decide(const std::shared_ptr<Async>& state) {
  auto observe = [this, state] {
    Checking& c = state->c;
    if (c.observing.empty()) return state->finished(Finish(c));
    state->observing.store(c.observing.size());
    for (const Pending& p : c.observing) {
      auto observed = [this, state, &p](const Decision& decision) {
        Checking& check = state->c;
        Decision d = decision;
        // Shadow and soft limits observe without shedding: the request passes whatever they
        // say, so its hits count. Over means it would not have fitted with its reserve: what
        // is left after it (or, asked at cost 0 for a rejected request, its hits too) is
        // below the reserve.
        if (!p.charge) {
          const int64_t needed = check.rejected ? SaturatingAdd(p.hits, p.reserve) : p.reserve;
          d.allowed = d.allowed && d.remaining >= needed;
        }
        // Each answer writes its own status.
        Apply(check.response.statuses[p.status], ForPriority(d, p.reserve));
        if (state->observing.fetch_sub(1, std::memory_order_acq_rel) == 1) {
          state->finished(Finish(check));
        }
      };
      if (p.zone) {
        // A calendar limit in the request's zone: the store's one zoned entry, for one check.
        const LimitCheck one{.limiter = p.limiter,
                             .key = p.identity,
                             .cost = p.charge || !c.rejected ? p.hits : 0,
                             .charge = p.charge,
                             .zone = &*p.zone};
        store_->DecideAllAsync(
            std::span(&one, 1), c.now,
            [observed = std::move(observed)](std::span<const Decision> out) { observed(out[0]); });
      } else if (p.charge) {
        // Counting every hit (over_limit_hits: count, or a charge request) counts this one
        // too, whatever the enforced limits said.
        p.limiter->ChargeAsync(p.identity, c.now, p.hits, std::move(observed));
      } else {
        // A rejected request never reaches the backend, so shadow and soft limits only look
        // (cost 0: nothing is counted) at whether it would have fit.
        p.limiter->DecideAsync(p.identity, c.now, c.rejected ? 0 : p.hits, std::move(observed));
      }
    }
  };
  if (state->c.checks.empty()) return observe();
  store_->DecideAllAsync(state->c.checks, state->c.now,
                         [state, observe](std::span<const Decision> out) {
                           ApplyEnforced(state->c, out);
                           observe();
                         });
}

// The slots first, all at once; then, if every one admitted, the rate limits as a check decides
// them. A refusal anywhere gives back every slot (permit_rules.h: all or nothing).
void Service::AcquireAsync(const CheckRequest& request, AcquireCallback done) {
  if (auto ok = AdmitAcquire(request); !ok) return done(std::unexpected(ok.error()));
  auto state = std::make_shared<Async>();
  Checking& c = state->c;
  if (auto prepared = Prepare(request, c, /*acquire=*/true); !prepared) {
    return done(std::unexpected(prepared.error()));
  }
  if (c.settled) return done(AcquireResponse{std::move(c.response), {}, Duration(0)});
  if (auto ok = AdmitSlotCount(c.slots.size()); !ok) return done(std::unexpected(ok.error()));
  auto random = ids_.Next();
  if (!random) return done(std::unexpected(random.error()));
  const PermitToken token{*random, {}};
  const std::string id = token.Id();
  // `c` is the state that owns this callback, so it lives as long.
  state->finished = [this, &c, token, id, done = std::move(done)](CheckResponse response) {
    AcquireResponse out{std::move(response), {}, Duration(0)};
    if (out.check.overall != Code::kOk && c.slots_asked) {
      // Releasing a slot that was not taken changes nothing: every slot is given back. The
      // answer waits for the store to have them back: a client retrying at once after the 429
      // (another connection to a shared store) must not find them still held.
      GiveBackSlots(out.check);
      auto answer = std::make_shared<AcquireResponse>(std::move(out));
      CallSlots(SlotCall::kRelease, c.slots, id, clock_->Now(),
                [answer, done](std::vector<PermitAnswer>) { done(std::move(*answer)); });
      return;
    }
    if (out.check.overall == Code::kOk) {
      // The permit names the slots it may hold (a refused shadow slot holds none); its ttl is
      // the shortest of theirs.
      PermitToken held = token;
      Duration ttl = Duration::max();
      for (size_t k = 0; k < c.slot_answers.size(); ++k) {
        if (!SlotNamed(c.slot_answers[k])) continue;
        held.keys.push_back(c.slots[k].key);
        ttl = std::min(ttl, c.slots[k].pool->spec().ttl);
      }
      if (!held.keys.empty()) {
        out.permit = EncodePermit(held);
        out.permit_ttl = ttl;
      }
    }
    done(std::move(out));
  };
  // A blocking rule has refused already: no slot is asked for.
  if (c.rejected || c.slots.empty()) return Decide(state);
  c.slots_asked = true;
  CallSlots(SlotCall::kAcquire, c.slots, id, c.now, [this, state](std::vector<PermitAnswer> got) {
    Checking& check = state->c;
    for (size_t k = 0; k < got.size(); ++k) {
      DescriptorStatus& s = check.response.statuses[check.slot_status[k]];
      const bool refuses = ApplySlot(s, got[k], check.slot_failure_modes[k]);
      check.rejected = check.rejected || refuses;
    }
    check.slot_answers = std::move(got);
    if (check.rejected) {
      // The rate limits are only looked at (cost 0), as a rejected check's shadow limits are.
      for (Pending& p : check.enforced) {
        p.charge = false;
        check.observing.push_back(p);
      }
      check.enforced.clear();
      check.checks.clear();
    }
    Decide(state);
  });
}

void Service::CallPermit(SlotCall call, std::string_view text, const DomainGate& may,
                         PermitCallback done) {
  auto token = DecodePermit(text);
  if (!token) return done(std::unexpected(token.error()));
  const std::shared_ptr<const LimiterSet> set = current_.load();
  std::vector<PermitSlot> slots;
  // A renew extends every slot to its pool's ttl from the store's now. Not read back from the
  // answers: their expiries are rounded up to the microsecond, their times down, and a ttl a
  // microsecond long would be answered a millisecond long, past the store's expiry.
  Duration ttl = Duration::max();
  for (size_t i = 0; i < token->keys.size(); ++i) {
    const std::string& key = token->keys[i];
    // A descriptor sent twice in one acquire held one slot (the store grants an id it holds
    // without a second): it is released or renewed once, or the second call would find it gone.
    if (std::find(token->keys.begin(), token->keys.begin() + i, key) != token->keys.begin() + i) {
      continue;
    }
    // The slot's domain is its pool's limit's, in the same snapshot the slot is called in: the
    // key's text is the client's and is not read for it.
    const LimiterSet::Pool* pool = set->PoolByStoreId(PoolIdOf(key));
    if (pool != nullptr && may && !may(pool->limit->domain)) {
      return done(PermitResult{.forbidden = true});
    }
    slots.push_back({pool != nullptr ? pool->pool : nullptr, key});
    if (pool != nullptr) ttl = std::min(ttl, pool->pool->spec().ttl);
  }
  CallSlots(call, std::move(slots), token->Id(), clock_->Now(),
            [call, ttl, done = std::move(done)](std::vector<PermitAnswer> answers) {
              PermitResult r;
              r.done = !answers.empty();
              for (const PermitAnswer& a : answers) {
                r.done = r.done && a.granted;
                r.degraded = r.degraded || a.degraded;
                r.store_time_us = std::max(r.store_time_us, a.store_time_us);
              }
              if (r.done && call == SlotCall::kRenew) r.permit_ttl = ttl;
              done(r);
            });
}

}  // namespace

Result<std::unique_ptr<RateLimitService>> RateLimitService::Create(
    std::shared_ptr<const Config> config, std::shared_ptr<Store> store, ServiceOptions options,
    Metrics* metrics) {
  if (config == nullptr) return MakeError("no config");
  if (store == nullptr) return MakeError("no store");
  auto service = std::make_unique<Service>(std::move(options), metrics, std::move(store));
  if (auto installed = service->Install(std::move(config)); !installed) {
    return std::unexpected(installed.error());
  }
  return std::unique_ptr<RateLimitService>(std::move(service));
}

}  // namespace sluice::server
