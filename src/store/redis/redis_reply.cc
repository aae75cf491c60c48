#include "store/redis/redis_reply.h"

#include <hiredis/hiredis.h>

#include <charconv>

namespace sluice::internal {

bool IsScriptInteger(const RedisReply& r) {
  return r.type == RedisReply::Type::kInteger && r.integer >= -kLuaExact && r.integer <= kLuaExact;
}

namespace {

constexpr int64_t kNanosPerMicro = 1000;

using CreateArray = void* (*)(const redisReadTask*, int);

// hiredis' own reply functions, read once from a reader it creates (they are not exported).
const redisReplyObjectFunctions& HiredisFunctions() {
  static const redisReplyObjectFunctions functions = [] {
    redisReader* probe = redisReaderCreate();
    const redisReplyObjectFunctions defaults = *probe->fn;
    redisReaderFree(probe);
    return defaults;
  }();
  return functions;
}

void* CreateBoundedArray(const redisReadTask* task, int elements) {
  if (elements > kMaxReplyElements) return nullptr;  // hiredis: "Out of memory", the reader fails
  return HiredisFunctions().createArray(task, elements);
}

const redisReplyObjectFunctions& BoundedFunctions() {
  static const redisReplyObjectFunctions functions = [] {
    redisReplyObjectFunctions f = HiredisFunctions();
    f.createArray = CreateBoundedArray;
    return f;
  }();
  return functions;
}

}  // namespace

void BoundReplies(redisReader* reader) {
  // hiredis only reads through the pointer; its type is not const.
  reader->fn = const_cast<redisReplyObjectFunctions*>(&BoundedFunctions());
}

bool ReadDecision(const RedisReply& reply, Decision& d) {
  if (reply.type != RedisReply::Type::kArray || reply.elements.size() < 4 ||
      reply.elements.size() > 6) {
    return false;
  }
  const auto& e = reply.elements;
  for (const RedisReply& number : e) {
    if (!IsScriptInteger(number)) return false;
  }
  if (e[0].integer != 0 && e[0].integer != 1) return false;
  // The sixth, a calendar window's zone mismatch (redis_scripts.h), is a flag.
  if (e.size() == 6 && e[5].integer != 0 && e[5].integer != 1) return false;
  d.allowed = e[0].integer == 1;
  d.reason = d.allowed ? DecisionReason::kAdmitted : DecisionReason::kOverLimit;
  d.remaining = e[1].integer;
  d.reset_after = Duration(e[2].integer * kNanosPerMicro);
  d.retry_after = Duration(e[3].integer * kNanosPerMicro);
  if (e.size() > 4) d.delay = Duration(e[4].integer * kNanosPerMicro);
  return true;
}

bool ParseRedirect(std::string_view message, std::string_view kind, std::string& address) {
  if (!message.starts_with(kind)) return false;
  const size_t space = message.rfind(' ');
  if (space == std::string_view::npos || space + 1 >= message.size()) return false;
  address = std::string(message.substr(space + 1));
  return true;
}

bool SplitAddress(std::string_view address, std::string& host, int& port) {
  const size_t colon = address.rfind(':');
  if (colon == std::string_view::npos) return false;
  host = std::string(address.substr(0, colon));
  const std::string_view p = address.substr(colon + 1);
  const auto [end, ec] = std::from_chars(p.data(), p.data() + p.size(), port);
  return ec == std::errc() && end == p.data() + p.size() && port > 0 && port < 65536;
}

}  // namespace sluice::internal
