// The async gRPC API with one completion queue and one thread per `threads`, rather than the
// sync server or the callback API: every call asks CheckAsync; a memory-store check runs to the
// end on the thread that took the call, a Redis one is answered from the store's I/O thread,
// exactly `threads` threads serve (the sync server grows its pool per call, or answers
// RESOURCE_EXHAUSTED once a thread quota is reached), and calls beyond that wait in gRPC's
// queue instead of failing.
#include "grpc/grpc_server.h"

#include <grpcpp/grpcpp.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "envoy/service/ratelimit/v3/rls.grpc.pb.h"
#include "grpc/grpc_translate.h"

namespace sluice::server {
namespace {

namespace rls = envoy::service::ratelimit::v3;

// How long Shutdown() lets the calls in flight finish before cancelling them.
constexpr auto kShutdownGrace = std::chrono::seconds(5);

// What every call needs; lives in the Impl, longer than any call.
struct Shared {
  rls::RateLimitService::AsyncService async;
  RateLimitService* service = nullptr;
  HeaderOptions headers;
  std::atomic<bool> stopping{false};
};

// One ShouldRateLimit call on one completion queue: requested, then answered, then deleted,
// each step on that queue's thread. Its own address is its tag.
class Call {
 public:
  Call(Shared* shared, grpc::ServerCompletionQueue* cq)
      : shared_(shared), cq_(cq), responder_(&ctx_) {
    shared_->async.RequestShouldRateLimit(&ctx_, &request_, &responder_, cq_, cq_, this);
  }

  // The queue returned this call's tag: a new call arrived (ok) or the server is shutting down
  // (!ok); or the answer went out (or the call was cancelled).
  void Proceed(bool ok) {
    if (answered_ || !ok) {
      delete this;
      return;
    }
    // Keep a request posted on this queue while this one is served. Safe during shutdown: the
    // server waits for this call to end before Shutdown() shuts the queue.
    if (!shared_->stopping.load(std::memory_order_acquire)) new Call(shared_, cq_);
    answered_ = true;
    Answer();
  }

 private:
  void Answer() {
    Result<CheckRequest> request = FromEnvoyRequest(request_);
    if (!request) return Fail(request.error());
    // The service answers on this thread (the memory store, an invalid request, an unknown
    // domain), or later on the store's I/O thread (Redis) while this queue's thread goes back
    // to taking calls: many checks in flight per thread, not one. Finish may be called from any
    // thread; the queue hands this call back only after it.
    shared_->service->CheckAsync(*request, [this](Result<CheckResponse> decision) {
      if (!decision) return Fail(decision.error());
      Reply(*decision);
    });
  }

  void Reply(const CheckResponse& decision) {
    rls::RateLimitResponse response;
    ToEnvoyResponse(decision, shared_->headers, &response);
    responder_.Finish(response, grpc::Status::OK, this);
  }

  // The service's errors are the caller's (sizes, empty entries, ...), as are ours.
  void Fail(const Error& error) {
    responder_.FinishWithError(grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, error.message),
                               this);
  }

  Shared* shared_;
  grpc::ServerCompletionQueue* cq_;
  grpc::ServerContext ctx_;
  rls::RateLimitRequest request_;
  grpc::ServerAsyncResponseWriter<rls::RateLimitResponse> responder_;
  bool answered_ = false;
};

void Serve(grpc::ServerCompletionQueue* cq) {
  void* tag = nullptr;
  bool ok = false;
  while (cq->Next(&tag, &ok)) static_cast<Call*>(tag)->Proceed(ok);
}

}  // namespace

// Declared in the order gRPC needs them torn down in reverse: the threads, then the server,
// then the service registered with it, then the queues.
struct GrpcServer::Impl {
  std::vector<std::unique_ptr<grpc::ServerCompletionQueue>> queues;
  Shared shared;
  std::unique_ptr<grpc::Server> server;
  std::vector<std::thread> threads;
  int port = 0;
  std::mutex shutdown_mu;
  bool shut_down = false;
};

GrpcServer::GrpcServer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

GrpcServer::~GrpcServer() { Shutdown(); }

int GrpcServer::port() const { return impl_->port; }

Result<std::unique_ptr<GrpcServer>> GrpcServer::Start(const std::string& address,
                                                      RateLimitService& service,
                                                      HeaderOptions headers, int threads) {
  if (threads < 1) return MakeError("grpc: threads must be at least 1");
  auto impl = std::make_unique<Impl>();
  impl->shared.service = &service;
  impl->shared.headers = headers;

  grpc::ServerBuilder builder;
  // gRPC sets SO_REUSEPORT by default: a second sluiced on the same port would start and
  // silently share the traffic instead of failing.
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  builder.AddListeningPort(address, grpc::InsecureServerCredentials(), &impl->port);
  builder.RegisterService(&impl->shared.async);
  for (int i = 0; i < threads; ++i) impl->queues.push_back(builder.AddCompletionQueue());
  impl->server = builder.BuildAndStart();
  if (!impl->server || impl->port == 0) {
    // Nothing was posted on the queues: destroying them (with impl) shuts them down. Shutting
    // them down here instead would make gRPC log that they went before the failed server.
    return MakeError("grpc: cannot listen on " + address);
  }
  for (auto& q : impl->queues) {
    new Call(&impl->shared, q.get());
    impl->threads.emplace_back(Serve, q.get());
  }
  return std::unique_ptr<GrpcServer>(new GrpcServer(std::move(impl)));
}

void GrpcServer::Shutdown() {
  const std::lock_guard<std::mutex> lock(impl_->shutdown_mu);
  if (impl_->shut_down) return;
  impl_->shut_down = true;
  impl_->shared.stopping.store(true, std::memory_order_release);
  // Returns once every call has ended; the queues' threads keep serving until then.
  impl_->server->Shutdown(std::chrono::system_clock::now() + kShutdownGrace);
  for (auto& q : impl_->queues) q->Shutdown();
  for (auto& t : impl_->threads) t.join();
}

}  // namespace sluice::server
