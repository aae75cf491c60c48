// An HttpReply as the bytes of an HTTP/1.x response, appended to a buffer the connection reuses
// (one write per response, no per-field objects):
//
//   HTTP/1.1 429 Too Many Requests\r\n
//   Content-Type: application/json\r\n
//   RateLimit-Policy: ...\r\n            (the reply's headers, in order)
//   Connection: close\r\n                (HTTP/1.1 and not kept alive; HTTP/1.0 kept alive
//                                         says "Connection: keep-alive")
//   Content-Length: 123\r\n
//   \r\n
//   {"overall":...}
#ifndef SLUICE_HTTP_HTTP_RESPONSE_H_
#define SLUICE_HTTP_HTTP_RESPONSE_H_

#include <string>
#include <string_view>

#include "http/http_message.h"

namespace sluice::server {

// The reason phrase of a status code ("Too Many Requests"); "Unknown" for codes sluiced never
// sends.
std::string_view ReasonPhrase(int status);

// version is 10 or 11 (the request's). A response to HEAD (head_request) has no body, but its
// Content-Length is the body's, as for GET (RFC 9110 9.3.2); a body there would be read by a
// keep-alive client as the start of its next response.
void AppendHttpResponse(std::string& out, const HttpReply& reply, unsigned version, bool keep_alive,
                        bool head_request = false);

}  // namespace sluice::server

#endif  // SLUICE_HTTP_HTTP_RESPONSE_H_
