// The test certificates (tests/support/make-test-certs) made into a temp directory for one test
// and removed after it; see the script's header for what each file is.
#ifndef SLUICE_TESTS_SUPPORT_TEST_CERTS_H_
#define SLUICE_TESTS_SUPPORT_TEST_CERTS_H_

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <string>

namespace sluice::testing {

class TestCerts {
 public:
  TestCerts()
      : dir_(std::filesystem::path(::testing::TempDir()) /
             ("certs-" + std::to_string(getpid()) + "-" +
              ::testing::UnitTest::GetInstance()->current_test_info()->name())) {
    const std::string command =
        std::string(SLUICE_SOURCE_DIR) + "/tests/support/make-test-certs '" + dir_.string() + "'";
    ok_ = std::system(command.c_str()) == 0;
  }
  ~TestCerts() {
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }
  TestCerts(const TestCerts&) = delete;
  TestCerts& operator=(const TestCerts&) = delete;

  bool ok() const { return ok_; }
  // "server.pem", "ca.pem", ... inside the directory.
  std::string operator[](const std::string& name) const { return (dir_ / name).string(); }
  const std::filesystem::path& dir() const { return dir_; }

 private:
  std::filesystem::path dir_;
  bool ok_ = false;
};

}  // namespace sluice::testing

#endif  // SLUICE_TESTS_SUPPORT_TEST_CERTS_H_
