// One check asked of the service on behalf of an HTTP request, answered by the handler at once
// when the service answers before CheckAsync returns (the memory store: no deferral, no thread
// hop), or later through the request's HttpDeferral when the answer comes from another thread
// (Redis). Shared by the HTTP API (POST /v1/check) and the forward-auth endpoint, which differ
// only in how an answer becomes a reply.
#ifndef SLUICE_HTTP_ASYNC_CHECK_H_
#define SLUICE_HTTP_ASYNC_CHECK_H_

#include <chrono>
#include <functional>
#include <utility>

#include "http/http_message.h"
#include "service/check.h"
#include "service/rate_limit_service.h"

namespace sluice::server {

// Makes the reply to a service answer. Called once per check, on whichever thread answers;
// must be thread-safe and outlive the check (the front end that owns it outlives its server).
// `asked`: when the check was asked, which a shaper's delay counts from (a reply held for it,
// HttpReply::send_at, is due at asked + delay, the store's round trip included in the wait).
class CheckReplier {
 public:
  virtual ~CheckReplier() = default;
  virtual HttpReply Reply(const Result<CheckResponse>& response,
                          std::chrono::steady_clock::time_point asked) const = 0;
};

// Asks `service` and returns the handler's reply: the reply itself, or DeferredReply() after
// taking request.deferral's callback, which then gets it. A request without a deferral (tests)
// waits for the answer.
HttpReply AnswerCheck(RateLimitService& service, const CheckRequest& check,
                      const HttpRequestView& request, const CheckReplier& replier);

// One answer between AnswerAsync and whoever delivers its reply (async_check.cc).
struct PendingCheck;
PendingCheck* NewPendingCheck();
HttpReply AwaitPendingCheck(PendingCheck* pending, const HttpRequestView& request);

// Delivers the reply of one AnswerAsync. One pointer, copied freely, so that a callback that
// holds it and one more pointer fits in std::function's own buffer (no allocation per call).
class ReplyWith {
 public:
  explicit ReplyWith(PendingCheck* pending) : pending_(pending) {}
  void operator()(HttpReply reply) const;

 private:
  PendingCheck* pending_;
};

// The same for any asynchronous answer (the permit routes): `start` is given the ReplyWith that
// delivers the reply, which must be called exactly once, from any thread. A template so that
// `start` is called directly rather than through a std::function.
template <typename Start>
HttpReply AnswerAsync(Start&& start, const HttpRequestView& request) {
  PendingCheck* pending = NewPendingCheck();
  std::forward<Start>(start)(ReplyWith(pending));
  return AwaitPendingCheck(pending, request);
}

}  // namespace sluice::server

#endif  // SLUICE_HTTP_ASYNC_CHECK_H_
