// An HTTP request and reply as the API sees them, without any networking type: the server
// (http_server.h, Boost.Beast) fills an HttpRequestView from the wire and writes the HttpReply
// back, and the API (http_api.h) maps one to the other. Keeping Beast out of here keeps the API
// unit-testable and the compile of everything that includes it fast.
#ifndef SLUICE_SERVER_HTTP_MESSAGE_H_
#define SLUICE_SERVER_HTTP_MESSAGE_H_

#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace sluice::server {

// Views into the server's buffers: valid only during the call that receives them.
struct HttpRequestView {
  std::string_view method;         // "GET", "POST", ...
  std::string_view target;         // "/v1/state?domain=api&api_key=k1"
  std::string_view authorization;  // the Authorization header, empty when absent
  std::string_view body;
};

struct HttpReply {
  int status = 200;
  std::string content_type = "application/json";
  std::vector<std::pair<std::string, std::string>> headers;  // besides Content-Type/-Length
  std::string body;
};

// A reply {"error":"<message>"} with `status`.
HttpReply ErrorReply(int status, std::string_view message);

}  // namespace sluice::server

#endif  // SLUICE_SERVER_HTTP_MESSAGE_H_
