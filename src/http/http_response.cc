#include "http/http_response.h"

#include <charconv>

namespace sluice::server {

std::string_view ReasonPhrase(int status) {
  switch (status) {
    case 200:
      return "OK";
    case 204:
      return "No Content";
    case 400:
      return "Bad Request";
    case 401:
      return "Unauthorized";
    case 403:
      return "Forbidden";
    case 404:
      return "Not Found";
    case 405:
      return "Method Not Allowed";
    case 408:
      return "Request Timeout";
    case 413:
      return "Payload Too Large";
    case 429:
      return "Too Many Requests";
    case 431:
      return "Request Header Fields Too Large";
    case 500:
      return "Internal Server Error";
    case 503:
      return "Service Unavailable";
    default:
      return "Unknown";
  }
}

void AppendHttpResponse(std::string& out, const HttpReply& reply, unsigned version, bool keep_alive,
                        bool head_request) {
  char number[24];
  out += version == 10 ? "HTTP/1.0 " : "HTTP/1.1 ";
  out.append(number, std::to_chars(number, number + sizeof number, reply.status).ptr);
  out += ' ';
  out += ReasonPhrase(reply.status);
  out += "\r\nContent-Type: ";
  out += reply.content_type;
  out += "\r\n";
  for (const auto& [name, value] : reply.headers) {
    out += name;
    out += ": ";
    out += value;
    out += "\r\n";
  }
  if (version == 10 && keep_alive) out += "Connection: keep-alive\r\n";
  if (version != 10 && !keep_alive) out += "Connection: close\r\n";
  out += "Content-Length: ";
  out.append(number, std::to_chars(number, number + sizeof number, reply.body.size()).ptr);
  out += "\r\n\r\n";
  if (!head_request) out += reply.body;
}

}  // namespace sluice::server
