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
// it.
//
// Only grpc_server.cc includes this header; the reflection plugin's header stays in the .cc.
#ifndef SLUICE_GRPC_REFLECTION_H_
#define SLUICE_GRPC_REFLECTION_H_

namespace grpc {
class ServerBuilder;
}

namespace sluice::server {

// The sync pool's threads at most: its pollers (1 to 2) and the reflection calls they serve.
inline constexpr int kSyncServerThreads = 4;

// Makes `builder` serve reflection (and caps its sync pool), or not, whatever grpc's
// process-wide plugin registry holds: linking grpc++_reflection registers the plugin there for
// every builder.
void SetReflection(grpc::ServerBuilder& builder, bool on);

}  // namespace sluice::server

#endif  // SLUICE_GRPC_REFLECTION_H_
