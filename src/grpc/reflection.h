// gRPC server reflection on sluiced's gRPC server, so that grpcurl list/describe (and other
// reflection clients) work against sluiced as against envoyproxy/ratelimit. grpc++'s own
// reflection library (grpc++_reflection, Debian's libgrpc++-dev) serves it; in grpc 1.51 that is
// the grpc.reflection.v1alpha.ServerReflection protocol only (not v1), describing every service
// the server registers from the descriptors protoc generated into this binary.
//
// The reflection service is grpc++'s synchronous kind: each call in flight holds a thread of the
// server's sync pool for as long as its stream is open. That pool is capped at
// kSyncServerThreads (a gRPC thread quota, which only the sync pool draws from); a call beyond
// it is answered RESOURCE_EXHAUSTED, so open reflection streams cannot grow the server's
// threads. The ShouldRateLimit calls (async) and health checks (callback API) use no thread of
// it. A stream stays open as long as its client keeps it, so ReflectionCalls ends them at
// shutdown rather than letting them hold it to its grace. It learns of them from a server
// interceptor factory, which gRPC asks on every call (a ShouldRateLimit call costs it a string
// comparison and gRPC's small per-call record; only reflection calls get an interceptor).
//
// Only grpc_server.cc includes this header; the reflection plugin's header stays in the .cc.
#ifndef SLUICE_GRPC_REFLECTION_H_
#define SLUICE_GRPC_REFLECTION_H_

#include <mutex>
#include <unordered_set>

namespace grpc {
class ServerBuilder;
class ServerContextBase;
}  // namespace grpc

namespace sluice::server {

// The sync pool's threads at most: its pollers (1 to 2) and the reflection calls they serve.
inline constexpr int kSyncServerThreads = 4;

// The reflection calls in flight, to end them at shutdown. Must outlive the server.
class ReflectionCalls {
 public:
  // A call whose handler is about to run; cancelled at once if EndAll() already ran.
  void Add(grpc::ServerContextBase* call);
  // A call whose handler returned (its status is being sent): no longer to cancel.
  void Remove(grpc::ServerContextBase* call);
  // Cancels every call in flight, and from now on every one that starts.
  void EndAll();

 private:
  std::mutex mu_;
  // Under mu_: Remove() of a call waits while EndAll() cancels, so no call is freed under it.
  std::unordered_set<grpc::ServerContextBase*> calls_;
  bool ended_ = false;
};

// Makes `builder` serve reflection, its calls tracked in `calls`, and caps its sync pool; or, with
// !on, not serve it, whatever grpc's process-wide plugin registry holds (linking
// grpc++_reflection registers the plugin there for every builder).
void SetReflection(grpc::ServerBuilder& builder, bool on, ReflectionCalls* calls);

}  // namespace sluice::server

#endif  // SLUICE_GRPC_REFLECTION_H_
