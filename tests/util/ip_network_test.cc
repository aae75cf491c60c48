// IP addresses and CIDR blocks, against blocks worked out by hand (RFC 4632 / RFC 4291 notation).
#include "util/ip_network.h"

#include <gtest/gtest.h>

namespace sluice::util {
namespace {

bool In(std::string_view network, std::string_view address) {
  const auto net = ParseIpNetwork(network);
  const auto ip = ParseIpAddress(address);
  EXPECT_TRUE(net.has_value()) << network;
  EXPECT_TRUE(ip.has_value()) << address;
  return net && ip && net->Contains(*ip);
}

TEST(IpNetwork, Ipv4BlocksContainExactlyTheirRange) {
  EXPECT_TRUE(In("10.0.0.0/8", "10.0.0.0"));
  EXPECT_TRUE(In("10.0.0.0/8", "10.255.255.255"));
  EXPECT_FALSE(In("10.0.0.0/8", "11.0.0.0"));
  EXPECT_FALSE(In("10.0.0.0/8", "9.255.255.255"));
  EXPECT_TRUE(In("192.168.4.0/22", "192.168.7.255"));
  EXPECT_FALSE(In("192.168.4.0/22", "192.168.8.0"));
  EXPECT_FALSE(In("192.168.4.0/22", "192.168.3.255"));
  EXPECT_TRUE(In("127.0.0.1", "127.0.0.1"));  // an address alone is a /32
  EXPECT_FALSE(In("127.0.0.1", "127.0.0.2"));
  EXPECT_TRUE(In("0.0.0.0/0", "203.0.113.9"));
}

TEST(IpNetwork, Ipv6BlocksContainExactlyTheirRange) {
  EXPECT_TRUE(In("2001:db8::/32", "2001:db8:ffff::1"));
  EXPECT_FALSE(In("2001:db8::/32", "2001:db9::"));
  EXPECT_TRUE(In("fe80::/10", "febf::1"));
  EXPECT_FALSE(In("fe80::/10", "fec0::1"));
  EXPECT_TRUE(In("::1", "::1"));
  EXPECT_FALSE(In("::1", "::2"));
}

TEST(IpNetwork, FamiliesNeverMatchEachOtherButMappedIpv4IsIpv4) {
  EXPECT_FALSE(In("::/0", "10.0.0.1"));
  EXPECT_FALSE(In("0.0.0.0/0", "2001:db8::1"));
  EXPECT_TRUE(In("10.0.0.0/8", "::ffff:10.1.2.3"));
  EXPECT_EQ(ParseIpAddress("::ffff:10.1.2.3")->ToString(), "10.1.2.3");
}

TEST(IpNetwork, RefusesMalformedBlocks) {
  for (std::string_view bad : {"", "10.0.0.0/", "10.0.0.0/33", "::/129", "10.0.0.0/-1",
                               "10.0.0.0/8x", "10.0.0/8", "example.com", "10.0.0.1/8"}) {
    EXPECT_FALSE(ParseIpNetwork(bad).has_value()) << bad;
  }
  EXPECT_NE(ParseIpNetwork("10.0.0.1/8").error().find("10.0.0.0/8"), std::string::npos);
}

TEST(IpAddress, ReadsTheFormsProxiesWrite) {
  EXPECT_EQ(ParseIpAddress("203.0.113.9")->ToString(), "203.0.113.9");
  EXPECT_EQ(ParseIpAddress("203.0.113.9:4711")->ToString(), "203.0.113.9");
  EXPECT_EQ(ParseIpAddress("[2001:db8::1]")->ToString(), "2001:db8::1");
  EXPECT_EQ(ParseIpAddress("[2001:DB8:0::1]:443")->ToString(), "2001:db8::1");
  EXPECT_EQ(ParseIpAddress("2001:db8::1")->ToString(), "2001:db8::1");
  for (std::string_view bad : {"", "unknown", "_hidden", "1.2.3.4:", "1.2.3.4:99999", "[1.2.3.4]",
                               "[::1", "[::1]x", "1.2.3.4.5", " 1.2.3.4"}) {
    EXPECT_FALSE(ParseIpAddress(bad).has_value()) << bad;
  }
}

}  // namespace
}  // namespace sluice::util
