// Helpers shared by the server config tests: fixture paths, loading, matching.
#ifndef SLUICE_TESTS_SUPPORT_SERVER_TEST_UTIL_H_
#define SLUICE_TESTS_SUPPORT_SERVER_TEST_UTIL_H_

#include <gtest/gtest.h>

#include <initializer_list>
#include <memory>
#include <string>
#include <vector>

#include "config/config.h"
#include "config/descriptor.h"

namespace sluice::server::test {

inline std::string Fixture(const std::string& name) {
  return std::string(SLUICE_SERVER_FIXTURES) + "/" + name;
}

// The loaded config; a failed load fails the test and returns null.
inline std::shared_ptr<const Config> MustLoad(const std::string& path) {
  auto config = LoadConfig(path);
  EXPECT_TRUE(config.has_value()) << (config ? "" : config.error().message);
  return config ? *config : nullptr;
}

// The error message of a load that must fail ("" and a test failure if it loads).
inline std::string LoadError(const std::string& path) {
  auto config = LoadConfig(path);
  EXPECT_FALSE(config.has_value()) << path << " loaded, but should not";
  return config ? "" : config.error().message;
}

struct Entry {
  std::string key;
  std::string value;
};

// Matches entries given as owned strings; a failed match fails the test.
inline MatchResult MustMatch(const Config& config, std::string_view domain,
                             std::initializer_list<Entry> entries,
                             const LimitOverride* override = nullptr) {
  std::vector<DescriptorEntry> d;
  for (const Entry& e : entries) d.push_back({e.key, e.value});
  auto m = Match(config, domain, d, override);
  EXPECT_TRUE(m.has_value()) << (m ? "" : m.error().message);
  return m ? std::move(*m) : MatchResult{};
}

}  // namespace sluice::server::test

#endif  // SLUICE_TESTS_SUPPORT_SERVER_TEST_UTIL_H_
