#include "store/redis/redis_client.h"

#include <hiredis/hiredis.h>
#include <sys/time.h>

#include <utility>

#include "store/redis/redis_reply.h"

namespace sluice::internal {
namespace {

timeval ToTimeval(std::chrono::milliseconds d) {
  timeval tv{};
  tv.tv_sec = static_cast<time_t>(d.count() / 1000);
  tv.tv_usec = static_cast<suseconds_t>((d.count() % 1000) * 1000);
  return tv;
}

}  // namespace

RedisReply CopyReply(const redisReply* r) {
  RedisReply out;
  switch (r->type) {
    case REDIS_REPLY_INTEGER:
      out.type = RedisReply::Type::kInteger;
      out.integer = r->integer;
      break;
    case REDIS_REPLY_STRING:
      out.type = RedisReply::Type::kString;
      out.str.assign(r->str, r->len);
      break;
    case REDIS_REPLY_STATUS:
      out.type = RedisReply::Type::kStatus;
      out.str.assign(r->str, r->len);
      break;
    case REDIS_REPLY_ARRAY:
      out.type = RedisReply::Type::kArray;
      for (size_t i = 0; i < r->elements; ++i) out.elements.push_back(CopyReply(r->element[i]));
      break;
    default:
      break;
  }
  return out;
}

Result<std::unique_ptr<RedisClient>> RedisClient::Connect(
    const std::string& host, int port, std::chrono::milliseconds connect_timeout,
    std::chrono::milliseconds command_timeout) {
  redisContext* ctx = redisConnectWithTimeout(host.c_str(), port, ToTimeval(connect_timeout));
  if (ctx == nullptr)
    return MakeError("redis " + host + ":" + std::to_string(port) + ": out of memory");
  if (ctx->err != 0) {
    std::string why = ctx->errstr;
    redisFree(ctx);
    return MakeError("redis " + host + ":" + std::to_string(port) + ": " + why);
  }
  BoundReplies(ctx->reader);
  redisSetTimeout(ctx, ToTimeval(command_timeout));
  return std::unique_ptr<RedisClient>(new RedisClient(ctx));
}

Result<std::unique_ptr<RedisClient>> RedisClient::ConnectUnix(
    const std::string& path, std::chrono::milliseconds connect_timeout,
    std::chrono::milliseconds command_timeout) {
  redisContext* ctx = redisConnectUnixWithTimeout(path.c_str(), ToTimeval(connect_timeout));
  if (ctx == nullptr) return MakeError("redis unix:" + path + ": out of memory");
  if (ctx->err != 0) {
    std::string why = ctx->errstr;
    redisFree(ctx);
    return MakeError("redis unix:" + path + ": " + why);
  }
  BoundReplies(ctx->reader);
  redisSetTimeout(ctx, ToTimeval(command_timeout));
  return std::unique_ptr<RedisClient>(new RedisClient(ctx));
}

RedisClient::~RedisClient() { redisFree(ctx_); }

Result<RedisReply> RedisClient::Command(const std::vector<std::string>& args) {
  std::vector<const char*> argv;
  std::vector<size_t> lens;
  for (const std::string& a : args) {
    argv.push_back(a.data());
    lens.push_back(a.size());
  }
  auto* r = static_cast<redisReply*>(
      redisCommandArgv(ctx_, static_cast<int>(argv.size()), argv.data(), lens.data()));
  if (r == nullptr) return MakeError(std::string("redis: ") + ctx_->errstr);
  if (r->type == REDIS_REPLY_ERROR) {
    std::string why(r->str, r->len);
    freeReplyObject(r);
    return MakeError(why);
  }
  RedisReply out = CopyReply(r);
  freeReplyObject(r);
  return out;
}

Result<std::string> RedisClient::Load(const LuaScript& script) {
  auto r = Command({"SCRIPT", "LOAD", script.source});
  if (!r) return std::unexpected(r.error());
  sha_[&script] = r->str;
  return r->str;
}

Result<RedisReply> RedisClient::Eval(const LuaScript& script, const std::vector<std::string>& keys,
                                     const std::vector<std::string>& args) {
  auto it = sha_.find(&script);
  if (it == sha_.end()) {
    if (auto sha = Load(script); !sha) return std::unexpected(sha.error());
    it = sha_.find(&script);
  }
  for (int attempt = 0;; ++attempt) {
    std::vector<std::string> cmd = {"EVALSHA", it->second, std::to_string(keys.size())};
    cmd.insert(cmd.end(), keys.begin(), keys.end());
    cmd.insert(cmd.end(), args.begin(), args.end());
    auto r = Command(cmd);
    if (r || attempt > 0 || r.error().message.rfind("NOSCRIPT", 0) != 0) return r;
    if (auto sha = Load(script); !sha) return std::unexpected(sha.error());  // flushed: reload
  }
}

}  // namespace sluice::internal
