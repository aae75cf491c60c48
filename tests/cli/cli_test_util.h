// Small helpers shared by the CLI tests: temporary input files and a substring assertion.
#ifndef SLUICE_TESTS_CLI_CLI_TEST_UTIL_H_
#define SLUICE_TESTS_CLI_CLI_TEST_UTIL_H_

#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <string_view>

namespace sluice::cli::test {

using FilePtr = std::unique_ptr<std::FILE, int (*)(std::FILE*)>;

// An anonymous temporary file holding `content`, positioned at its start.
inline FilePtr TmpFileWith(std::string_view content) {
  FilePtr f(std::tmpfile(), &std::fclose);
  EXPECT_NE(f, nullptr) << "tmpfile() failed";
  if (!f) return f;
  EXPECT_EQ(std::fwrite(content.data(), 1, content.size(), f.get()), content.size());
  EXPECT_EQ(std::fflush(f.get()), 0);
  std::rewind(f.get());
  return f;
}

// Everything written to a FILE*, collected in memory (open_memstream).
class MemOut {
 public:
  MemOut() : f_(open_memstream(&buf_, &size_)) { EXPECT_NE(f_, nullptr); }
  MemOut(const MemOut&) = delete;
  MemOut& operator=(const MemOut&) = delete;
  ~MemOut() {
    if (f_ != nullptr) std::fclose(f_);
    std::free(buf_);
  }
  std::FILE* file() { return f_; }
  std::string str() {
    std::fflush(f_);
    return std::string(buf_, size_);
  }

 private:
  char* buf_ = nullptr;
  size_t size_ = 0;
  std::FILE* f_;
};

inline ::testing::AssertionResult ContainsFormat(const char* haystack_expr, const char* needle_expr,
                                                 std::string_view haystack,
                                                 std::string_view needle) {
  if (haystack.find(needle) != std::string_view::npos) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure()
         << haystack_expr << " does not contain " << needle_expr << "\n  text:   \"" << haystack
         << "\"\n  wanted: \"" << needle << "\"";
}

}  // namespace sluice::cli::test

#define EXPECT_CONTAINS(haystack, needle) \
  EXPECT_PRED_FORMAT2(::sluice::cli::test::ContainsFormat, haystack, needle)

#endif  // SLUICE_TESTS_CLI_CLI_TEST_UTIL_H_
