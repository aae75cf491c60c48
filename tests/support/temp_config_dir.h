// A config directory for one test, removed at the end: tests that load YAML through
// LoadConfig write it here.
#ifndef SLUICE_TESTS_SUPPORT_TEMP_CONFIG_DIR_H_
#define SLUICE_TESTS_SUPPORT_TEMP_CONFIG_DIR_H_

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

namespace sluice::server::test {

class TempConfigDir {
 public:
  // Unique per process and test: ctest runs tests as parallel processes, where `this` (or a
  // heap address under ASan) can repeat.
  explicit TempConfigDir(const std::string& prefix)
      : path_(std::filesystem::path(::testing::TempDir()) /
              (prefix + "-" + std::to_string(getpid()) + "-" +
               ::testing::UnitTest::GetInstance()->current_test_info()->name())) {
    std::filesystem::create_directories(path_);
  }
  ~TempConfigDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  TempConfigDir(const TempConfigDir&) = delete;
  TempConfigDir& operator=(const TempConfigDir&) = delete;

  const std::filesystem::path& path() const { return path_; }

  // Writes (or rewrites) `name` in the directory; returns its path.
  std::filesystem::path Write(const std::string& name, const std::string& yaml) const {
    const std::filesystem::path file = path_ / name;
    std::ofstream(file) << yaml;
    return file;
  }

 private:
  std::filesystem::path path_;
};

}  // namespace sluice::server::test

#endif  // SLUICE_TESTS_SUPPORT_TEMP_CONFIG_DIR_H_
