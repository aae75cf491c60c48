// Three regions and the global store on loopback, for the region layer's tests: a redis-server
// per region (its own store), one global redis-server, and a TcpProxy between the regions and
// the global store that adds latency and can cut the link. Each region's store is opened as
// sluiced opens it (OpenStore with --region and --global-store).
#ifndef SLUICE_TESTS_SUPPORT_REGION_HARNESS_H_
#define SLUICE_TESTS_SUPPORT_REGION_HARNESS_H_

#include <array>
#include <chrono>
#include <memory>
#include <string>

#include "sluice/open_store.h"
#include "support/redis_server.h"
#include "support/tcp_proxy.h"

namespace sluice::testing {

class RegionHarness {
 public:
  static constexpr std::array<const char*, 3> kRegions = {"us", "eu", "ap"};

  explicit RegionHarness(std::chrono::milliseconds one_way_delay = {})
      : proxy_(global_.port(), one_way_delay) {}

  TcpProxy& link() { return proxy_; }
  RedisServer& global() { return global_; }
  int region_port(size_t i) const { return regional_[i].port(); }

  // Region i's store; with_global false: no region layer (static mode needs none).
  std::shared_ptr<Store> Open(size_t i, bool with_global = true) {
    // The layers' background work runs on real time: the global store's grants expire by
    // Redis's clock (TIME in its script), which no test drives.
    OpenStoreOptions o;
    o.region = kRegions[i];
    if (with_global) o.global_store = proxy_.address();
    auto store = OpenStore("redis://127.0.0.1:" + std::to_string(regional_[i].port()), o);
    if (!store) throw std::runtime_error(store.error().message);
    return *store;
  }

 private:
  RedisServer global_;
  std::array<RedisServer, 3> regional_;
  TcpProxy proxy_;
};

}  // namespace sluice::testing

#endif  // SLUICE_TESTS_SUPPORT_REGION_HARNESS_H_
