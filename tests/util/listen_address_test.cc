// Listening addresses as the --http and --grpc flags take them.
#include "util/listen_address.h"

#include <gtest/gtest.h>

namespace sluice::util {
namespace {

TEST(ListenAddress, SplitsHostAndPortOfV4V6AndLocalhost) {
  auto v4 = SplitListenAddress("127.0.0.1:8080");
  ASSERT_TRUE(v4.has_value()) << v4.error();
  EXPECT_EQ(v4->host, "127.0.0.1");
  EXPECT_EQ(v4->port, 8080);
  EXPECT_FALSE(v4->v6);
  auto v6 = SplitListenAddress("[::1]:0");
  ASSERT_TRUE(v6.has_value()) << v6.error();
  EXPECT_EQ(v6->host, "::1");
  EXPECT_EQ(v6->port, 0);
  EXPECT_TRUE(v6->v6);
  EXPECT_EQ(SplitListenAddress("localhost:65535")->host, "127.0.0.1");
}

TEST(ListenAddress, RefusesWhatIsNotHostColonPort) {
  EXPECT_EQ(SplitListenAddress("8080").error(), "bad address '8080': expected host:port");
  EXPECT_EQ(SplitListenAddress("[::1]8080").error(), "bad address '[::1]8080': expected [v6]:port");
  for (const char* bad : {"h:", "h:65536", "h:-1", "h:80x", "h: 80"}) {
    ASSERT_FALSE(SplitListenAddress(bad).has_value()) << bad;
    EXPECT_EQ(SplitListenAddress(bad).error(), "bad port in address '" + std::string(bad) + "'");
  }
}

TEST(ListenAddress, UnixTakesAnAbsolutePath) {
  auto u = SplitListenAddress("unix:/run/sluice/http.sock");
  ASSERT_TRUE(u.has_value());
  EXPECT_TRUE(u->is_unix());
  EXPECT_EQ(u->unix_path, "/run/sluice/http.sock");
  EXPECT_FALSE(SplitListenAddress("127.0.0.1:80")->is_unix());
  EXPECT_EQ(SplitListenAddress("unix:run/http.sock").error(),
            "bad address 'unix:run/http.sock': expected unix:/absolute/path");
  EXPECT_FALSE(SplitListenAddress("unix:").has_value());
}

}  // namespace
}  // namespace sluice::util
