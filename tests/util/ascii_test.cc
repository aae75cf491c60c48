// ToLowerAscii and EqualsIgnoreAsciiCase over every byte, against std::tolower in the "C" locale
// (which folds exactly 'A'..'Z') as the oracle.
#include "util/ascii.h"

#include <gtest/gtest.h>

#include <cctype>
#include <string>

namespace sluice::util {
namespace {

TEST(Ascii, ToLowerFoldsOnlyAsciiLetters) {
  for (int c = 0; c < 256; ++c) {
    EXPECT_EQ(ToLowerAscii(static_cast<char>(c)), static_cast<char>(std::tolower(c))) << c;
  }
}

TEST(Ascii, EqualsIgnoreCaseOnEveryPairOfBytes) {
  for (int a = 0; a < 256; ++a) {
    for (int b = 0; b < 256; ++b) {
      const std::string x = {'k', static_cast<char>(a)};
      const std::string y = {'K', static_cast<char>(b)};
      ASSERT_EQ(EqualsIgnoreAsciiCase(x, y), std::tolower(a) == std::tolower(b)) << a << " " << b;
    }
  }
}

TEST(Ascii, EqualsIgnoreCaseExamples) {
  EXPECT_TRUE(EqualsIgnoreAsciiCase("", ""));
  EXPECT_TRUE(EqualsIgnoreAsciiCase("Content-Length", "content-length"));
  EXPECT_TRUE(EqualsIgnoreAsciiCase("bEARER ", "Bearer "));
  EXPECT_TRUE(EqualsIgnoreAsciiCase("MINUTE", "minute"));
  EXPECT_FALSE(EqualsIgnoreAsciiCase("minute", "minutes"));
  EXPECT_FALSE(EqualsIgnoreAsciiCase("Connection", "connectioN "));
  EXPECT_FALSE(EqualsIgnoreAsciiCase("[", "{"));                // 0x5B and 0x7B: not letters
  EXPECT_FALSE(EqualsIgnoreAsciiCase("\xC3\x89", "\xC3\xA9"));  // É and é: not ASCII
  static_assert(EqualsIgnoreAsciiCase("Hour", "hOUR"));
}

}  // namespace
}  // namespace sluice::util
