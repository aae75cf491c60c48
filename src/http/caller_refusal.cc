#include "http/caller_refusal.h"

#include <string>

namespace sluice::server {

HttpReply CallerRefusal(AuthFailure failure, std::string_view credential, RefusalBody body) {
  std::string message;
  int status = 401;
  switch (failure) {
    case AuthFailure::kMissing:
      message = "no credential: send " + std::string(credential) + " (--api-tokens is on)";
      break;
    case AuthFailure::kUnknown:
      message = "the credential names no client of --api-tokens";
      break;
    case AuthFailure::kDomain:
      status = 403;
      message = "this client may not check that domain";
      break;
  }
  HttpReply reply;
  if (body == RefusalBody::kJson) {
    reply = ErrorReply(status, message);
  } else {
    reply.status = status;
    reply.content_type = "text/plain; charset=utf-8";
    reply.body = "sluice: " + message + "\n";
  }
  if (status == 401) {
    // RFC 6750 3: the scheme, and invalid_token when a token was sent but is not known.
    reply.headers.emplace_back("WWW-Authenticate",
                               failure == AuthFailure::kUnknown
                                   ? "Bearer realm=\"sluiced\", error=\"invalid_token\""
                                   : "Bearer realm=\"sluiced\"");
  }
  return reply;
}

}  // namespace sluice::server
