#include "store/redis/redis_client.h"

#include <hiredis/hiredis.h>

#include <utility>

#include "store/redis/redis_connection.h"
#include "store/redis/redis_endpoint.h"

namespace sluice::internal {

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
  RedisEndpoint endpoint;
  endpoint.host = host;
  endpoint.port = port;
  endpoint.connect_timeout = connect_timeout;
  endpoint.command_timeout = command_timeout;
  return Connect(endpoint);
}

Result<std::unique_ptr<RedisClient>> RedisClient::Connect(const RedisEndpoint& endpoint) {
  auto connection = RedisConnection::Open(endpoint);
  if (!connection) return MakeError("redis " + endpoint.Name() + ": " + connection.error().message);
  std::unique_ptr<RedisClient> client(new RedisClient(std::move(*connection)));
  if (!endpoint.password.empty()) {
    std::vector<std::string> auth = {"AUTH"};
    if (!endpoint.user.empty()) auth.push_back(endpoint.user);
    auth.push_back(endpoint.password);
    if (auto ok = client->Command(auth); !ok) return std::unexpected(ok.error());
  }
  if (endpoint.db != 0) {
    if (auto ok = client->Command({"SELECT", std::to_string(endpoint.db)}); !ok) {
      return std::unexpected(ok.error());
    }
  }
  return client;
}

RedisClient::RedisClient(std::unique_ptr<RedisConnection> connection)
    : connection_(std::move(connection)) {}

RedisClient::~RedisClient() = default;

Result<RedisReply> RedisClient::Command(const std::vector<std::string>& args) {
  return connection_->Command(args);
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
