// A worker that never runs more than the configured number of jobs at once across every
// process sharing a sluiced store: each job takes a concurrency permit (POST /v1/acquire)
// before it starts; the permit renews itself while the job runs and is released when it goes
// out of scope -- also when the job throws. A refused job would be queued or answered 429 with
// the Retry-After sluiced gave (docs/load-protection.md).
//
//   # config: descriptors: [{key: backend, concurrency: {max_in_flight: 4, permit_ttl: 30s}}]
//   bounded_worker HOST PORT DOMAIN KEY VALUE JOBS
//   bounded_worker 127.0.0.1 8080 api backend reports 10
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "sluice/client/client.h"
#include "sluice/clock.h"

namespace client = sluice::client;

namespace {

// The job: a stand-in for the slow backend call the limit protects.
void RunJob(int job) {
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  std::printf("job %d done\n", job);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 7) {
    std::fprintf(stderr, "usage: %s HOST PORT DOMAIN KEY VALUE JOBS\n", argv[0]);
    return 2;
  }
  sluice::MonotonicClock clock;
  // failure_mode closed: when sluiced cannot answer, do not pile work onto the backend.
  auto made = client::Client::Create(
      {.host = argv[1], .port = std::atoi(argv[2]), .failure_mode = client::FailureMode::kClosed},
      clock);
  if (!made) {
    std::fprintf(stderr, "%s\n", made.error().message.c_str());
    return 2;
  }
  client::Client& sluiced = **made;
  const client::CheckRequest request{
      .domain = argv[3], .descriptors = {client::Descriptor{.entries = {{argv[4], argv[5]}}}}};

  std::vector<std::thread> jobs;
  for (int job = 0; job < std::atoi(argv[6]); ++job) {
    jobs.emplace_back([&sluiced, &request, job] {
      auto answer = sluiced.Acquire(request);
      if (!answer) {
        std::fprintf(stderr, "job %d: %s\n", job, answer.error().message.c_str());
        return;
      }
      if (!answer->allowed) {
        const auto wait = answer->retry_after.value_or(std::chrono::seconds(1));
        std::printf(
            "job %d refused: retry in %lld ms\n", job,
            static_cast<long long>(std::chrono::ceil<std::chrono::milliseconds>(wait).count()));
        return;
      }
      RunJob(job);  // answer->permit is released when `answer` goes out of scope
    });
  }
  for (std::thread& t : jobs) t.join();
  return 0;
}
