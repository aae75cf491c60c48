// Byte counts as operators write them: the values are written out by hand, not computed by the
// parser's own shifts.
#include "util/byte_size.h"

#include <gtest/gtest.h>

namespace sluice::util {
namespace {

TEST(ByteSize, PlainIntegersAndBinarySuffixes) {
  EXPECT_EQ(ParseByteSize("67108864"), 67108864u);
  EXPECT_EQ(ParseByteSize("0"), 0u);
  EXPECT_EQ(ParseByteSize("1Ki"), 1024u);
  EXPECT_EQ(ParseByteSize("64Mi"), 67108864u);
  EXPECT_EQ(ParseByteSize("1Gi"), 1073741824u);
  EXPECT_EQ(ParseByteSize("3Ti"), 3298534883328u);
  EXPECT_EQ(ParseByteSize("18446744073709551615"), 18446744073709551615u);
}

TEST(ByteSize, JunkIsRefusedWithTheTextAndTheForm) {
  for (const char* junk : {"", "Mi", "64M", "64 Mi", "64mi", " 64", "-1", "1.5Gi", "0x10", "64MiB",
                           "64Mi ", "abc", "1e9"}) {
    const auto parsed = ParseByteSize(junk);
    ASSERT_FALSE(parsed.has_value()) << junk;
    EXPECT_NE(parsed.error().find(std::string("'") + junk + "'"), std::string::npos)
        << parsed.error();
    EXPECT_NE(parsed.error().find("64Mi"), std::string::npos) << parsed.error();
  }
}

TEST(ByteSize, OverflowIsRefusedNotWrapped) {
  EXPECT_FALSE(ParseByteSize("18446744073709551616").has_value());
  EXPECT_FALSE(ParseByteSize("99999999999999999999999").has_value());
  EXPECT_FALSE(ParseByteSize("16777216Ti").has_value()) << "2^64: one past the largest";
  EXPECT_EQ(ParseByteSize("16777215Ti"), 18446742974197923840u);
}

}  // namespace
}  // namespace sluice::util
