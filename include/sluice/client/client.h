// sluice::client::Client: asks a sluiced whether requests may pass, over its HTTP API
// (POST /v1/check, docs/server.md), from another C++ service.
//
//   sluice::MonotonicClock clock;
//   auto client = client::Client::Create({.host = "127.0.0.1", .port = 8080}, clock);
//   client::CheckRequest req{.domain = "api", .descriptors = {{.entries = {{"api_key", key}}}}};
//   auto answer = (*client)->Check(req);
//   if (!answer) log(answer.error().message);          // sluiced refused the request as malformed
//   else if (!answer->allowed) reply 429, Retry-After: answer->retry_after;
//
// - Keep-alive: up to max_connections idle connections are kept and reused.
// - Every call has a deadline (connect, send and answer together). When sluiced cannot answer
//   within it (down, refusing, too slow, an answer that is not sluiced's), the failure mode
//   decides: kOpen allows, kClosed refuses; the answer says so (source kFailureMode, error).
// - Over-limit answers are cached: until the retry time sluiced gave, the same check (domain,
//   descriptors, hits) is refused locally without a call. Charges always go to sluiced.
// - Check blocks; CheckAsync runs the call on one of max_connections worker threads.
//
// - Acquire (POST /v1/acquire, docs/load-protection.md) returns a Permit holding the request's
//   concurrency slots: it releases them when destroyed (or on Release()), and renews itself in
//   the background every third of its permit_ttl, counted from when each acquire or renew was
//   sent, so a long request keeps its slots and a crashed process frees them within the TTL.
//
//     auto answer = client->Acquire(req);
//     if (answer && answer->allowed) { Work(); }   // answer->permit released at scope end
//
// Thread-safe. The clock times the cache and the deadlines; the deadline is enforced by poll(2)
// timeouts counted down on it, so with a ManualClock a call still ends after at most the
// deadline of real time per byte sluiced is silent for.
#ifndef SLUICE_CLIENT_CLIENT_H_
#define SLUICE_CLIENT_CLIENT_H_

#include <cstdint>
#include <functional>
#include <future>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "sluice/clock.h"
#include "sluice/status.h"
#include "sluice/time.h"

namespace sluice::client {

// Every field has a default, so designated initializers may leave any out.
struct Entry {
  std::string key{};
  std::string value{};
};

struct Descriptor {
  std::vector<Entry> entries{};
  std::optional<int64_t> hits{};  // this descriptor's own cost, overriding the request's
};

struct CheckRequest {
  std::string domain{};
  std::vector<Descriptor> descriptors{};
  int64_t hits = 1;
  bool charge = false;  // work already done: charged even beyond the limit, never cached
};

struct LimitStatus {
  bool over_limit = false;
  std::string limit_name;  // "" when no rule matched
  int64_t remaining = 0;
  Duration reset_after{0};
  std::optional<Duration> retry_after;  // over: when these hits could pass; nullopt: never
};

enum class Source {
  kSluiced,      // sluiced answered
  kCache,        // an over-limit answer cached from sluiced, still within its retry time
  kFailureMode,  // sluiced could not answer: the failure mode decided
};

struct CheckResponse {
  bool allowed = false;
  Source source = Source::kSluiced;
  // Not allowed: the longest wait of the limits that refused (from the cache: what is left of
  // it); nullopt when the hits can never pass, or when the failure mode refused.
  std::optional<Duration> retry_after;
  std::vector<LimitStatus> statuses;  // one per descriptor, when sluiced answered
  std::string error;                  // kFailureMode: why sluiced could not answer
};

enum class FailureMode { kOpen, kClosed };

// The slots an acquire took (POST /v1/acquire). Releases them when destroyed, with one call to
// sluiced bounded by the client's deadline; renews them in the background until then. Empty
// (held() false, nothing to release) when the acquire was refused, decided by the failure mode,
// or matched no concurrency limit. The Client must outlive its permits. Movable, not copyable.
class Permit {
 public:
  Permit() = default;
  ~Permit();
  Permit(Permit&& other) noexcept;
  Permit& operator=(Permit&& other) noexcept;
  Permit(const Permit&) = delete;
  Permit& operator=(const Permit&) = delete;

  // Holds slots: granted, not released, and not lost (a renew that found it expired, or one
  // that could not reach sluiced before the permit's TTL ran out on this process's clock).
  bool held() const;
  // sluiced's opaque permit text ("" when empty), for a release from elsewhere.
  const std::string& token() const;
  // Gives the slots back now (the destructor does otherwise): true when sluiced freed them;
  // false when it no longer held them; an error when it could not be asked (the slots then
  // stay held until their TTL). The permit is empty afterwards either way.
  Result<bool> Release();
  // Renewals that succeeded so far (the background renewer's).
  uint64_t renewals() const;

  struct State;  // internal

 private:
  friend class Client;
  explicit Permit(std::shared_ptr<State> state) : state_(std::move(state)) {}
  std::shared_ptr<State> state_;
};

struct AcquireResponse {
  bool allowed = false;
  Source source = Source::kSluiced;     // never kCache: acquires are not cached
  std::optional<Duration> retry_after;  // as CheckResponse's
  std::vector<LimitStatus> statuses;
  std::string error;       // kFailureMode: why sluiced could not answer
  Duration permit_ttl{0};  // the permit's TTL as sluiced gave it
  Permit permit;
};

struct ClientOptions {
  std::string host = "127.0.0.1";  // an IPv4 or IPv6 address (no name lookup on the hot path)
  int port = 8080;
  Duration deadline = std::chrono::milliseconds(100);  // per call
  FailureMode failure_mode = FailureMode::kOpen;
  int max_connections = 4;           // idle keep-alive connections kept; async worker threads
  size_t cache_max_entries = 10000;  // over-limit answers held; 0 turns the cache off
};

struct ClientStats {
  uint64_t calls = 0;               // checks made (blocking and async)
  uint64_t cache_answers = 0;       // answered from the over-limit cache
  uint64_t failure_answers = 0;     // answered by the failure mode
  uint64_t connections_opened = 0;  // TCP connections made (keep-alive reuses the rest)
};

class Client {
 public:
  // An error naming the option when host is not an IP address, port is out of range, deadline
  // is not positive or max_connections < 1. `clock` must outlive the client.
  static Result<std::unique_ptr<Client>> Create(const ClientOptions& options, const Clock& clock);
  ~Client();
  Client(const Client&) = delete;
  Client& operator=(const Client&) = delete;

  // The answer; an Error only when sluiced refused the request itself (a 4xx other than 429:
  // an unknown domain, an empty key, a body over its cap), which no retry would change.
  Result<CheckResponse> Check(const CheckRequest& request);
  // The same on a worker thread; the future is ready when Check would have returned.
  std::future<Result<CheckResponse>> CheckAsync(CheckRequest request);

  // A check that also takes the request's concurrency slots (POST /v1/acquire): the same
  // errors as Check ("charge" is refused). When sluiced cannot answer, the failure mode decides
  // and the permit is empty.
  Result<AcquireResponse> Acquire(const CheckRequest& request);

  ClientStats Stats() const;

 private:
  class Impl;
  explicit Client(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace sluice::client

#endif  // SLUICE_CLIENT_CLIENT_H_
