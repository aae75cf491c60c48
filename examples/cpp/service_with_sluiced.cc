// A service that asks sluiced before doing work, through the SDK (sluice::client::Client). The
// loop stands in for a request handler: each request is checked, a refused one would get 429
// with the Retry-After sluiced gave. Over-limit answers are cached until their retry time, so a
// caller hammering a refused key costs sluiced no call; when sluiced cannot answer within the
// deadline, the failure mode decides -- open here, so that an outage of the limiter does not
// become an outage of the service.
//
//   service_with_sluiced HOST PORT DOMAIN KEY VALUE REQUESTS
//   service_with_sluiced 127.0.0.1 8080 api api_key key_live_pro_7f3a 5
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "sluice/client/client.h"
#include "sluice/clock.h"

namespace client = sluice::client;

namespace {

const char* SourceName(client::Source source) {
  switch (source) {
    case client::Source::kSluiced:
      return "sluiced";
    case client::Source::kCache:
      return "cache";
    case client::Source::kFailureMode:
      return "failure mode";
  }
  return "?";
}

// Retry-After as HTTP says it: whole seconds, rounded up.
long long RetryAfterSeconds(sluice::Duration wait) {
  return static_cast<long long>(std::chrono::ceil<std::chrono::seconds>(wait).count());
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 7) {
    std::fprintf(stderr, "usage: %s HOST PORT DOMAIN KEY VALUE REQUESTS\n", argv[0]);
    return 2;
  }
  client::ClientOptions options;
  options.host = argv[1];
  options.port = std::atoi(argv[2]);
  options.deadline = std::chrono::seconds(1);  // generous for a demo; a service would use less
  options.failure_mode = client::FailureMode::kOpen;
  sluice::MonotonicClock clock;
  auto sluiced = client::Client::Create(options, clock);
  if (!sluiced) {
    std::fprintf(stderr, "%s\n", sluiced.error().message.c_str());
    return 2;
  }

  client::CheckRequest request;
  request.domain = argv[3];
  request.descriptors = {{.entries = {{argv[4], argv[5]}}, .hits = std::nullopt}};
  const int requests = std::atoi(argv[6]);
  for (int i = 1; i <= requests; ++i) {
    auto answer = (*sluiced)->Check(request);
    if (!answer) {  // sluiced said the check itself is wrong (an unknown domain, ...)
      std::fprintf(stderr, "request %d: %s\n", i, answer.error().message.c_str());
      return 1;
    }
    if (answer->allowed) {
      std::printf("request %d: 200 (%s)\n", i, SourceName(answer->source));
    } else if (answer->retry_after) {
      std::printf("request %d: 429 Retry-After: %lld (%s)\n", i,
                  RetryAfterSeconds(*answer->retry_after), SourceName(answer->source));
    } else {
      std::printf("request %d: 429 (%s)\n", i, SourceName(answer->source));
    }
  }
  const client::ClientStats stats = (*sluiced)->Stats();
  std::printf("checks: %llu, from the cache: %llu, by the failure mode: %llu, connections: %llu\n",
              static_cast<unsigned long long>(stats.calls),
              static_cast<unsigned long long>(stats.cache_answers),
              static_cast<unsigned long long>(stats.failure_answers),
              static_cast<unsigned long long>(stats.connections_opened));
  return 0;
}
