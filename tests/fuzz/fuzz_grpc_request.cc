// Fuzz target: sluiced's gRPC request path after the wire. The bytes are parsed as Envoy's
// RateLimitRequest (protobuf), translated (grpc/grpc_translate.h), decided by the service on the
// memory store with the check rules (service/check_rules.h) and a small config, and the answer
// translated back. Checks, besides "no crash, no UB":
// - the translation keeps the request: domain, entries in order (a value over the bound as its
//   "sha256:" digest), hits by Envoy's rules; and it refuses exactly what does not translate (a
//   descriptor hits_addend beyond int64, an override unit Envoy does not define);
// - the rules admit exactly the requests within CheckLimits, counted here independently;
// - the service refuses only what the rules refuse, or an override's rate;
// - an answer has one status per descriptor, overall OVER_LIMIT exactly when one is, and so
//   does Envoy's response built from it.
#include <unistd.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <limits>
#include <memory>
#include <string>

#include "config/config.h"
#include "envoy/service/ratelimit/v3/rls.pb.h"
#include "fuzz_check.h"
#include "grpc/grpc_translate.h"
#include "metrics/metrics.h"
#include "service/check_rules.h"
#include "service/rate_limit_service.h"
#include "sluice/clock.h"
#include "sluice/open_store.h"

namespace {

namespace fs = std::filesystem;
namespace rls = envoy::service::ratelimit::v3;
using sluice::server::CheckRequest;

// Every kind of rule the service treats differently: algorithms, modes, blocked, unlimited,
// `replaces`, nested descriptors, plans.
constexpr char kConfig[] = R"yaml(domain: api
plan_key: tenant
plans:
  default:
    - key: tenant
      rate_limit: {unit: minute, requests_per_unit: 3}
  gold:
    - key: tenant
      rate_limit: {unlimited: true}
descriptors:
  - key: k
    rate_limit: {name: fixed, unit: second, requests_per_unit: 2, algorithm: fixed_window}
  - key: tb
    rate_limit: {name: bucket, unit: second, requests_per_unit: 10, burst: 50}
  - key: lb
    rate_limit: {name: shaper, unit: second, requests_per_unit: 5, algorithm: leaky_bucket}
  - key: sw
    rate_limit: {name: sliding, unit: minute, requests_per_unit: 4, algorithm: sliding_window_log}
  - key: shadow
    rate_limit: {name: shadowed, unit: minute, requests_per_unit: 1, mode: shadow}
  - key: soft
    rate_limit: {name: soft, unit: minute, requests_per_unit: 1, mode: soft}
  - key: ip
    value: 203.0.113.66
    rate_limit: {name: blocked, unit: second, requests_per_unit: 0}
  - key: internal
    rate_limit: {unlimited: true}
  - key: path
    rate_limit: {name: outer, unit: hour, requests_per_unit: 100}
    descriptors:
      - key: method
        value: POST
        rate_limit: {name: inner, unit: hour, requests_per_unit: 10, replaces: [{name: outer}]}
)yaml";

std::shared_ptr<const sluice::server::Config> LoadedConfig() {
  static const std::shared_ptr<const sluice::server::Config> config = [] {
    std::string dir = (fs::temp_directory_path() / "sluice-fuzz-grpc-XXXXXX").string();
    FUZZ_CHECK(mkdtemp(dir.data()) != nullptr);
    const fs::path file = fs::path(dir) / "api.yaml";
    std::ofstream(file) << kConfig;
    auto loaded = sluice::server::LoadConfig(file);
    std::error_code ec;
    fs::remove_all(dir, ec);
    if (!loaded) std::fprintf(stderr, "%s\n", loaded.error().message.c_str());
    FUZZ_CHECK(loaded.has_value());
    return *loaded;
  }();
  return config;
}

bool ExpectTranslated(const rls::RateLimitRequest& in) {
  for (const auto& d : in.descriptors()) {
    if (d.has_limit() && (d.limit().unit() < 1 || d.limit().unit() > 6)) return false;
  }
  return true;
}

void CheckTranslation(const rls::RateLimitRequest& in, const CheckRequest& out) {
  FUZZ_CHECK(out.caller == sluice::server::Caller::kEnvoy);
  FUZZ_CHECK(out.domain == in.domain());
  FUZZ_CHECK(out.hits == (in.hits_addend() == 0 ? 1 : static_cast<int64_t>(in.hits_addend())));
  FUZZ_CHECK(out.descriptors.size() == static_cast<size_t>(in.descriptors_size()));
  for (int i = 0; i < in.descriptors_size(); ++i) {
    const auto& from = in.descriptors(i);
    const auto& to = out.descriptors[static_cast<size_t>(i)];
    FUZZ_CHECK(to.entries.size() == static_cast<size_t>(from.entries_size()));
    for (int j = 0; j < from.entries_size(); ++j) {
      const auto& [key, value] = to.entries[static_cast<size_t>(j)];
      FUZZ_CHECK(key == from.entries(j).key());
      FUZZ_CHECK(value == from.entries(j).value());  // a long one is the service's to digest
    }
    FUZZ_CHECK(to.hits.has_value() == from.has_hits_addend());
    if (to.hits) {
      FUZZ_CHECK(static_cast<uint64_t>(*to.hits) ==
                 std::min<uint64_t>(from.hits_addend().value(), INT64_MAX));
    }
    FUZZ_CHECK(to.limit_override.has_value() == from.has_limit());
    if (to.limit_override) {
      FUZZ_CHECK(to.limit_override->requests_per_unit == from.limit().requests_per_unit());
    }
  }
}

// The rules, counted here rather than by the rules' own code (Envoy's values may be empty, its
// hits are unsigned): sizes never break one.
bool MeetsTheRules(const CheckRequest& r) {
  if (r.domain.empty() || r.descriptors.empty() || r.hits < 0) return false;
  for (const auto& d : r.descriptors) {
    if (d.entries.empty() || (d.hits && *d.hits < 0)) return false;
    for (const auto& [key, value] : d.entries) {
      if (key.empty()) return false;
    }
  }
  return true;
}

// Whether descriptor i is past the bounds (1024 descriptors, 64 entries, 4096-byte keys),
// written here: the service must answer it OK with no limit.
bool PastTheBounds(const CheckRequest& r, size_t i) {
  if (i >= 1024 || r.descriptors[i].entries.size() > 64) return true;
  for (const auto& [key, value] : r.descriptors[i].entries) {
    if (key.size() > 4096) return true;
  }
  return false;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* bytes, size_t size) {
  rls::RateLimitRequest in;
  if (!in.ParseFromArray(bytes, static_cast<int>(size))) return 0;
  const auto request = sluice::server::FromEnvoyRequest(in);
  FUZZ_CHECK(request.has_value() == ExpectTranslated(in));
  if (!request) return 0;
  CheckTranslation(in, *request);
  FUZZ_CHECK(sluice::server::ValidateCheck(*request).has_value() == MeetsTheRules(*request));

  // A fresh service each time: the same input decides the same way.
  sluice::ManualClock clock;
  sluice::server::Metrics metrics;
  sluice::server::ServiceOptions options;
  options.clock = &clock;
  sluice::OpenStoreOptions store_options;
  store_options.memory.max_bytes = size_t{64} << 20;
  auto opened = sluice::OpenStore("memory", store_options);
  FUZZ_CHECK(opened.has_value());
  auto service =
      sluice::server::RateLimitService::Create(LoadedConfig(), *opened, options, &metrics);
  FUZZ_CHECK(service.has_value());
  // Twice: the second call meets the counters the first one left.
  for (int round = 0; round < 2; ++round) {
    const auto response = (*service)->Check(*request);
    if (!response) {
      // Only the caller's fault: the rules, or an override's rate (the memory store does not
      // fail).
      FUZZ_CHECK(!response.error().message.empty());
      bool overrides = false;
      for (const auto& d : request->descriptors) overrides = overrides || d.limit_override;
      FUZZ_CHECK(overrides || !sluice::server::AdmitCheck(*request, *LoadedConfig()).has_value());
      break;
    }
    FUZZ_CHECK(response->statuses.size() == request->descriptors.size());
    for (size_t i = 0; i < response->statuses.size(); ++i) {
      if (!PastTheBounds(*request, i)) continue;
      FUZZ_CHECK(response->statuses[i].limit == nullptr);
      FUZZ_CHECK(response->statuses[i].code == sluice::server::Code::kOk);
    }
    bool over = false;
    for (const auto& s : response->statuses)
      over = over || s.code == sluice::server::Code::kOverLimit;
    FUZZ_CHECK(over == (response->overall == sluice::server::Code::kOverLimit));
    rls::RateLimitResponse out;
    sluice::server::ToEnvoyResponse(*response, {}, &out);
    FUZZ_CHECK(out.statuses_size() == in.descriptors_size());
    FUZZ_CHECK((out.overall_code() == rls::RateLimitResponse::OVER_LIMIT) == over);
    clock.Advance(sluice::Duration(1'000'000));
  }
  return 0;
}
