#include "http/http_message.h"

#include "http/json_text.h"

namespace sluice::server {

HttpReply ErrorReply(int status, std::string_view message) {
  HttpReply reply;
  reply.status = status;
  reply.body = "{\"error\":";
  AppendJsonString(reply.body, message);
  reply.body += "}\n";
  return reply;
}

}  // namespace sluice::server
