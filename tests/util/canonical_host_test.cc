// Canonical hosts: the spellings of one host that must share its counter, and what is no host.
#include "util/canonical_host.h"

#include <gtest/gtest.h>

namespace sluice::util {
namespace {

std::string Host(std::string_view in) {
  const auto h = CanonicalHost(in);
  EXPECT_TRUE(h.has_value()) << in << ": " << (h ? "" : h.error());
  return h ? *h : "<error>";
}

TEST(CanonicalHost, OneHostManySpellings) {
  for (std::string_view s : {"shaped.example", "shaped.example.", "Shaped.Example",
                             "SHAPED.EXAMPLE.:8443", "shaped.example:80", "shaped.example:"}) {
    EXPECT_EQ(Host(s), "shaped.example") << s;
  }
  EXPECT_EQ(Host("localhost"), "localhost");
  EXPECT_EQ(Host("my_host-1.internal"), "my_host-1.internal");
  EXPECT_EQ(Host("203.0.113.7:8080"), "203.0.113.7");
  EXPECT_NE(Host("shaped.examplex"), "shaped.example");
}

TEST(CanonicalHost, Ipv6LiteralsInCanonicalText) {
  for (std::string_view s :
       {"[2001:DB8:0:0::1]", "[2001:db8::1]:443", "[2001:0db8::0001]", "2001:db8::1"}) {
    EXPECT_EQ(Host(s), "[2001:db8::1]") << s;
  }
  EXPECT_EQ(Host("[::1]:80"), "[::1]");
}

TEST(CanonicalHost, WhatIsNoHost) {
  for (std::string_view s :
       {"", ".", "a..b", ".a", "a.example..", "bad host", "a/b", "a%2eb", "h\xc3\xa9.example",
        "a:b", "a:80:90", "[::1", "[::1]x", "[::1]:8x", "[v1.x]", "[10.0.0.1]", "1::2::3", "a@b"}) {
    EXPECT_FALSE(CanonicalHost(s).has_value()) << s;
  }
  EXPECT_FALSE(CanonicalHost(std::string(64, 'a') + ".example").has_value());  // a 64-byte label
  EXPECT_TRUE(CanonicalHost(std::string(63, 'a') + ".example").has_value());
  std::string long_name;
  while (long_name.size() < 250) long_name += "abcdefghi.";
  EXPECT_FALSE(CanonicalHost(long_name + "abcd").has_value());  // 254 bytes
}

}  // namespace
}  // namespace sluice::util
