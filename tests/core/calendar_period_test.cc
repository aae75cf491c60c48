// Calendar periods in a zone, against two independent oracles: glibc's localtime_r (TZ set per
// zone; glibc reads the same TZif files but with its own code, footer rule included) for random
// instants, and dates worked out by hand from the published DST rules.
#include "core/calendar_period.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <ctime>
#include <map>
#include <optional>
#include <random>
#include <string>

#include "sluice/calendar_window.h"

namespace sluice {
namespace {

using internal::CalendarPeriodAt;
using internal::FindTimeZone;
using internal::PeriodBounds;

constexpr int64_t kNs = 1'000'000'000;

// TZ for the duration of a test, restored after (tests in this binary run in one thread).
class ScopedTz {
 public:
  explicit ScopedTz(const char* zone) {
    if (const char* old = std::getenv("TZ")) old_ = old;
    setenv("TZ", zone, 1);
    tzset();
  }
  ~ScopedTz() {
    if (old_) {
      setenv("TZ", old_->c_str(), 1);
    } else {
      unsetenv("TZ");
    }
    tzset();
  }
  ScopedTz(const ScopedTz&) = delete;
  ScopedTz& operator=(const ScopedTz&) = delete;

 private:
  std::optional<std::string> old_;
};

std::tm Local(int64_t secs) {
  const std::time_t t = static_cast<std::time_t>(secs);
  std::tm tm{};
  localtime_r(&t, &tm);
  return tm;
}

// Days since 1970-01-01 of a civil date, by glibc's timegm.
int64_t DayNumber(const std::tm& local) {
  std::tm d{};
  d.tm_year = local.tm_year;
  d.tm_mon = local.tm_mon;
  d.tm_mday = local.tm_mday;
  return static_cast<int64_t>(timegm(&d)) / 86400;
}

// Which period a local date is in, as a number that differs between periods.
int64_t PeriodKey(const std::tm& local, CalendarUnit unit, bool sunday) {
  switch (unit) {
    case CalendarUnit::kDay:
      return DayNumber(local);
    case CalendarUnit::kWeek: {
      const int back = sunday ? local.tm_wday : (local.tm_wday + 6) % 7;
      return DayNumber(local) - back;
    }
    case CalendarUnit::kMonth:
      return int64_t{local.tm_year} * 12 + local.tm_mon;
    case CalendarUnit::kYear:
      return local.tm_year;
    case CalendarUnit::kNone:
      break;
  }
  return 0;
}

PeriodBounds At(const char* zone, CalendarUnit unit, int64_t secs, bool sunday = false) {
  auto z = FindTimeZone(zone);
  EXPECT_TRUE(z.has_value()) << zone;
  if (!z) return {};
  return CalendarPeriodAt(**z, unit, sunday, FromNanos(secs * kNs));
}

// The seconds [start, end) of a period.
struct Secs {
  int64_t start;
  int64_t end;
};
Secs InSeconds(PeriodBounds b) { return {b.start_ns / kNs, b.end_ns / kNs}; }

constexpr const char* kZones[] = {
    "UTC",
    "Europe/Lisbon",
    "America/New_York",
    "Australia/Sydney",
    "Australia/Lord_Howe",  // 30-minute DST
    "Pacific/Chatham",      // +12:45 / +13:45
    "America/St_Johns",     // -03:30 / -02:30
    "Asia/Kathmandu",       // +05:45
    "Asia/Kolkata",
    "Asia/Tokyo",
    "America/Havana",      // DST starts at midnight: 00:00 does not exist that day
    "America/Santiago",    // DST at 24:00
    "America/Sao_Paulo",   // DST started at 00:00 until 2019
    "Asia/Beirut",         // 00:00 -> 01:00
    "Pacific/Apia",        // skipped 2011-12-30 whole
    "Pacific/Kiritimati",  // +14, skipped 1994-12-31
    "Africa/Casablanca",
    "Europe/Dublin",  // negative DST in tzdata
    "Asia/Tehran",
    "America/Los_Angeles",
};

constexpr CalendarUnit kUnits[] = {CalendarUnit::kDay, CalendarUnit::kWeek, CalendarUnit::kMonth,
                                   CalendarUnit::kYear};

// Random instants 1970..2037 in 20 zones: the period holds the instant, its first second is in
// the instant's period and the second before it is not, its last second is in it and its end is
// not -- all read by localtime_r.
TEST(CalendarPeriodProperty, MatchesLocaltimeIn20Zones) {
  std::mt19937_64 rng(20261205);
  // To 2037-12-01, so no period reaches past the transitions Debian's TZif files list.
  std::uniform_int_distribution<int64_t> instant(0, 2143238400 - 1);
  for (const char* zone : kZones) {
    ScopedTz tz(zone);
    for (const CalendarUnit unit : kUnits) {
      for (const bool sunday : {false, true}) {
        if (sunday && unit != CalendarUnit::kWeek) continue;
        for (int i = 0; i < 400; ++i) {
          const int64_t t = instant(rng);
          const Secs p = InSeconds(At(zone, unit, t, sunday));
          SCOPED_TRACE(std::string(zone) + " " + std::string(CalendarUnitName(unit)) +
                       (sunday ? " sunday" : "") + " t=" + std::to_string(t));
          ASSERT_LE(p.start, t);
          ASSERT_LT(t, p.end);
          const int64_t key = PeriodKey(Local(t), unit, sunday);
          EXPECT_EQ(PeriodKey(Local(p.start), unit, sunday), key);
          EXPECT_NE(PeriodKey(Local(p.start - 1), unit, sunday), key);
          EXPECT_EQ(PeriodKey(Local(p.end - 1), unit, sunday), key);
          EXPECT_NE(PeriodKey(Local(p.end), unit, sunday), key);
        }
      }
    }
  }
}

// A period starts at local midnight where midnight exists (glibc's reading of the start).
TEST(CalendarPeriodProperty, StartsAtLocalMidnightWhereItExists) {
  std::mt19937_64 rng(7);
  std::uniform_int_distribution<int64_t> instant(0, 2143238400 - 1);
  for (const char* zone : kZones) {
    ScopedTz tz(zone);
    for (int i = 0; i < 400; ++i) {
      const int64_t t = instant(rng);
      const Secs p = InSeconds(At(zone, CalendarUnit::kDay, t));
      const std::tm start = Local(p.start);
      const std::tm before = Local(p.start - 1);
      // Either 00:00:00, or the clocks jumped over midnight at the start (the second before it
      // reads 23:59:59 of an earlier day and the start reads later than 00:00:00).
      const bool midnight = start.tm_hour == 0 && start.tm_min == 0 && start.tm_sec == 0;
      const bool jumped = before.tm_hour == 23 && before.tm_min == 59 && before.tm_sec == 59;
      EXPECT_TRUE(midnight || jumped) << zone << " t=" << t;
    }
  }
}

TEST(CalendarPeriod, DstDaysOf2026AreWorkedOutByHand) {
  struct Case {
    const char* zone;
    int64_t noon;  // an instant in the day
    int64_t start;
    int64_t hours_x2;  // the day's length in half hours
  } cases[] = {
      // Europe/Lisbon: 2026-03-29 00:00 WET = 00:00Z; clocks 01:00 -> 02:00; 23 hours.
      {"Europe/Lisbon", 1774742400 + 12 * 3600, 1774742400, 46},
      // 2026-10-25 00:00 WEST = 10-24 23:00Z; 02:00 -> 01:00; 25 hours.
      {"Europe/Lisbon", 1792882800 + 12 * 3600, 1792882800, 50},
      // America/New_York: 2026-03-08 00:00 EST = 05:00Z, 23 hours; 11-01 00:00 EDT = 04:00Z, 25.
      {"America/New_York", 1772946000 + 12 * 3600, 1772946000, 46},
      {"America/New_York", 1793505600 + 12 * 3600, 1793505600, 50},
      // Australia/Sydney: 2026-04-05 00:00 AEDT = 04-04 13:00Z, 25 hours; 10-04 00:00 AEST =
      // 10-03 14:00Z, 23 hours.
      {"Australia/Sydney", 1775307600 + 12 * 3600, 1775307600, 50},
      {"Australia/Sydney", 1791036000 + 12 * 3600, 1791036000, 46},
      // Australia/Lord_Howe moves its clocks by 30 minutes: 24.5 and 23.5 hours.
      {"Australia/Lord_Howe", 1775307600 + 12 * 3600, 1775307600, 49},
      {"Australia/Lord_Howe", 1791034200 + 12 * 3600, 1791034200, 47},
      // Pacific/Chatham 2026-04-05: 00:00 +13:45 = 04-04 10:15Z, 25 hours.
      {"Pacific/Chatham", 1775297700 + 12 * 3600, 1775297700, 50},
      // America/St_Johns 2026-11-01: 00:00 -02:30 = 02:30Z, 25 hours.
      {"America/St_Johns", 1793500200 + 12 * 3600, 1793500200, 50},
      // America/Havana 2026-03-08: 00:00 CST does not exist (00:00 -> 01:00 at 05:00Z): the day
      // starts at 05:00Z and ends at 03-09 00:00 CDT = 04:00Z, 23 hours.
      {"America/Havana", 1772946000 + 12 * 3600, 1772946000, 46},
      // America/Santiago 2026-09-06: 24:00 of the 5th -> 01:00 at 04:00Z; ends 09-07 03:00Z.
      {"America/Santiago", 1788667200 + 12 * 3600, 1788667200, 46},
  };
  for (const Case& c : cases) {
    const Secs p = InSeconds(At(c.zone, CalendarUnit::kDay, c.noon));
    EXPECT_EQ(p.start, c.start) << c.zone << " " << c.noon;
    EXPECT_EQ(p.end - p.start, c.hours_x2 * 1800) << c.zone << " " << c.noon;
  }
}

TEST(CalendarPeriod, LeapDayAndMonthsAndWeeks) {
  // 2028-02-29 00:00Z = 1835395200; February 2028 has 29 days from 1832976000.
  EXPECT_EQ(InSeconds(At("UTC", CalendarUnit::kDay, 1835395200 + 5)).start, 1835395200);
  EXPECT_EQ(InSeconds(At("UTC", CalendarUnit::kDay, 1835395200 + 5)).end, 1835481600);
  const Secs feb = InSeconds(At("UTC", CalendarUnit::kMonth, 1835395200));
  EXPECT_EQ(feb.start, 1832976000);
  EXPECT_EQ(feb.end - feb.start, 29 * 86400);
  // March 2026 in Lisbon: 03-01 00:00 WET to 04-01 00:00 WEST, 31 days less an hour.
  const Secs march = InSeconds(At("Europe/Lisbon", CalendarUnit::kMonth, 1774000000));
  EXPECT_EQ(march.start, 1772323200);
  EXPECT_EQ(march.end, 1774998000);
  // 2026-12-05 is a Saturday: its ISO week is Mon 11-30 .. Mon 12-07, its Sunday week
  // Sun 11-29 .. Sun 12-06 (Lisbon is on UTC in winter).
  const int64_t saturday = 1796515200 - 86400 + 3600;
  EXPECT_EQ(InSeconds(At("Europe/Lisbon", CalendarUnit::kWeek, saturday)).start, 1795996800);
  EXPECT_EQ(InSeconds(At("Europe/Lisbon", CalendarUnit::kWeek, saturday)).end, 1796601600);
  EXPECT_EQ(InSeconds(At("Europe/Lisbon", CalendarUnit::kWeek, saturday, true)).start, 1795910400);
  EXPECT_EQ(InSeconds(At("Europe/Lisbon", CalendarUnit::kWeek, saturday, true)).end, 1796515200);
  // 2026 in Asia/Kathmandu (+05:45 all year): 2025-12-31 18:15Z to 2026-12-31 18:15Z.
  const Secs year = InSeconds(At("Asia/Kathmandu", CalendarUnit::kYear, 1780000000));
  EXPECT_EQ(year.start, 1767204900);
  EXPECT_EQ(year.end, 1798740900);
}

TEST(CalendarPeriod, UnknownZoneIsAnErrorNamingIt) {
  auto z = FindTimeZone("Mars/Olympus_Mons");
  ASSERT_FALSE(z.has_value());
  EXPECT_NE(z.error().message.find("Mars/Olympus_Mons"), std::string::npos);
  EXPECT_FALSE(FindTimeZone("").has_value());
}

// Debian's TZif files list transitions to 2037 and leave later years to the POSIX rule in their
// footer, which glibc applies and date/tz.h (built with USE_OS_TZDB) does not: after the last
// listed transition date/tz.h keeps that offset. In Lisbon the last one is 2037-10-25 01:00Z
// (to WET), so summer days from 2038 on start at 00:00Z, an hour late. This test pins the gap
// documented in docs/quotas.md ("After 2037"); if it fails, the library started reading the
// footer and the docs should say so.
TEST(CalendarPeriod, After2037KeepsTheLastListedOffset) {
  ScopedTz tz("Europe/Lisbon");
  const int64_t july_1_2040_utc = 2224713600;
  const int64_t local_midnight = 2224710000;  // glibc: 00:00 WEST = 06-30 23:00Z
  const Secs day = InSeconds(At("Europe/Lisbon", CalendarUnit::kDay, july_1_2040_utc + 7200));
  EXPECT_EQ(day.start, july_1_2040_utc);
  EXPECT_EQ(Local(local_midnight).tm_hour, 0);
  EXPECT_EQ(Local(local_midnight).tm_isdst, 1);
  // Winter days agree with glibc: the last listed offset is standard time.
  const Secs jan = InSeconds(At("Europe/Lisbon", CalendarUnit::kMonth, 2209000000));
  EXPECT_EQ(Local(jan.start).tm_hour, 0);
  EXPECT_EQ(Local(jan.start).tm_mday, 1);
}

// The start of the local day after `local`'s date plus `days` (or the 1st of the month after
// plus `months`), by glibc's mktime: a midnight that does not exist normalizes to the instant
// the clocks jumped to.
int64_t NextLocalStart(std::tm local, CalendarUnit unit) {
  std::tm next{};
  next.tm_year = local.tm_year;
  next.tm_mon = unit == CalendarUnit::kMonth ? local.tm_mon + 1 : local.tm_mon;
  next.tm_mday = unit == CalendarUnit::kMonth ? 1 : local.tm_mday + 1;
  next.tm_isdst = -1;
  return static_cast<int64_t>(std::mktime(&next));
}

// CalendarWindow against a counter per local period that glibc names: admitted iff the period's
// count plus the cost fits; reset at the next local period start by mktime.
TEST(CalendarWindowProperty, DecidesAsACounterPerLocalPeriod) {
  for (const char* zone : {"Europe/Lisbon", "Australia/Lord_Howe", "America/Havana",
                           "Pacific/Chatham", "Asia/Kathmandu"}) {
    for (const CalendarUnit unit : {CalendarUnit::kDay, CalendarUnit::kMonth}) {
      ScopedTz tz(zone);
      LimitSpec spec;
      spec.algorithm = Algorithm::kFixedWindow;
      spec.limit = unit == CalendarUnit::kDay ? 5 : 40;
      spec.period = std::chrono::hours(24);
      spec.calendar = {unit, zone, false};
      auto alg = CalendarWindow::Create(spec);
      ASSERT_TRUE(alg.has_value()) << alg.error().message;
      std::mt19937_64 rng(unit == CalendarUnit::kDay ? 1 : 2);
      std::uniform_int_distribution<int64_t> gap(0, unit == CalendarUnit::kDay ? 4 * 3600 : 86400);
      std::uniform_int_distribution<int64_t> cost(1, 3);
      int64_t t = 1767225600;  // 2026-01-01 00:00Z
      CalendarWindow::State state = alg->Initial(FromNanos(t * kNs));
      std::map<int64_t, int64_t> counted;  // period key -> hits admitted
      int refused = 0;
      while (t < 1798761600) {  // 2027-01-01 00:00Z
        t += gap(rng);
        const int64_t c = cost(rng);
        const std::tm local = Local(t);
        int64_t& n = counted[PeriodKey(local, unit, false)];
        const bool fits = n + c <= spec.limit;
        if (fits) n += c;
        const Decision d = alg->Decide(state, FromNanos(t * kNs), c);
        SCOPED_TRACE(std::string(zone) + " t=" + std::to_string(t));
        ASSERT_EQ(d.allowed, fits);
        ASSERT_EQ(d.remaining, spec.limit - n);
        if (n > 0) {
          ASSERT_EQ(d.reset_after, std::chrono::seconds(NextLocalStart(local, unit) - t));
        }
        refused += fits ? 0 : 1;
      }
      EXPECT_GT(refused, 10) << zone;
    }
  }
}

TEST(CalendarWindow, DecidesInTheCalendarMonthAndResetsAtItsEnd) {
  LimitSpec spec;
  spec.algorithm = Algorithm::kFixedWindow;
  spec.limit = 2;
  spec.period = std::chrono::hours(24 * 31);
  spec.calendar = {CalendarUnit::kMonth, "Europe/Lisbon", false};
  auto alg = CalendarWindow::Create(spec);
  ASSERT_TRUE(alg.has_value()) << alg.error().message;
  // 2026-03-31 22:30Z is 23:30 WEST on the 31st: half an hour to April (04-01 00:00 WEST =
  // 03-31 23:00Z = 1774998000).
  const Timestamp t = FromNanos((1774998000 - 1800) * kNs);
  auto s = alg->Initial(t);
  EXPECT_TRUE(alg->Decide(s, t, 1).allowed);
  EXPECT_TRUE(alg->Decide(s, t, 1).allowed);
  const Decision refused = alg->Decide(s, t, 1);
  EXPECT_FALSE(refused.allowed);
  EXPECT_EQ(refused.retry_after, std::chrono::seconds(1800));
  EXPECT_EQ(refused.reset_after, std::chrono::seconds(1800));
  // At April's first second the count starts again; April ends 05-01 00:00 WEST.
  const Timestamp april = FromNanos(1774998000 * kNs);
  const Decision next = alg->Decide(s, april, 1);
  EXPECT_TRUE(next.allowed);
  EXPECT_EQ(next.remaining, 1);
  EXPECT_EQ(next.reset_after, std::chrono::hours(24 * 30));
  // A refund of a request March admitted changes nothing in April.
  alg->Refund(s, t, april, 1);
  EXPECT_EQ(s.count, 1);
}

TEST(CalendarWindow, RefusesSpecsWithoutAKnownZoneOrOnOtherAlgorithms) {
  LimitSpec spec;
  spec.algorithm = Algorithm::kFixedWindow;
  spec.limit = 2;
  spec.period = std::chrono::hours(24);
  spec.calendar = {CalendarUnit::kDay, "Nowhere/Atlantis", false};
  ASSERT_FALSE(ValidateLimitSpec(spec).has_value());
  EXPECT_NE(ValidateLimitSpec(spec).error().message.find("Nowhere/Atlantis"), std::string::npos);
  spec.calendar.timezone = "UTC";
  EXPECT_TRUE(ValidateLimitSpec(spec).has_value());
  spec.algorithm = Algorithm::kTokenBucket;
  EXPECT_FALSE(ValidateLimitSpec(spec).has_value());
}

}  // namespace
}  // namespace sluice
