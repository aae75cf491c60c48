#include "grpc/reflection.h"

#include <grpcpp/ext/proto_server_reflection_plugin.h>
#include <grpcpp/resource_quota.h>
#include <grpcpp/server_builder.h>

#include <memory>
#include <string>
#include <vector>

namespace sluice::server {
namespace {

constexpr char kPluginName[] = "proto_server_reflection";  // ProtoServerReflectionPlugin::name()

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

}  // namespace

void SetReflection(grpc::ServerBuilder& builder, bool on) {
  builder.SetOption(std::make_unique<ReflectionOption>(on));
  if (!on) return;
  grpc::ResourceQuota quota("sluice-grpc-sync-pool");
  quota.SetMaxThreads(kSyncServerThreads);
  builder.SetResourceQuota(quota);
}

}  // namespace sluice::server
