#include "client/http_date.h"

#include <array>
#include <chrono>

namespace sluice::client {
namespace {

constexpr std::array<std::string_view, 7> kDays = {"Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun"};
constexpr std::array<std::string_view, 7> kLongDays = {
    "Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"};
constexpr std::array<std::string_view, 12> kMonths = {"Jan", "Feb", "Mar", "Apr", "May", "Jun",
                                                      "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"};

// A cursor over the text; every method consumes what it matched or fails.
class Scanner {
 public:
  explicit Scanner(std::string_view s) : s_(s) {}
  bool Literal(std::string_view lit) {
    if (s_.substr(0, lit.size()) != lit) return false;
    s_.remove_prefix(lit.size());
    return true;
  }
  // Exactly `n` digits.
  bool Digits(int n, int& out) {
    if (s_.size() < static_cast<size_t>(n)) return false;
    out = 0;
    for (int i = 0; i < n; ++i) {
      if (s_[i] < '0' || s_[i] > '9') return false;
      out = out * 10 + (s_[i] - '0');
    }
    s_.remove_prefix(n);
    return true;
  }
  template <size_t N>
  bool OneOf(const std::array<std::string_view, N>& names, int& index) {
    for (size_t i = 0; i < N; ++i) {
      if (Literal(names[i])) {
        index = static_cast<int>(i);
        return true;
      }
    }
    return false;
  }
  bool Done() const { return s_.empty(); }

 private:
  std::string_view s_;
};

struct Fields {
  int year = 0, month = 0, day = 0, hour = 0, minute = 0, second = 0;
};

bool TimeOfDay(Scanner& s, Fields& f) {
  return s.Digits(2, f.hour) && s.Literal(":") && s.Digits(2, f.minute) && s.Literal(":") &&
         s.Digits(2, f.second);
}

std::optional<Fields> Imf(std::string_view text) {  // Sun, 06 Nov 1994 08:49:37 GMT
  Scanner s(text);
  Fields f;
  int ignored = 0;
  if (s.OneOf(kDays, ignored) && s.Literal(", ") && s.Digits(2, f.day) && s.Literal(" ") &&
      s.OneOf(kMonths, f.month) && s.Literal(" ") && s.Digits(4, f.year) && s.Literal(" ") &&
      TimeOfDay(s, f) && s.Literal(" GMT") && s.Done()) {
    return f;
  }
  return std::nullopt;
}

std::optional<Fields> Rfc850(std::string_view text) {  // Sunday, 06-Nov-94 08:49:37 GMT
  Scanner s(text);
  Fields f;
  int ignored = 0;
  if (s.OneOf(kLongDays, ignored) && s.Literal(", ") && s.Digits(2, f.day) && s.Literal("-") &&
      s.OneOf(kMonths, f.month) && s.Literal("-") && s.Digits(2, f.year) && s.Literal(" ") &&
      TimeOfDay(s, f) && s.Literal(" GMT") && s.Done()) {
    f.year = -1 - f.year;  // marks a two-digit year for the caller: -1 - yy
    return f;
  }
  return std::nullopt;
}

std::optional<Fields> Asctime(std::string_view text) {  // Sun Nov  6 08:49:37 1994
  Scanner s(text);
  Fields f;
  int ignored = 0;
  if (!s.OneOf(kDays, ignored) || !s.Literal(" ") || !s.OneOf(kMonths, f.month) ||
      !s.Literal(" ")) {
    return std::nullopt;
  }
  if (!(s.Literal(" ") ? s.Digits(1, f.day) : s.Digits(2, f.day))) return std::nullopt;
  if (s.Literal(" ") && TimeOfDay(s, f) && s.Literal(" ") && s.Digits(4, f.year) && s.Done()) {
    return f;
  }
  return std::nullopt;
}

}  // namespace

std::optional<Timestamp> ParseHttpDate(std::string_view text, Timestamp now) {
  std::optional<Fields> f = Imf(text);
  if (!f) f = Rfc850(text);
  if (!f) f = Asctime(text);
  if (!f) return std::nullopt;
  using namespace std::chrono;
  if (f->year < 0) {
    const int yy = -1 - f->year;
    const int now_year = static_cast<int>(
        year_month_day(floor<days>(sys_time<Duration>(now.time_since_epoch()))).year());
    int year = now_year / 100 * 100 + yy;
    if (year > now_year + 50) year -= 100;
    f->year = year;
  }
  // 60 is a leap second (RFC 9110 allows it); it is read as the next second, 00 of the minute
  // after, which is what a clock that does not count leap seconds shows.
  if (f->hour > 23 || f->minute > 59 || f->second > 60) return std::nullopt;
  const year_month_day date{year{f->year}, month{static_cast<unsigned>(f->month + 1)},
                            day{static_cast<unsigned>(f->day)}};
  if (!date.ok()) return std::nullopt;
  // A Timestamp holds 1678..2262; a date outside it is still a date in the past or far future,
  // and any wait it means is clamped by the caller, so it is pinned to the range's ends.
  if (f->year < 1970) return Timestamp{};
  if (f->year > 2200)
    return Timestamp(duration_cast<Duration>((sys_days(year{2200} / 1 / 1)).time_since_epoch()));
  const auto t = sys_days(date) + hours(f->hour) + minutes(f->minute) + seconds(f->second);
  return Timestamp(duration_cast<Duration>(t.time_since_epoch()));
}

}  // namespace sluice::client
