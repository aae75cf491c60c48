#include "grpc/reflection.h"

#include <grpcpp/ext/proto_server_reflection_plugin.h>
#include <grpcpp/resource_quota.h>
#include <grpcpp/server_builder.h>
#include <grpcpp/server_context.h>
#include <grpcpp/support/server_interceptor.h>

#include <cstring>
#include <memory>
#include <string>
#include <vector>

namespace sluice::server {
namespace {

constexpr char kPluginName[] = "proto_server_reflection";  // ProtoServerReflectionPlugin::name()
constexpr char kMethod[] = "/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo";

// A builder option is the public way to change one builder's plugins: BuildAndStart asks every
// option for its changes before it decides whether the server needs a sync pool. Loading
// grpc++_reflection already registers the plugin for every builder in the process (a static
// initializer in the library), so the option removes that one and adds its own only when
// reflection is wanted: one reflection service when on, none when off, whichever library
// loaded first.
class ReflectionOption final : public grpc::ServerBuilderOption {
 public:
  explicit ReflectionOption(bool on) : on_(on) {}
  void UpdateArguments(grpc::ChannelArguments*) override {}
  void UpdatePlugins(std::vector<std::unique_ptr<grpc::ServerBuilderPlugin>>* plugins) override {
    std::erase_if(*plugins, [](const auto& p) { return p->name() == kPluginName; });
    if (on_) plugins->push_back(std::make_unique<grpc::reflection::ProtoServerReflectionPlugin>());
  }

 private:
  bool on_;
};

// Tracks one reflection call in ReflectionCalls from the moment its handler can run (the
// client's metadata is in) until its status is sent, the last moment its context is certainly
// alive; the destructor covers a call that ended some other way.
class TrackCall final : public grpc::experimental::Interceptor {
 public:
  TrackCall(ReflectionCalls* calls, grpc::ServerContextBase* ctx) : calls_(calls), ctx_(ctx) {}
  ~TrackCall() override { calls_->Remove(ctx_); }

  void Intercept(grpc::experimental::InterceptorBatchMethods* methods) override {
    using Hook = grpc::experimental::InterceptionHookPoints;
    if (methods->QueryInterceptionHookPoint(Hook::POST_RECV_INITIAL_METADATA)) calls_->Add(ctx_);
    if (methods->QueryInterceptionHookPoint(Hook::PRE_SEND_STATUS) ||
        methods->QueryInterceptionHookPoint(Hook::POST_RECV_CLOSE)) {
      calls_->Remove(ctx_);
    }
    methods->Proceed();
  }

 private:
  ReflectionCalls* calls_;
  grpc::ServerContextBase* ctx_;
};

// Asked for every call of the server; only reflection calls get an interceptor.
class TrackReflectionCalls final : public grpc::experimental::ServerInterceptorFactoryInterface {
 public:
  explicit TrackReflectionCalls(ReflectionCalls* calls) : calls_(calls) {}
  grpc::experimental::Interceptor* CreateServerInterceptor(
      grpc::experimental::ServerRpcInfo* info) override {
    if (info->method() == nullptr || std::strcmp(info->method(), kMethod) != 0) return nullptr;
    return new TrackCall(calls_, info->server_context());
  }

 private:
  ReflectionCalls* calls_;
};

}  // namespace

void ReflectionCalls::Add(grpc::ServerContextBase* call) {
  const std::lock_guard<std::mutex> lock(mu_);
  if (ended_) {
    call->TryCancel();
    return;
  }
  calls_.insert(call);
}

void ReflectionCalls::Remove(grpc::ServerContextBase* call) {
  const std::lock_guard<std::mutex> lock(mu_);
  calls_.erase(call);
}

void ReflectionCalls::EndAll() {
  const std::lock_guard<std::mutex> lock(mu_);
  ended_ = true;
  for (grpc::ServerContextBase* call : calls_) call->TryCancel();
  calls_.clear();
}

void SetReflection(grpc::ServerBuilder& builder, bool on, ReflectionCalls* calls) {
  builder.SetOption(std::make_unique<ReflectionOption>(on));
  if (!on) return;
  grpc::ResourceQuota quota("sluice-grpc-sync-pool");
  quota.SetMaxThreads(kSyncServerThreads);
  builder.SetResourceQuota(quota);
  std::vector<std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface>> creators;
  creators.push_back(std::make_unique<TrackReflectionCalls>(calls));
  builder.experimental().SetInterceptorCreators(std::move(creators));
}

}  // namespace sluice::server
