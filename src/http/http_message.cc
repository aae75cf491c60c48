#include "http/http_message.h"

#include "util/json_string.h"

namespace sluice::server {

HttpReply ErrorReply(int status, std::string_view message) {
  HttpReply reply;
  reply.status = status;
  reply.body = "{\"error\":";
  util::AppendJsonStringOfBytes(reply.body, message);
  reply.body += "}\n";
  return reply;
}

}  // namespace sluice::server
