// Fuzz target: the Redis store's handling of what Redis answers. The bytes are what a Redis
// server (or whatever answers on its port) sends; hiredis' reader turns them into replies, as
// it does on a live connection (with BoundReplies), and our code takes over: CopyReply
// (redis_client.h), the limiter scripts' decision reader ReadDecision, alone and inside a
// multi-limit reply, and the cluster's MOVED/ASK parsing (redis_reply.h). Checks, besides "no
// crash, no UB":
// - CopyReply keeps every integer, string and element of hiredis' reply;
// - a decision ReadDecision accepts is the reply's numbers, microseconds exactly as
//   nanoseconds;
// - a redirection's address is the message's last word, and a split address its host and port.
#include <hiredis/hiredis.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "fuzz_check.h"
#include "store/redis/redis_client.h"
#include "store/redis/redis_reply.h"

namespace {

using sluice::internal::RedisReply;

// CopyReply's result against hiredis' own reply (an error reply, and any type sluice does not
// read, becomes kNil).
void CheckCopy(const redisReply& from, const RedisReply& to) {
  switch (from.type) {
    case REDIS_REPLY_INTEGER:
      FUZZ_CHECK(to.type == RedisReply::Type::kInteger && to.integer == from.integer);
      break;
    case REDIS_REPLY_STRING:
    case REDIS_REPLY_STATUS:
      FUZZ_CHECK(to.type == (from.type == REDIS_REPLY_STRING ? RedisReply::Type::kString
                                                             : RedisReply::Type::kStatus));
      FUZZ_CHECK(to.str == std::string_view(from.str, from.len));
      break;
    case REDIS_REPLY_ARRAY:
      FUZZ_CHECK(to.type == RedisReply::Type::kArray && to.elements.size() == from.elements);
      for (size_t i = 0; i < from.elements; ++i) CheckCopy(*from.element[i], to.elements[i]);
      break;
    default:
      FUZZ_CHECK(to.type == RedisReply::Type::kNil);
  }
}

void CheckDecision(const RedisReply& reply) {
  sluice::Decision d;
  d.limit = 10;
  if (!sluice::internal::ReadDecision(reply, d)) return;
  const auto& e = reply.elements;
  FUZZ_CHECK(reply.type == RedisReply::Type::kArray && e.size() >= 4);
  FUZZ_CHECK(d.limit == 10);
  FUZZ_CHECK(d.allowed == (e[0].integer == 1));
  FUZZ_CHECK(d.remaining == e[1].integer);
  const auto nanos = [](const RedisReply& micros) {
    return static_cast<__int128>(micros.integer) * 1000;
  };
  FUZZ_CHECK(d.reset_after.count() == nanos(e[2]));
  FUZZ_CHECK(d.retry_after.count() == nanos(e[3]));
  if (e.size() > 4) FUZZ_CHECK(d.delay.count() == nanos(e[4]));
}

void CheckRedirect(std::string_view message) {
  for (const std::string_view kind : {"MOVED ", "ASK "}) {
    std::string address;
    if (!sluice::internal::ParseRedirect(message, kind, address)) continue;
    FUZZ_CHECK(message.starts_with(kind));
    FUZZ_CHECK(!address.empty() && address.find(' ') == std::string::npos);
    FUZZ_CHECK(message.ends_with(" " + address));
    std::string host;
    int port = 0;
    if (sluice::internal::SplitAddress(address, host, port)) {
      FUZZ_CHECK(port > 0 && port < 65536);
      FUZZ_CHECK(address.starts_with(host + ":"));
      FUZZ_CHECK(address.find(':', host.size() + 1) == std::string::npos);
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* bytes, size_t size) {
  redisReader* reader = redisReaderCreate();
  FUZZ_CHECK(reader != nullptr);
  sluice::internal::BoundReplies(reader);  // as every connection's reader
  if (redisReaderFeed(reader, reinterpret_cast<const char*>(bytes), size) == REDIS_OK) {
    for (int n = 0; n < 64; ++n) {
      void* raw = nullptr;
      if (redisReaderGetReply(reader, &raw) != REDIS_OK || raw == nullptr) break;
      const auto* reply = static_cast<const redisReply*>(raw);
      const RedisReply copy = sluice::internal::CopyReply(reply);
      CheckCopy(*reply, copy);
      CheckDecision(copy);
      // A multi-limit script answers {now, {decision, ...}, rolled_back}.
      if (copy.elements.size() == 3) {
        for (const RedisReply& decision : copy.elements[1].elements) CheckDecision(decision);
      }
      if (reply->type == REDIS_REPLY_ERROR) CheckRedirect(std::string_view(reply->str, reply->len));
      freeReplyObject(raw);
    }
  }
  redisReaderFree(reader);
  return 0;
}
