// Fuzz target: the sluiced YAML config loader (config/config.h), through LoadConfig on a file,
// as sluiced loads it. The input is a domain file, optionally followed by a line "#plans" and
// the content of plans.yaml, the plan file a domain names with `plan_source: file:plans.yaml`.
// Checks, besides "no crash, no UB, no exception":
// - an error names the file it is about;
// - a loaded config holds only what the loader promises: every limited limit's spec passes
//   ValidateLimitSpec, every domain has a name, its plans have "default" when it has plans,
//   and every plan an identity is assigned to exists;
// - loading is deterministic (the same file loads to the same summary, limits and warnings);
// - a loaded domain answers a lookup without failing.
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>

#include "config/config.h"
#include "config/descriptor.h"
#include "fuzz_check.h"
#include "sluice/limit_spec.h"

namespace {

namespace fs = std::filesystem;
using sluice::server::Config;

// One temporary directory per process, removed at exit.
const fs::path& WorkDir() {
  static const fs::path dir = [] {
    std::string templ = (fs::temp_directory_path() / "sluice-fuzz-config-XXXXXX").string();
    FUZZ_CHECK(mkdtemp(templ.data()) != nullptr);
    std::atexit([] {
      std::error_code ec;
      fs::remove_all(WorkDir(), ec);
    });
    return fs::path(templ);
  }();
  return dir;
}

void Write(const fs::path& path, std::string_view text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(text.data(), static_cast<std::streamsize>(text.size()));
}

void CheckLoaded(const Config& config) {
  for (const auto& [name, domain] : config.domains()) {
    FUZZ_CHECK(!name.empty() && name == domain.name);
    for (const auto& limit : domain.limits) {
      FUZZ_CHECK(limit.domain == name);
      if (limit.kind == sluice::server::LimitKind::kLimited) {
        FUZZ_CHECK(sluice::ValidateLimitSpec(limit.spec).has_value());
      }
    }
    if (!domain.plans.empty()) {
      FUZZ_CHECK(!domain.plan_key.empty());
      FUZZ_CHECK(domain.plans.contains("default"));
    }
    for (const auto& [identity, plan] : domain.identity_plans) {
      FUZZ_CHECK(domain.plans.contains(plan));
    }
    const sluice::server::DescriptorEntry entries[] = {
        {domain.plan_key.empty() ? std::string_view("key") : domain.plan_key, "value"}};
    FUZZ_CHECK(sluice::server::Match(config, name, entries).has_value());
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* bytes, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(bytes), size);
  std::string_view plans;
  if (const size_t at = text.find("\n#plans\n"); at != std::string_view::npos) {
    plans = text.substr(at + 8);
    text = text.substr(0, at + 1);
  }
  const fs::path file = WorkDir() / "fuzz.yaml";
  Write(file, text);
  Write(WorkDir() / "plans.yaml", plans);

  const auto config = sluice::server::LoadConfig(file);
  const auto again = sluice::server::LoadConfig(file);
  FUZZ_CHECK(config.has_value() == again.has_value());
  if (!config) {
    FUZZ_CHECK(config.error().message == again.error().message);
    FUZZ_CHECK(config.error().message.find("yaml") != std::string::npos);
    return 0;
  }
  CheckLoaded(**config);
  FUZZ_CHECK(sluice::server::ConfigSummary(**config) == sluice::server::ConfigSummary(**again));
  FUZZ_CHECK((*config)->warnings() == (*again)->warnings());
  FUZZ_CHECK((*config)->limit_count() == (*again)->limit_count());
  return 0;
}
