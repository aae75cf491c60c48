// gRPC's callback API rather than the async one the Envoy service uses: a Watch is a long-lived
// stream whose writes are driven by the poller and by Shutdown() from outside gRPC's threads,
// which reactors allow from any thread, with no completion-queue tags to route. Its calls are
// few (probes), so they do not need the RLS calls' fixed thread pool.
//
// A Watch is owned by a shared_ptr in the registry until gRPC calls OnDone; the poller and
// Shutdown() work on copies, so a watcher they hold is never freed under them. Reactor
// operations (StartWrite, Finish) are started with no lock held: gRPC may run a reaction inline.
#include "grpc/health_service.h"

#include <grpcpp/grpcpp.h>

#include <atomic>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <utility>
#include <vector>

#include "grpc/calls_per_connection.h"
#include "grpc/health/v1/health.grpc.pb.h"

namespace sluice::server {

namespace hv1 = ::grpc::health::v1;
using ServingStatus = hv1::HealthCheckResponse::ServingStatus;

bool IsHealthServiceName(std::string_view name) {
  return name.empty() || name == "ratelimit" ||
         name == "envoy.service.ratelimit.v3.RateLimitService";
}

namespace {

// A call's place in its connection's stream count: entered on arrival, left when gRPC is done
// with the call.
class StreamSlot {
 public:
  StreamSlot(const HealthServiceOptions& options, const grpc::CallbackServerContext& ctx)
      : calls_(options.calls) {
    if (calls_ == nullptr) return;
    fd_ = ConnectionOfPeer(ctx.peer());
    if (fd_ < 0) return;
    if (!calls_->Enter(fd_)) {
      over_ = true;
      if (options.cut) options.cut(fd_);
    }
  }
  ~StreamSlot() {
    if (calls_ != nullptr && fd_ >= 0) calls_->Leave(fd_);
  }
  StreamSlot(const StreamSlot&) = delete;
  StreamSlot& operator=(const StreamSlot&) = delete;

  // More calls in flight on this connection than a client honouring the cap could have.
  bool over() const { return over_; }

 private:
  CallsPerConnection* calls_;
  int fd_ = -1;
  bool over_ = false;
};

grpc::Status TooManyStreams() {
  return {grpc::StatusCode::RESOURCE_EXHAUSTED, "too many concurrent streams on this connection"};
}

}  // namespace

struct HealthService::Impl final : hv1::Health::CallbackService {
  class CheckCall;
  class Watcher;

  explicit Impl(HealthServiceOptions o) : options(std::move(o)) {}

  ServingStatus Current() const {
    if (stopping.load(std::memory_order_acquire)) return hv1::HealthCheckResponse::NOT_SERVING;
    return options.ready() ? hv1::HealthCheckResponse::SERVING
                           : hv1::HealthCheckResponse::NOT_SERVING;
  }

  grpc::ServerUnaryReactor* Check(grpc::CallbackServerContext* ctx,
                                  const hv1::HealthCheckRequest* request,
                                  hv1::HealthCheckResponse* response) override;
  grpc::ServerWriteReactor<hv1::HealthCheckResponse>* Watch(
      grpc::CallbackServerContext* ctx, const hv1::HealthCheckRequest* request) override;

  void Poll();
  void Remove(const Watcher* w);
  std::vector<std::shared_ptr<Watcher>> Snapshot() const;

  const HealthServiceOptions options;
  std::atomic<bool> stopping{false};
  mutable std::mutex mu;  // guards the registry and known_watchers
  std::condition_variable wake;
  std::unordered_map<const Watcher*, std::shared_ptr<Watcher>> watchers;
  size_t known_watchers = 0;  // watchers of a served name: the poller runs only while any
  std::thread poller;
};

class HealthService::Impl::CheckCall final : public grpc::ServerUnaryReactor {
 public:
  CheckCall(Impl* impl, const grpc::CallbackServerContext& ctx,
            const hv1::HealthCheckRequest& request, hv1::HealthCheckResponse* response)
      : slot_(impl->options, ctx) {
    if (slot_.over()) {
      Finish(TooManyStreams());
    } else if (!IsHealthServiceName(request.service())) {
      Finish(grpc::Status(grpc::StatusCode::NOT_FOUND,
                          "unknown service '" + request.service() +
                              "' (served: '', 'ratelimit', "
                              "'envoy.service.ratelimit.v3.RateLimitService')"));
    } else {
      response->set_status(impl->Current());
      Finish(grpc::Status::OK);
    }
  }
  void OnDone() override { delete this; }

 private:
  StreamSlot slot_;
};

grpc::ServerUnaryReactor* HealthService::Impl::Check(grpc::CallbackServerContext* ctx,
                                                     const hv1::HealthCheckRequest* request,
                                                     hv1::HealthCheckResponse* response) {
  return new CheckCall(this, *ctx, *request, response);
}

// One Watch call: the latest status wanted, written one message at a time; a status that
// changes while a write is in flight is written once that write is done (only the latest).
class HealthService::Impl::Watcher final
    : public grpc::ServerWriteReactor<hv1::HealthCheckResponse> {
 public:
  Watcher(Impl* impl, const grpc::CallbackServerContext& ctx, bool known)
      : impl_(impl), slot_(impl->options, ctx), known_(known) {}

  bool known() const { return known_; }
  bool over() const { return slot_.over(); }

  // The first thing done with a registered watcher: its first message, or its refusal.
  void Start(ServingStatus status) {
    Run([&] {
      if (slot_.over()) {
        finish_status_ = TooManyStreams();
        ending_ = true;
        has_sent_ = true;  // nothing to send: finish at once
      }
      want_ = known_ ? status : hv1::HealthCheckResponse::SERVICE_UNKNOWN;
    });
  }

  // The status now (the poller): sent if it differs from the last sent.
  void Offer(ServingStatus status) {
    Run([&] {
      if (known_ && !ending_) want_ = status;
    });
  }

  // Shutdown: NOT_SERVING (unless the name is unknown), then the end of the call.
  void End() {
    Run([&] {
      if (ending_) return;
      if (known_) want_ = hv1::HealthCheckResponse::NOT_SERVING;
      ending_ = true;
      finish_status_ = grpc::Status(grpc::StatusCode::UNAVAILABLE, "sluiced is shutting down");
    });
  }

  void OnWriteDone(bool ok) override {
    Run([&] {
      writing_ = false;
      if (!ok) cancelled_ = true;  // the call is gone: nothing more can be written
    });
  }

  void OnCancel() override {
    Run([&] { cancelled_ = true; });
  }

  void OnDone() override { impl_->Remove(this); }  // may free this

 private:
  enum class Action { kNone, kWrite, kFinish };

  // Changes the state under the lock, then starts what it calls for without the lock.
  template <typename Change>
  void Run(Change change) {
    Action action = Action::kNone;
    {
      const std::lock_guard<std::mutex> lock(mu_);
      change();
      action = Next();
    }
    if (action == Action::kWrite) StartWrite(&response_);
    if (action == Action::kFinish) Finish(finish_status_);
  }

  // Under mu_. One operation at a time: a write in flight owns response_; after Finish,
  // nothing (gRPC may free the call).
  Action Next() {
    if (finished_ || writing_) return Action::kNone;
    if (cancelled_) {
      finished_ = true;
      finish_status_ = grpc::Status::CANCELLED;
      return Action::kFinish;
    }
    if (!has_sent_ || want_ != sent_) {
      has_sent_ = true;
      sent_ = want_;
      response_.set_status(want_);
      writing_ = true;
      return Action::kWrite;
    }
    if (ending_) {
      finished_ = true;
      return Action::kFinish;
    }
    return Action::kNone;
  }

  Impl* const impl_;
  StreamSlot slot_;
  const bool known_;
  std::mutex mu_;
  ServingStatus want_ = hv1::HealthCheckResponse::UNKNOWN;
  ServingStatus sent_ = hv1::HealthCheckResponse::UNKNOWN;
  bool has_sent_ = false;
  bool writing_ = false;
  bool ending_ = false;
  bool cancelled_ = false;
  bool finished_ = false;
  grpc::Status finish_status_;
  hv1::HealthCheckResponse response_;
};

grpc::ServerWriteReactor<hv1::HealthCheckResponse>* HealthService::Impl::Watch(
    grpc::CallbackServerContext* ctx, const hv1::HealthCheckRequest* request) {
  const bool known = IsHealthServiceName(request->service());
  auto watcher = std::make_shared<Watcher>(this, *ctx, known);
  // Asked before the watcher is registered: readiness may take a Redis round trip.
  const ServingStatus now =
      known && !watcher->over() ? Current() : hv1::HealthCheckResponse::SERVICE_UNKNOWN;
  bool stopped = false;
  {
    const std::lock_guard<std::mutex> lock(mu);
    watchers.emplace(watcher.get(), watcher);
    if (known) ++known_watchers;
    stopped = stopping.load(std::memory_order_acquire);
  }
  if (known) wake.notify_all();
  watcher->Start(now);
  // Shutdown() took its snapshot before this watcher was registered: end it here.
  if (stopped) watcher->End();
  return watcher.get();
}

void HealthService::Impl::Remove(const Watcher* w) {
  std::shared_ptr<Watcher> last;  // freed after the lock is released
  const std::lock_guard<std::mutex> lock(mu);
  const auto it = watchers.find(w);
  if (it == watchers.end()) return;
  if (it->second->known()) --known_watchers;
  last = std::move(it->second);
  watchers.erase(it);
}

std::vector<std::shared_ptr<HealthService::Impl::Watcher>> HealthService::Impl::Snapshot() const {
  std::vector<std::shared_ptr<Watcher>> out;
  const std::lock_guard<std::mutex> lock(mu);
  out.reserve(watchers.size());
  for (const auto& [_, w] : watchers) out.push_back(w);
  return out;
}

// One readiness question per interval while any watcher of a served name is open; asleep
// otherwise.
void HealthService::Impl::Poll() {
  std::unique_lock<std::mutex> lock(mu);
  for (;;) {
    wake.wait(lock, [&] { return stopping.load() || known_watchers > 0; });
    if (stopping.load()) return;
    wake.wait_for(lock, options.poll_interval, [&] { return stopping.load(); });
    if (stopping.load()) return;
    if (known_watchers == 0) continue;
    lock.unlock();
    const ServingStatus now = Current();
    for (const auto& w : Snapshot()) w->Offer(now);
    lock.lock();
  }
}

HealthService::HealthService(HealthServiceOptions options)
    : impl_(std::make_unique<Impl>(std::move(options))) {
  impl_->poller = std::thread([impl = impl_.get()] { impl->Poll(); });
}

HealthService::~HealthService() { Shutdown(); }

void HealthService::Register(grpc::ServerBuilder& builder) { builder.RegisterService(impl_.get()); }

void HealthService::Shutdown() {
  {
    const std::lock_guard<std::mutex> lock(impl_->mu);
    if (impl_->stopping.exchange(true)) return;
  }
  impl_->wake.notify_all();
  for (const auto& w : impl_->Snapshot()) w->End();
  // The poller may be inside ready() (a Redis PING, bounded by its timeout); its last offer
  // finds every watcher ending and is ignored.
  if (impl_->poller.joinable()) impl_->poller.join();
}

size_t HealthService::watchers() const {
  const std::lock_guard<std::mutex> lock(impl_->mu);
  return impl_->watchers.size();
}

}  // namespace sluice::server
