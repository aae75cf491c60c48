#include "http/http_query.h"

#include <gtest/gtest.h>

namespace sluice::server {
namespace {

TEST(HttpQuery, SplitsTheTarget) {
  EXPECT_EQ(SplitTarget("/v1/state?domain=api").path, "/v1/state");
  EXPECT_EQ(SplitTarget("/v1/state?domain=api").query, "domain=api");
  EXPECT_EQ(SplitTarget("/healthz").query, "");
}

TEST(HttpQuery, DecodesInOrder) {
  auto q = ParseQuery("domain=api&path=%2Fv1%2Fpay&name=a+b&flag&&x=");
  ASSERT_TRUE(q.has_value());
  ASSERT_EQ(q->size(), 5u);
  EXPECT_EQ((*q)[0], (std::pair<std::string, std::string>("domain", "api")));
  EXPECT_EQ((*q)[1].second, "/v1/pay");
  EXPECT_EQ((*q)[2].second, "a b");
  EXPECT_EQ((*q)[3], (std::pair<std::string, std::string>("flag", "")));
  EXPECT_EQ((*q)[4], (std::pair<std::string, std::string>("x", "")));
}

TEST(HttpQuery, RejectsBadEscapes) {
  EXPECT_FALSE(ParseQuery("a=%G1").has_value());
  EXPECT_FALSE(ParseQuery("a=%4").has_value());
  EXPECT_FALSE(ParseQuery("a=%").has_value());
}

}  // namespace
}  // namespace sluice::server
