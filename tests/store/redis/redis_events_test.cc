// The rate limiting of the Redis store's events (store/redis/redis_events.h), on a manual clock:
// what passes at once, what is held and passed on later with the count of what was left out,
// and that the last word on a state is the newest.
#include "store/redis/redis_events.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace sluice::internal {
namespace {

using std::chrono::seconds;
using Kind = RedisEventKind;

struct Sink {
  std::vector<RedisEvent> seen;
  RedisEventHook hook() {
    return [this](const RedisEvent& e) { seen.push_back(e); };
  }
};

RedisEvent Event(Kind kind, std::string message, std::string server = "127.0.0.1:6379") {
  return RedisEvent{kind, std::move(server), std::move(message), false, 0};
}

TEST(EventThrottle, TheFirstPassesRepeatsWithinTheIntervalAreHeldThenTheNewestPassesWithACount) {
  ManualClock clock;
  Sink sink;
  EventThrottle throttle(sink.hook(), clock, seconds(10));
  throttle.Emit(Event(Kind::kCommandError, "e1"));
  ASSERT_EQ(sink.seen.size(), 1u);
  EXPECT_EQ(sink.seen[0].message, "e1");
  EXPECT_EQ(sink.seen[0].suppressed, 0u);
  for (int i = 2; i <= 5; ++i) throttle.Emit(Event(Kind::kCommandError, "e" + std::to_string(i)));
  clock.Advance(seconds(9));
  throttle.Flush();
  EXPECT_EQ(sink.seen.size(), 1u) << "held until the interval is over";
  clock.Advance(seconds(1));
  throttle.Flush();
  ASSERT_EQ(sink.seen.size(), 2u);
  EXPECT_EQ(sink.seen[1].message, "e5") << "the newest held one";
  EXPECT_EQ(sink.seen[1].suppressed, 3u) << "e2, e3 and e4 were never passed on";
  throttle.Flush();
  EXPECT_EQ(sink.seen.size(), 2u) << "nothing is passed on twice";
}

TEST(EventThrottle, ServersAndKindsAreCountedApart) {
  ManualClock clock;
  Sink sink;
  EventThrottle throttle(sink.hook(), clock, seconds(10));
  throttle.Emit(Event(Kind::kCommandError, "a", "10.0.0.1:6379"));
  throttle.Emit(Event(Kind::kCommandError, "b", "10.0.0.2:6379"));
  throttle.Emit(Event(Kind::kAuthFailed, "c", "10.0.0.1:6379"));
  EXPECT_EQ(sink.seen.size(), 3u);
}

TEST(EventThrottle, TheLogEndsOnTheNewestStateOfAFlappingServer) {
  ManualClock clock;
  Sink sink;
  EventThrottle throttle(sink.hook(), clock, seconds(10));
  throttle.Emit(Event(Kind::kConnectionLost, "lost 1"));
  throttle.Emit(Event(Kind::kConnectionRestored, "restored 1"));
  throttle.Emit(Event(Kind::kConnectionLost, "lost 2"));
  throttle.Emit(Event(Kind::kConnectionRestored, "restored 2"));
  throttle.Emit(Event(Kind::kConnectionLost, "lost 3"));
  ASSERT_EQ(sink.seen.size(), 2u);
  clock.Advance(seconds(10));
  throttle.Flush();
  // Held, oldest first: restored 2 then lost 3 -- the server is down, and the log says so last.
  ASSERT_EQ(sink.seen.size(), 4u);
  EXPECT_EQ(sink.seen[2].message, "restored 2");
  EXPECT_EQ(sink.seen[3].message, "lost 3");
  EXPECT_EQ(sink.seen[2].suppressed + sink.seen[3].suppressed, 1u) << "lost 2 was replaced";
}

TEST(EventThrottle, AnEventPassedOnDropsOlderHeldOnesOfItsState) {
  ManualClock clock;
  Sink sink;
  EventThrottle throttle(sink.hook(), clock, seconds(10));
  throttle.Emit(Event(Kind::kConnectionLost, "lost 1"));
  clock.Advance(seconds(1));
  throttle.Emit(Event(Kind::kConnectionRestored, "restored 1"));
  throttle.Emit(Event(Kind::kConnectionLost, "lost 2"));  // held until t=10
  clock.Advance(seconds(10));
  throttle.Emit(Event(Kind::kConnectionRestored, "restored 2"));  // passes: 11 - 1 >= 10
  ASSERT_EQ(sink.seen.size(), 3u);
  EXPECT_EQ(sink.seen[2].message, "restored 2");
  EXPECT_EQ(sink.seen[2].suppressed, 1u) << "lost 2 is older: dropped, and counted";
  throttle.Flush();
  EXPECT_EQ(sink.seen.size(), 3u) << "the stale 'lost 2' must not follow 'restored 2'";
}

TEST(EventThrottle, NoSinkNoEvents) {
  ManualClock clock;
  EventThrottle throttle(RedisEventHook{}, clock, seconds(10));
  throttle.Emit(Event(Kind::kCommandError, "x"));
  throttle.Flush();  // nothing to call, nothing to crash
}

}  // namespace
}  // namespace sluice::internal
