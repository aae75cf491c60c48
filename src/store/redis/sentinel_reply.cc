#include "store/redis/sentinel_reply.h"

#include <algorithm>
#include <array>

namespace sluice::internal {

std::optional<MasterAddress> ReadHostPort(std::string_view host, std::string_view port) {
  if (host.empty() || host.size() > 255) return std::nullopt;
  if (!std::all_of(host.begin(), host.end(), [](char c) { return c > ' ' && c < 127; })) {
    return std::nullopt;
  }
  if (port.empty() || port.size() > 5 ||
      port.find_first_not_of("0123456789") != std::string_view::npos) {
    return std::nullopt;
  }
  const int n = std::stoi(std::string(port));
  if (n < 1 || n > 65535) return std::nullopt;
  return MasterAddress{std::string(host), n};
}

Result<MasterAddress> ReadMasterAddress(const RedisReply& reply, std::string_view master) {
  if (reply.type == RedisReply::Type::kNil) {
    return MakeError("the sentinel does not monitor a master named '" + std::string(master) + "'");
  }
  const auto& e = reply.elements;
  if (reply.type != RedisReply::Type::kArray || e.size() != 2 ||
      e[0].type != RedisReply::Type::kString || e[1].type != RedisReply::Type::kString) {
    return MakeError("unexpected reply to SENTINEL get-master-addr-by-name");
  }
  auto address = ReadHostPort(e[0].str, e[1].str);
  if (!address) return MakeError("the sentinel named an invalid master address");
  return *address;
}

std::optional<MasterAddress> ReadSwitchMaster(std::string_view payload, std::string_view master) {
  std::array<std::string_view, 5> fields;
  size_t n = 0;
  for (;;) {  // every space separates two fields: a trailing one makes an empty sixth
    const size_t space = payload.find(' ');
    if (n == fields.size()) return std::nullopt;  // more than five fields
    fields[n++] = payload.substr(0, space);
    if (space == std::string_view::npos) break;
    payload.remove_prefix(space + 1);
  }
  if (n != fields.size() || fields[0] != master) return std::nullopt;
  return ReadHostPort(fields[3], fields[4]);
}

std::optional<std::string> ReadMessage(const RedisReply& reply, std::string_view channel) {
  const auto& e = reply.elements;
  if (reply.type != RedisReply::Type::kArray || e.size() != 3) return std::nullopt;
  for (const RedisReply& part : e) {
    if (part.type != RedisReply::Type::kString) return std::nullopt;
  }
  if (e[0].str != "message" || e[1].str != channel) return std::nullopt;
  return e[2].str;
}

bool SaysMaster(const RedisReply& reply) {
  return reply.type == RedisReply::Type::kArray && !reply.elements.empty() &&
         reply.elements[0].type == RedisReply::Type::kString && reply.elements[0].str == "master";
}

}  // namespace sluice::internal
