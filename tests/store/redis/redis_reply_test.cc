// Reading Redis' replies (store/redis/redis_reply.h) without a server: a script's decision
// reply, and what the reader refuses rather than compute with. The values expected are written
// out by hand.
#include "store/redis/redis_reply.h"

#include <gtest/gtest.h>
#include <hiredis/hiredis.h>

#include <cstdint>
#include <initializer_list>
#include <limits>
#include <string>

namespace sluice::internal {
namespace {

RedisReply Integer(int64_t v) {
  RedisReply r;
  r.type = RedisReply::Type::kInteger;
  r.integer = v;
  return r;
}

RedisReply Array(std::initializer_list<RedisReply> elements) {
  RedisReply r;
  r.type = RedisReply::Type::kArray;
  r.elements = elements;
  return r;
}

RedisReply Ints(std::initializer_list<int64_t> values) {
  RedisReply r;
  r.type = RedisReply::Type::kArray;
  for (const int64_t v : values) r.elements.push_back(Integer(v));
  return r;
}

TEST(RedisReply, ReadsADecision) {
  Decision d;
  d.limit = 10;
  ASSERT_TRUE(ReadDecision(Ints({1, 9, 1'500'000, 0}), d));
  EXPECT_TRUE(d.allowed);
  EXPECT_EQ(d.reason, DecisionReason::kAdmitted);
  EXPECT_EQ(d.limit, 10);
  EXPECT_EQ(d.remaining, 9);
  EXPECT_EQ(d.reset_after, Duration(1'500'000'000));
  EXPECT_EQ(d.retry_after, Duration(0));

  ASSERT_TRUE(ReadDecision(Ints({0, 0, 2'000, 250, 125}), d));
  EXPECT_FALSE(d.allowed);
  EXPECT_EQ(d.reason, DecisionReason::kOverLimit);
  EXPECT_EQ(d.reset_after, Duration(2'000'000));
  EXPECT_EQ(d.retry_after, Duration(250'000));
  EXPECT_EQ(d.delay, Duration(125'000));

  // A fixed window whose limit was lowered answers a negative remaining: it is read as sent.
  ASSERT_TRUE(ReadDecision(Ints({0, -3, 1, 1}), d));
  EXPECT_EQ(d.remaining, -3);
}

// Found by tests/fuzz/fuzz_redis_reply.cc: microseconds beyond int64 / 1000 overflowed the
// conversion to nanoseconds (undefined behaviour; in practice a wrapped, even negative, wait).
// No script can send a number beyond 2^53 (Lua's numbers are doubles), so such a reply, like one
// whose numbers are not integers, is not a decision.
TEST(RedisReply, RefusesWhatNoScriptSends) {
  constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
  constexpr int64_t k2To53 = int64_t{1} << 53;
  const Decision before{.allowed = true, .remaining = 7};
  for (const RedisReply& reply : {
           Ints({1, 9, kMax, 0}),        // reset beyond int64 nanoseconds
           Ints({0, 0, 1, kMax}),        // retry likewise
           Ints({1, 9, 1, 0, kMax}),     // delay likewise
           Ints({1, 9, k2To53 + 1, 0}),  // beyond what Lua holds exactly
           Ints({1, kMax, 1, 0}),        // remaining likewise
           Ints({1, std::numeric_limits<int64_t>::min(), 1, 0}),
           Ints({2, 9, 1, 0}),           // allowed is 0 or 1
           Ints({1, 9, 1}),              // too short
           Ints({1, 9, 1, 0, 0, 0, 0}),  // too long
           Ints({1, 9, 1, 0, 0, 2}),     // a calendar window's zone mismatch is 0 or 1
           Array({Integer(1), RedisReply{}, Integer(1), Integer(0)}),  // a nil
           Integer(1),                                                 // not an array
       }) {
    Decision d = before;
    EXPECT_FALSE(ReadDecision(reply, d));
    EXPECT_TRUE(d.allowed) << "unchanged";
    EXPECT_EQ(d.remaining, 7) << "unchanged";
  }
  Decision d;
  EXPECT_TRUE(ReadDecision(Ints({1, k2To53, k2To53, -k2To53, k2To53}), d)) << "the bound itself";
  EXPECT_EQ(d.reset_after, Duration(k2To53 * 1000));
}

// Found by tests/fuzz/fuzz_redis_reply.cc: hiredis allocated an array's element table from the
// count alone, so "*1854775808" cost 14 GB of address space and seconds; a bounded reader fails
// at once (on a connection: an error, then a reconnect) and still reads real replies.
TEST(RedisReply, BoundedReaderRefusesHugeArrays) {
  const auto read = [](const std::string& bytes, redisReply** reply) {
    redisReader* reader = redisReaderCreate();
    BoundReplies(reader);
    redisReaderFeed(reader, bytes.data(), bytes.size());
    void* raw = nullptr;
    const int status = redisReaderGetReply(reader, &raw);
    *reply = static_cast<redisReply*>(raw);
    redisReaderFree(reader);
    return status;
  };
  redisReply* reply = nullptr;
  EXPECT_EQ(read("*3\r\n*1854775808\r\n", &reply), REDIS_ERR);
  EXPECT_EQ(read("*" + std::to_string(kMaxReplyElements + 1) + "\r\n", &reply), REDIS_ERR);

  ASSERT_EQ(read("*3\r\n:1\r\n*1\r\n$2\r\nok\r\n:-4\r\n", &reply), REDIS_OK);
  ASSERT_NE(reply, nullptr);
  const RedisReply copy = CopyReply(reply);
  freeReplyObject(reply);
  ASSERT_EQ(copy.elements.size(), 3u);
  EXPECT_EQ(copy.elements[0].integer, 1);
  EXPECT_EQ(copy.elements[1].elements.at(0).str, "ok");
  EXPECT_EQ(copy.elements[2].integer, -4);
}

TEST(RedisReply, ParsesRedirects) {
  std::string address;
  EXPECT_TRUE(ParseRedirect("MOVED 3999 127.0.0.1:6381", "MOVED ", address));
  EXPECT_EQ(address, "127.0.0.1:6381");
  EXPECT_TRUE(ParseRedirect("ASK 1 ::1:7000", "ASK ", address));
  EXPECT_EQ(address, "::1:7000");
  EXPECT_FALSE(ParseRedirect("MOVED 3999 ", "MOVED ", address));
  EXPECT_FALSE(ParseRedirect("ASK 1 h:1", "MOVED ", address));

  std::string host;
  int port = 0;
  EXPECT_TRUE(SplitAddress("::1:7000", host, port));
  EXPECT_EQ(host, "::1");
  EXPECT_EQ(port, 7000);
  EXPECT_FALSE(SplitAddress("h:0", host, port));
  EXPECT_FALSE(SplitAddress("h:65536", host, port));
  EXPECT_FALSE(SplitAddress("h:7000x", host, port));
  EXPECT_FALSE(SplitAddress("h", host, port));
}

}  // namespace
}  // namespace sluice::internal
