// The async gRPC API with one completion queue and one thread per `threads`, rather than the
// sync server or the callback API: every call asks CheckAsync; a memory-store check runs to the
// end on the thread that took the call, a Redis one is answered from the store's I/O thread,
// exactly `threads` threads serve (the sync server grows its pool per call, or answers
// RESOURCE_EXHAUSTED once a thread quota is reached), and calls beyond that wait in gRPC's
// queue instead of failing.
//
// The method is registered raw (bytes in, bytes out) and parsed here: gRPC's generated async
// handler answers a request it cannot parse INTERNAL, which says the server failed; a malformed
// request is the caller's fault, INVALID_ARGUMENT. Connections are accepted by a
// ConnectionGate, which caps them, and handed to gRPC; every other limit is a channel argument.
//
// A shaper's OK answer is held for the request's delay (CheckResponse::delay) by a grpc::Alarm
// on the call's completion queue: the alarm's tag is the call, so the queue's thread sends the
// answer when it fires, and holding costs no thread -- a thousand held calls are a thousand
// timers. The delay counts from when the check was asked, so a store's round trip is not added
// to it. Shutdown answers every held call at once (its request was admitted; the caller must
// not wait past the server's end).
#include "grpc/grpc_server.h"

#include <grpcpp/alarm.h>
#include <grpcpp/grpcpp.h>
#include <grpcpp/server_posix.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <climits>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <unordered_set>
#include <utility>
#include <vector>

#include "envoy/service/ratelimit/v3/rls.grpc.pb.h"
#include "grpc/calls_per_connection.h"
#include "grpc/connection_gate.h"
#include "grpc/grpc_translate.h"
#include "grpc/health_service.h"
#include "grpc/reflection.h"

namespace sluice::server {
namespace {

namespace rls = envoy::service::ratelimit::v3;

// ShouldRateLimit as bytes: the async API without gRPC's own parsing.
using RawService =
    rls::RateLimitService::WithRawMethod_ShouldRateLimit<rls::RateLimitService::Service>;

class Call;

// What every call needs; lives in the Impl, longer than any call.
struct Shared {
  RawService async;
  RateLimitService* service = nullptr;
  HeaderOptions headers;
  const CallerIdentity* callers = nullptr;
  std::function<std::vector<std::string>(std::string_view)> peer_sans;
  std::atomic<bool> stopping{false};
  std::unique_ptr<CallsPerConnection> calls;
  ConnectionGate* gate = nullptr;
  TlsRelay* relay = nullptr;  // with TLS: gRPC's descriptors are the relay's pairs
  std::atomic<uint64_t> cuts{0};
  std::atomic<int64_t> last_cut_log{0};  // steady_clock ticks
  // The calls holding an answer (a shaper's delay), which Shutdown releases at once; from then
  // on, `release_holds` is set and no answer is held.
  std::mutex held_mu;
  std::unordered_set<Call*> held;
  bool release_holds = false;

  // Ends connection `fd` (gRPC's descriptor; with TLS the client's connection too), logging it.
  void Cut(int fd) {
    if (relay != nullptr ? relay->Cut(fd) : gate != nullptr && gate->Cut(fd)) LogCut();
  }

  // One line per 10 s at most: an attacker reconnecting must not flood the log.
  void LogCut() {
    const uint64_t n = cuts.fetch_add(1, std::memory_order_relaxed) + 1;
    const int64_t now = std::chrono::steady_clock::now().time_since_epoch().count();
    int64_t last = last_cut_log.load(std::memory_order_relaxed);
    const int64_t every = std::chrono::steady_clock::duration(std::chrono::seconds(10)).count();
    if (last != 0 && now - last < every) return;
    if (!last_cut_log.compare_exchange_strong(last, now)) return;
    spdlog::warn(
        "grpc: cut a connection with over {} calls in flight: its client ignores the stream cap "
        "({} cut so far)",
        calls->most(), n);
  }
};

int ConnectionOf(const grpc::ServerContext& ctx) { return ConnectionOfPeer(ctx.peer()); }

// The token of the call's "authorization: Bearer <token>" metadata, if it has one.
std::optional<std::string_view> BearerOf(const grpc::ServerContext& ctx) {
  const auto& metadata = ctx.client_metadata();
  const auto it = metadata.find("authorization");
  if (it == metadata.end()) return std::nullopt;
  return BearerToken(std::string_view(it->second.data(), it->second.size()));
}

grpc::Status Refusal(AuthFailure failure) {
  switch (failure) {
    case AuthFailure::kMissing:
      return grpc::Status(grpc::StatusCode::UNAUTHENTICATED,
                          "no credential: send metadata authorization: Bearer <token> "
                          "(--api-tokens is on)");
    case AuthFailure::kUnknown:
      return grpc::Status(grpc::StatusCode::UNAUTHENTICATED,
                          "the credential names no client of --api-tokens");
    case AuthFailure::kDomain:
      break;
  }
  return grpc::Status(grpc::StatusCode::PERMISSION_DENIED, "this client may not check that domain");
}

// One ShouldRateLimit call on one completion queue: requested, then answered, then deleted,
// each step on that queue's thread. Its own address is its tag.
class Call {
 public:
  Call(Shared* shared, grpc::ServerCompletionQueue* cq)
      : shared_(shared), cq_(cq), responder_(&ctx_) {
    shared_->async.RequestShouldRateLimit(&ctx_, &payload_, &responder_, cq_, cq_, this);
  }

  // The queue returned this call's tag: a new call arrived (ok) or the server is shutting down
  // (!ok); or the answer went out (or the call was cancelled).
  void Proceed(bool ok) {
    if (holding_.load(std::memory_order_acquire)) {
      // The alarm fired, or was cancelled by Shutdown (!ok): the answer goes out now.
      holding_.store(false, std::memory_order_relaxed);
      {
        const std::lock_guard<std::mutex> lock(shared_->held_mu);
        shared_->held.erase(this);
      }
      responder_.Finish(held_answer_, grpc::Status::OK, this);
      return;
    }
    if (answered_ || !ok) {
      if (connection_ >= 0) shared_->calls->Leave(connection_);
      delete this;
      return;
    }
    // Keep a request posted on this queue while this one is served. Safe during shutdown: the
    // server waits for this call to end before Shutdown() shuts the queue.
    if (!shared_->stopping.load(std::memory_order_acquire)) new Call(shared_, cq_);
    answered_ = true;
    connection_ = ConnectionOf(ctx_);
    if (connection_ >= 0 && !shared_->calls->Enter(connection_)) {
      // More streams than the cap allows: the client ignores SETTINGS. Answer without a message
      // (trailers are not flow-controlled, so this ends even on a zero window) and cut the
      // connection, which ends its other calls.
      shared_->Cut(connection_);
      return Finish(grpc::Status(grpc::StatusCode::RESOURCE_EXHAUSTED,
                                 "too many concurrent streams on this connection"));
    }
    Answer();
  }

 private:
  void Answer() {
    // One snapshot of --api-tokens for the call: the caller is identified before its message is
    // parsed, and let in for the domain before anything is counted.
    const std::shared_ptr<const ApiTokens> table =
        shared_->callers != nullptr ? shared_->callers->table() : nullptr;
    std::vector<std::string> sans;
    CallerCredentials credentials;
    const ApiClient* caller = nullptr;
    if (table != nullptr) {
      if (shared_->peer_sans) {
        sans = shared_->peer_sans(ctx_.peer());
      } else if (shared_->relay != nullptr) {  // TLS: the relayed connection's certificate
        if (auto identity = shared_->relay->Identity(ctx_.peer())) {
          sans = std::move(*identity);
        }
      }
      credentials = {BearerOf(ctx_), sans};
      auto who = Identify(*table, credentials);
      if (!who) return Refuse(who.error());
      caller = *who;
    }
    rls::RateLimitRequest parsed;
    if (!grpc::SerializationTraits<rls::RateLimitRequest>::Deserialize(&payload_, &parsed).ok()) {
      return Finish(grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                                 "the request is not a valid envoy.service.ratelimit.v3."
                                 "RateLimitRequest"));
    }
    Result<CheckRequest> request = FromEnvoyRequest(parsed);
    if (!request) return Fail(request.error());
    if (caller != nullptr) {
      if (auto ok = Authorize(*table, credentials, *caller, request->domain); !ok) {
        return Refuse(ok.error());
      }
    }
    asked_ = gpr_now(GPR_CLOCK_MONOTONIC);  // a shaper's delay counts from here
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
    grpc::ByteBuffer bytes;
    bool own_buffer = false;
    const grpc::Status serialized =
        grpc::SerializationTraits<rls::RateLimitResponse>::Serialize(response, &bytes, &own_buffer);
    if (!serialized.ok()) return Finish(serialized);  // our failure: INTERNAL
    if (decision.overall == Code::kOk && decision.delay > Duration(0)) {
      return Hold(std::move(bytes), decision.delay);
    }
    responder_.Finish(bytes, grpc::Status::OK, this);
  }

  // Sends `answer` `delay` after the check was asked, from this call's queue. May run on any
  // thread (a Redis store's I/O thread).
  void Hold(grpc::ByteBuffer answer, Duration delay) {
    held_answer_ = std::move(answer);
    const std::lock_guard<std::mutex> lock(shared_->held_mu);
    if (shared_->release_holds) {
      responder_.Finish(held_answer_, grpc::Status::OK, this);
      return;
    }
    holding_.store(true, std::memory_order_release);  // held_answer_ is written
    shared_->held.insert(this);
    alarm_.Set(cq_, gpr_time_add(asked_, gpr_time_from_nanos(delay.count(), GPR_TIMESPAN)), this);
  }

 public:
  // Shutdown: the held answer goes out now (the alarm fires at once). Under shared_->held_mu.
  void ReleaseHold() { alarm_.Cancel(); }

 private:
  // The service's errors are the caller's (sizes, empty entries, ...), as are ours.
  void Fail(const Error& error) {
    Finish(grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, error.message));
  }

  void Finish(const grpc::Status& status) { responder_.FinishWithError(status, this); }

  void Refuse(AuthFailure failure) {
    shared_->callers->CountRefusal(failure);
    Finish(Refusal(failure));
  }

  Shared* shared_;
  grpc::ServerCompletionQueue* cq_;
  grpc::ServerContext ctx_;
  grpc::ByteBuffer payload_;
  grpc::ServerAsyncResponseWriter<grpc::ByteBuffer> responder_;
  bool answered_ = false;
  int connection_ = -1;  // counted in shared_->calls once answered_
  gpr_timespec asked_{};
  // A held answer: the alarm's firing (this call's tag) sends it. holding_ is set (maybe on a
  // store's thread) before the alarm, and read on the queue's thread once the alarm fires.
  grpc::Alarm alarm_;
  grpc::ByteBuffer held_answer_;
  std::atomic<bool> holding_{false};
};

void Serve(grpc::ServerCompletionQueue* cq) {
  void* tag = nullptr;
  bool ok = false;
  while (cq->Next(&tag, &ok)) static_cast<Call*>(tag)->Proceed(ok);
}

// A duration as a gRPC channel argument (int milliseconds); 0 means never.
int ChannelMillis(std::chrono::milliseconds ms) {
  if (ms.count() <= 0) return INT_MAX;
  return static_cast<int>(std::min<int64_t>(ms.count(), INT_MAX));
}

}  // namespace

// Declared in the order gRPC needs them torn down in reverse: the gate's thread (which hands
// connections to the server), the threads, then the server, then the services registered with
// it, then the queues.
struct GrpcServer::Impl {
  std::vector<std::unique_ptr<grpc::ServerCompletionQueue>> queues;
  Shared shared;
  std::unique_ptr<HealthService> health;
  ReflectionCalls reflection_calls;
  std::unique_ptr<grpc::Server> server;
  std::vector<std::thread> threads;
  std::unique_ptr<TlsRelay> relay;       // with TLS: between the gate and the server
  std::unique_ptr<ConnectionGate> gate;  // null with native_tls: gRPC listens itself
  int native_port = 0;
  std::chrono::milliseconds shutdown_grace{0};
  std::mutex shutdown_mu;
  bool shut_down = false;
};

GrpcServer::GrpcServer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

GrpcServer::~GrpcServer() { Shutdown(); }

int GrpcServer::port() const { return impl_->gate ? impl_->gate->port() : impl_->native_port; }

size_t GrpcServer::connections() const { return impl_->gate ? impl_->gate->open() : 0; }

std::optional<PeerIdentity> GrpcServer::Identity(std::string_view peer) const {
  if (impl_->relay == nullptr) return std::nullopt;
  return impl_->relay->Identity(peer);
}

size_t GrpcServer::health_watchers() const { return impl_->health->watchers(); }

Result<std::unique_ptr<GrpcServer>> GrpcServer::Start(const GrpcServerOptions& options,
                                                      RateLimitService& service) {
  if (options.threads < 1) return MakeError("grpc: threads must be at least 1");
  if (options.max_concurrent_streams < 1) {
    return MakeError("grpc: max_concurrent_streams must be at least 1");
  }
  if (options.max_message_bytes < 1 || options.max_message_bytes > INT_MAX) {
    return MakeError("grpc: max_message_bytes must be 1.." + std::to_string(INT_MAX));
  }
  if (options.health_poll_interval.count() < 1) {
    return MakeError("grpc: health_poll_interval must be at least 1 ms");
  }
  auto impl = std::make_unique<Impl>();
  impl->shared.service = &service;
  impl->shared.headers = options.headers;
  impl->shared.callers = options.callers;
  impl->shared.peer_sans = options.peer_sans;
  impl->shared.calls = std::make_unique<CallsPerConnection>(options.max_concurrent_streams);
  impl->shutdown_grace = options.shutdown_grace;
  if (options.native_tls && options.tls) return MakeError("grpc: native_tls excludes tls");
  if (!options.native_tls) {
    auto gate =
        ConnectionGate::Listen(options.address, options.max_connections, options.unix_socket);
    if (!gate) return std::unexpected(std::move(gate.error()));
    impl->gate = std::move(*gate);
    impl->shared.gate = impl->gate.get();
  }
  if (options.tls) {
    // Started (and its options checked) before the server: it hands connections over only
    // once the gate takes them, after the server is built.
    auto relay = TlsRelay::Start(*options.tls, [impl = impl.get()](int fd) {
      grpc::AddInsecureChannelFromFd(impl->server.get(), fd);
    });
    if (!relay) return std::unexpected(std::move(relay.error()));
    impl->relay = std::move(*relay);
    impl->shared.relay = impl->relay.get();
  }
  impl->health = std::make_unique<HealthService>(HealthServiceOptions{
      .ready = [&service] { return service.Ready(); },
      .calls = impl->shared.calls.get(),
      .cut = [shared = &impl->shared](int fd) { shared->Cut(fd); },
      .poll_interval = options.health_poll_interval,
  });

  grpc::ServerBuilder builder;
  // No listening port (but with native_tls): the gate accepts, and hands connections over.
  if (options.native_tls) {
    grpc::SslServerCredentialsOptions ssl;
    ssl.pem_key_cert_pairs.push_back(
        {options.native_tls->key_pem, options.native_tls->cert_chain_pem});
    builder.AddListeningPort(options.address, grpc::SslServerCredentials(ssl), &impl->native_port);
  }
  builder.SetMaxReceiveMessageSize(static_cast<int>(options.max_message_bytes));
  builder.AddChannelArgument(
      GRPC_ARG_MAX_CONCURRENT_STREAMS,
      static_cast<int>(std::min<uint32_t>(options.max_concurrent_streams, INT_MAX)));
  builder.AddChannelArgument(GRPC_ARG_MAX_CONNECTION_IDLE_MS, ChannelMillis(options.idle_timeout));
  builder.AddChannelArgument(GRPC_ARG_MAX_CONNECTION_AGE_MS,
                             ChannelMillis(options.max_connection_age));
  // A connection past its age gets GOAWAY, then this long for its calls, then is closed.
  builder.AddChannelArgument(
      GRPC_ARG_MAX_CONNECTION_AGE_GRACE_MS,
      ChannelMillis(std::max(options.shutdown_grace, std::chrono::milliseconds(1))));
  builder.RegisterService(&impl->shared.async);
  impl->health->Register(builder);
  SetReflection(builder, options.reflection, &impl->reflection_calls);
  for (int i = 0; i < options.threads; ++i) impl->queues.push_back(builder.AddCompletionQueue());
  impl->server = builder.BuildAndStart();
  if (!impl->server) {
    // Nothing was posted on the queues: destroying them (with impl) shuts them down. Shutting
    // them down here instead would make gRPC log that they went before the failed server.
    return MakeError("grpc: cannot start the server on " + options.address);
  }
  for (auto& q : impl->queues) {
    new Call(&impl->shared, q.get());
    impl->threads.emplace_back(Serve, q.get());
  }
  if (impl->relay) {
    impl->gate->Start([relay = impl->relay.get()](int fd) { relay->Adopt(fd); });
  } else if (impl->gate) {
    impl->gate->Start(
        [server = impl->server.get()](int fd) { grpc::AddInsecureChannelFromFd(server, fd); });
  }
  return std::unique_ptr<GrpcServer>(new GrpcServer(std::move(impl)));
}

void GrpcServer::Shutdown() {
  const std::lock_guard<std::mutex> lock(impl_->shutdown_mu);
  if (impl_->shut_down) return;
  impl_->shut_down = true;
  if (impl_->gate) impl_->gate->Stop();            // no connection is handed over from here on
  if (impl_->relay) impl_->relay->StopHandover();  // nor a TLS one still in its handshake
  impl_->shared.stopping.store(true, std::memory_order_release);
  {
    // Held answers go out now, so that the calls end before the grace does.
    const std::lock_guard<std::mutex> holds(impl_->shared.held_mu);
    impl_->shared.release_holds = true;
    for (Call* call : impl_->shared.held) call->ReleaseHold();
  }
  // Health watchers are told NOT_SERVING and their calls ended, so that they do not hold the
  // server's shutdown below until the grace runs out.
  impl_->health->Shutdown();
  // Reflection streams are ended too: they last as long as their clients keep them open.
  impl_->reflection_calls.EndAll();
  // Returns once every call has ended, or at the deadline, when gRPC cancels the rest; the
  // queues' threads keep serving until then.
  impl_->server->Shutdown(std::chrono::system_clock::now() + impl_->shutdown_grace);
  for (auto& q : impl_->queues) q->Shutdown();
  for (auto& t : impl_->threads) t.join();
  if (impl_->relay) impl_->relay->Stop();  // the TLS side of connections gRPC has closed
}

}  // namespace sluice::server
