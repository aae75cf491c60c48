// ForwardingLimiter and ForwardingStore: the base of every store layer that wraps another store
// (the leased, batched, over-limit cache and region layers), in the spirit of LevelDB's
// EnvWrapper. Every virtual forwards to the inner object; a layer derives and overrides only
// what it changes. So a call a layer does not override reaches the inner store's same virtual
// -- TakeAsync stays the inner store's one atomic take, RefundAsync never blocks an I/O thread
// -- instead of Limiter's generic defaults. Internal (tests/store/forwarding_conformance_test.cc
// checks every layer against it).
//
// A layer's limiters are all ForwardingLimiters: a plain one for a limit the layer passes
// through, and one subclass of its own for the limits it serves (served_by_layer()).
#ifndef SLUICE_STORE_FORWARDING_H_
#define SLUICE_STORE_FORWARDING_H_

#include <cstddef>
#include <memory>
#include <span>
#include <type_traits>
#include <utility>
#include <vector>

#include "sluice/store.h"

namespace sluice::internal {

class ForwardingLimiter : public Limiter {
 public:
  // Passes every call to `inner`, which the store `owner` wraps made.
  ForwardingLimiter(const Store* owner, std::shared_ptr<Limiter> inner)
      : Limiter(owner), inner_(std::move(inner)) {}

  Decision Decide(std::string_view key, Timestamp now, int64_t cost) override {
    return Call([&](Limiter& l) { return l.Decide(key, now, cost); });
  }
  Decision Charge(std::string_view key, Timestamp now, int64_t cost) override {
    return Call([&](Limiter& l) { return l.Charge(key, now, cost); });
  }
  Decision DecideInZone(std::string_view key, Timestamp now, int64_t cost, bool charge,
                        const CalendarZone& zone) override {
    return Call([&](Limiter& l) { return l.DecideInZone(key, now, cost, charge, zone); });
  }
  void DecideAsync(std::string_view key, Timestamp now, int64_t cost,
                   DecisionCallback done) override {
    if (inner_ != nullptr) return inner_->DecideAsync(key, now, cost, std::move(done));
    std::shared_ptr<Limiter> held = Current();
    held->DecideAsync(key, now, cost,
                      [held, done = std::move(done)](const Decision& d) { done(d); });
  }
  void ChargeAsync(std::string_view key, Timestamp now, int64_t cost,
                   DecisionCallback done) override {
    if (inner_ != nullptr) return inner_->ChargeAsync(key, now, cost, std::move(done));
    std::shared_ptr<Limiter> held = Current();
    held->ChargeAsync(key, now, cost,
                      [held, done = std::move(done)](const Decision& d) { done(d); });
  }
  void DecideBatch(std::span<const DecideRequest> requests, std::span<Decision> out) override {
    Call([&](Limiter& l) { l.DecideBatch(requests, out); });
  }
  void Refund(std::string_view key, Timestamp at, Timestamp now, int64_t cost) override {
    Call([&](Limiter& l) { l.Refund(key, at, now, cost); });
  }
  void RefundAsync(std::string_view key, Timestamp at, Timestamp now, int64_t cost) override {
    Call([&](Limiter& l) { l.RefundAsync(key, at, now, cost); });
  }
  void RefundThen(std::string_view key, Timestamp at, Timestamp now, int64_t cost,
                  GivenBackCallback done) override {
    if (inner_ != nullptr) return inner_->RefundThen(key, at, now, cost, std::move(done));
    std::shared_ptr<Limiter> held = Current();
    held->RefundThen(key, at, now, cost, [held, done = std::move(done)](bool ok) { done(ok); });
  }
  void TakeAsync(std::string_view key, Timestamp now, const LeaseRequest& request,
                 LeaseCallback done) override {
    if (inner_ != nullptr) return inner_->TakeAsync(key, now, request, std::move(done));
    std::shared_ptr<Limiter> held = Current();
    held->TakeAsync(key, now, request,
                    [held, done = std::move(done)](const LeaseGrant& g) { done(g); });
  }
  void GiveBack(std::string_view key, int64_t stamp_us, Timestamp now, int64_t units) override {
    Call([&](Limiter& l) { l.GiveBack(key, stamp_us, now, units); });
  }
  void GiveBackThen(std::string_view key, int64_t stamp_us, Timestamp now, int64_t units,
                    GivenBackCallback done) override {
    if (inner_ != nullptr) return inner_->GiveBackThen(key, stamp_us, now, units, std::move(done));
    std::shared_ptr<Limiter> held = Current();
    held->GiveBackThen(key, stamp_us, now, units,
                       [held, done = std::move(done)](bool ok) { done(ok); });
  }
  void Reset(std::string_view key) override {
    Call([&](Limiter& l) { l.Reset(key); });
  }
  Result<Adjusted> Adjust(std::string_view key, Timestamp now, const Adjustment& change) override {
    return Call([&](Limiter& l) { return l.Adjust(key, now, change); });
  }
  // `old` is this layer's limiter of the same limit (the store's own, by owner()): the inner
  // limiter takes over its inner limiter's counters (itself: nothing, the inner store's call).
  void TakeOver(Limiter& old, Timestamp now) override {
    if (old.owner() != owner()) return;
    const std::shared_ptr<Limiter> old_inner = static_cast<ForwardingLimiter&>(old).Current();
    if (old_inner == nullptr) return;
    Call([&](Limiter& l) { l.TakeOver(*old_inner, now); });
  }
  StoreStats Stats() const override {
    return Call([](Limiter& l) { return l.Stats(); });
  }
  void ReportStats(StatsSink& sink, std::span<const StatLabel> limit_labels) const override {
    Call([&](Limiter& l) { l.ReportStats(sink, limit_labels); });
  }
  // A layer whose inner limiter is replaceable overrides it: the reference must outlive a call.
  const LimitSpec& spec() const override { return inner_->spec(); }

  // Whether the layer that made this limiter serves its limit itself (one of the layer's own
  // subclasses) rather than passing it through.
  virtual bool served_by_layer() const { return false; }

  // The inner limiter a DecideAll of the wrapping store hands this check to. A replaceable one
  // is also put in `held`, which the caller keeps until the inner store answers.
  Limiter* Unwrap(std::vector<std::shared_ptr<Limiter>>& held) const {
    if (inner_ != nullptr) return inner_.get();
    held.push_back(Current());
    return held.back().get();
  }

 protected:
  // For a layer whose inner limiter is replaced while in use (the region layer's leased parts):
  // no fixed inner limiter; every call asks Current() and holds what it returns until the call
  // answers.
  explicit ForwardingLimiter(const Store* owner) : Limiter(owner) {}
  virtual std::shared_ptr<Limiter> Current() const { return inner_; }

  // The fixed inner limiter (null when replaceable), shared with calls in flight that must
  // outlive this limiter.
  Limiter* inner() const { return inner_.get(); }
  const std::shared_ptr<Limiter>& shared_inner() const { return inner_; }

 private:
  // f(inner limiter), held for the call when it is replaceable.
  template <typename F>
  std::invoke_result_t<F, Limiter&> Call(F&& f) const {
    if (inner_ != nullptr) return f(*inner_);
    const std::shared_ptr<Limiter> held = Current();
    return f(*held);
  }

  const std::shared_ptr<Limiter> inner_;
};

// A request's checks as the inner store is asked them: this layer's limiters replaced by their
// inner ones (any other limiter by null: kInvalidRequest there), and the replaceable inner
// limiters held until the answer.
struct InnerRequest {
  std::vector<LimitCheck> checks;
  std::vector<std::shared_ptr<Limiter>> held;
};
InnerRequest UnwrapChecks(const Store* layer, std::span<const LimitCheck> checks);

// The synchronous DecideAll of every layer: DecideAllAsync, waited for.
void WaitForDecideAll(Store& store, std::span<const LimitCheck> checks, Timestamp now,
                      std::span<Decision> out);

// `Interface`: Store, or the public interface of the layer (LeasedStore, BatchedStore, ...).
template <typename Interface = Store>
class ForwardingStore : public Interface {
 public:
  explicit ForwardingStore(std::shared_ptr<Store> inner) : inner_(std::move(inner)) {}

  // A plain ForwardingLimiter: the limit passes through this layer.
  Result<std::unique_ptr<Limiter>> MakeLimiter(const LimitSpec& spec,
                                               const LimiterOptions& options) override {
    auto inner = inner_->MakeLimiter(spec, options);
    if (!inner) return std::unexpected(inner.error());
    return std::unique_ptr<Limiter>(std::make_unique<ForwardingLimiter>(this, std::move(*inner)));
  }
  void DecideAll(std::span<const LimitCheck> checks, Timestamp now, std::span<Decision> out) final {
    WaitForDecideAll(*this, checks, now, out);
  }
  void DecideAllAsync(std::span<const LimitCheck> checks, Timestamp now,
                      Store::DecideAllCallback done) override {
    InnerRequest inner = InnerChecks(checks);
    if (inner.held.empty()) return inner_->DecideAllAsync(inner.checks, now, std::move(done));
    inner_->DecideAllAsync(inner.checks, now,
                           [held = std::move(inner.held),
                            done = std::move(done)](std::span<const Decision> out) { done(out); });
  }
  bool Ready() override { return inner_->Ready(); }
  StoreStats Stats() const override { return inner_->Stats(); }
  void ReportStats(StatsSink& sink) const override { inner_->ReportStats(sink); }
  size_t MaxTransientLimiters() const override { return inner_->MaxTransientLimiters(); }
  // Permits pass through every layer: a concurrency limit refuses the syncs and scopes the
  // layers serve (docs/load-protection.md).
  Result<std::unique_ptr<PermitPool>> MakePermitPool(const PermitSpec& spec,
                                                     const LimiterOptions& options) override {
    return inner_->MakePermitPool(spec, options);
  }

 protected:
  Store& inner_store() const { return *inner_; }

  // The limiter this store made for the check; null for a null limiter or another store's.
  ForwardingLimiter* Mine(const LimitCheck& c) const {
    return c.limiter != nullptr && c.limiter->owner() == this
               ? static_cast<ForwardingLimiter*>(c.limiter)
               : nullptr;
  }
  // The same when it is one of the layer's own limiters, of type T (a layer has one such type).
  template <typename T>
  T* Own(const LimitCheck& c) const {
    ForwardingLimiter* mine = Mine(c);
    return mine != nullptr && mine->served_by_layer() ? static_cast<T*>(mine) : nullptr;
  }
  InnerRequest InnerChecks(std::span<const LimitCheck> checks) const {
    return UnwrapChecks(this, checks);
  }

 private:
  const std::shared_ptr<Store> inner_;
};

}  // namespace sluice::internal

#endif  // SLUICE_STORE_FORWARDING_H_
