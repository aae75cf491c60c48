#include "http/async_check.h"

#include <atomic>
#include <condition_variable>
#include <mutex>
#include <optional>
#include <utility>

namespace sluice::server {

// One check between AnswerCheck and the service's answer. Which of the two came first is
// decided under `mu`: the answer stores its reply unless the handler has already deferred, in
// which case it sends it; the handler returns the stored reply, or defers. Both hold a
// reference, and the last to let go deletes it. Owned by a count rather than a shared_ptr so
// that the service's callback (two pointers) fits in std::function's own buffer: one
// allocation per check.
struct PendingCheck {
  std::mutex mu;
  std::condition_variable answered;  // for a request without a deferral (tests)
  std::optional<HttpReply> reply;    // the answer, while the handler has not taken it
  std::chrono::steady_clock::time_point asked = std::chrono::steady_clock::now();
  HttpReplyCallback send;  // set once the handler deferred
  bool deferred = false;
  std::atomic<int> refs{2};  // the handler's and the answer's

  void Release() {
    if (refs.fetch_sub(1, std::memory_order_acq_rel) == 1) delete this;
  }
};

namespace {

// The answer's side: sends `reply` if the handler has deferred, else leaves it for the handler.
void Deliver(PendingCheck* pending, HttpReply reply) {
  std::unique_lock<std::mutex> lock(pending->mu);
  if (pending->deferred) {
    const HttpReplyCallback send = std::move(pending->send);
    lock.unlock();
    pending->Release();
    send(std::move(reply));
    return;
  }
  pending->reply = std::move(reply);
  pending->answered.notify_one();
  lock.unlock();
  pending->Release();
}

// The handler's side: the reply if it has come, else DeferredReply() after taking the request's
// deferral (the store is still working: this I/O thread must not wait for it); without a
// deferral (tests), waits for it.
HttpReply Await(PendingCheck* pending, const HttpRequestView& request) {
  std::unique_lock<std::mutex> lock(pending->mu);
  if (!pending->reply && request.deferral != nullptr) {
    pending->send = request.deferral->Defer();
    pending->deferred = true;
    lock.unlock();
    pending->Release();
    return DeferredReply();
  }
  pending->answered.wait(lock, [pending] { return pending->reply.has_value(); });
  HttpReply reply = std::move(*pending->reply);
  lock.unlock();
  pending->Release();
  return reply;
}

}  // namespace

PendingCheck* NewPendingCheck() { return new PendingCheck; }

HttpReply AwaitPendingCheck(PendingCheck* pending, const HttpRequestView& request) {
  return Await(pending, request);
}

void ReplyWith::operator()(HttpReply reply) const { Deliver(pending_, std::move(reply)); }

HttpReply AnswerCheck(RateLimitService& service, const CheckRequest& check,
                      const HttpRequestView& request, const CheckReplier& replier) {
  auto* pending = new PendingCheck;
  service.CheckAsync(check, [&replier, pending](Result<CheckResponse> response) {
    Deliver(pending, replier.Reply(response, pending->asked));
  });
  return Await(pending, request);
}

}  // namespace sluice::server
