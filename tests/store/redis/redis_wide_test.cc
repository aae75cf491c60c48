// The Redis scripts over the whole range (docs/redis.md, "The whole range"): every rate from 1 to
// 2^32-1 per second..year, bursts up to 2^32-1, decided by the scripts the store picks, compared
// decision for decision with an oracle written here in 128-bit integers in the spec's own units
// (tokens x period, unreduced; retry and reset found by bisection on "would it admit then"), not
// with the scripts' formulas. Also muldiv, the scripts' chunked (a*b + c) div/mod m, against
// 128-bit arithmetic, and keys in the format written before the wide scripts existed.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdio>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include "store/redis/redis_client.h"
#include "store/redis/redis_script_choice.h"
#include "store/redis/redis_script_lease.h"
#include "store/redis/redis_script_multi.h"
#include "store/redis/redis_script_wide.h"
#include "support/redis_server.h"

namespace sluice {
namespace {

using i128 = __int128;
using internal::RedisClient;
using internal::RedisReply;
using std::chrono::milliseconds;

constexpr int64_t kSec = 1'000'000;  // us
constexpr int64_t kT0 = 1'700'000'000 * kSec;
constexpr int64_t kExact = int64_t{1} << 53;
constexpr int kSingle = 0, kMulti = 1, kCharge = 2;  // how RedisWide::Decide runs a script

struct Out {
  bool allowed = false;
  int64_t remaining = 0, reset_us = 0, retry_us = 0, delay_us = 0;
  bool operator==(const Out&) const = default;
};
std::ostream& operator<<(std::ostream& os, const Out& o) {
  return os << "{" << o.allowed << " rem " << o.remaining << " reset " << o.reset_us << " retry "
            << o.retry_us << " delay " << o.delay_us << "}";
}

// The least t in [0, hi] with ok(t), for ok monotone (false then true); hi must be ok.
template <typename F>
int64_t Least(int64_t hi, F ok) {
  int64_t lo = 0;
  while (lo < hi) {
    const int64_t mid = lo + (hi - lo) / 2;
    if (ok(mid)) {
      hi = mid;
    } else {
      lo = mid + 1;
    }
  }
  return lo;
}

i128 FloorDiv(i128 a, i128 b) { return a >= 0 ? a / b : -((-a + b - 1) / b); }

// The oracle: one key of one spec, times in us, rate L per P us, capacity C. A bucket's level is
// kept as tokens x P, which grows (or drains) by exactly L per us; GCRA's theoretical arrival
// time in units of 1/L us. Nothing is reduced by a gcd, nothing split into whole and fraction.
class Oracle {
 public:
  explicit Oracle(const LimitSpec& spec)
      : a_(spec.algorithm),
        L_(spec.limit),
        P_(spec.period.count() / 1000),
        C_(spec.Capacity()),
        shaper_(spec.shaper),
        max_wait_(spec.HasMaxDelay() ? spec.max_delay.count() / 1000 : -1) {}

  // A decision; or a charge (charge): a cost that does not fit is taken anyway, into debt of at
  // most one capacity (a window: up to twice its limit), and the answer is the one for
  // min(cost, capacity) on the state after it.
  Out Decide(int64_t now, int64_t k, bool charge = false) {
    switch (a_) {
      case Algorithm::kTokenBucket:
        return Bucket(now, k, /*fill=*/true, charge);
      case Algorithm::kLeakyBucket:
        return Bucket(now, k, /*fill=*/false, charge);
      case Algorithm::kGcra:
        return Gcra(now, k, charge);
      case Algorithm::kFixedWindow:
        return Window(now, k, charge);
      default:
        return Counter(now, k, charge);
    }
  }

  // Gives back an admission of k made at now (the refund script's rule, in the oracle's units).
  void Refund(int64_t now, int64_t k) {
    if (a_ == Algorithm::kTokenBucket) {
      Advance(now, true);
      s_ = std::min(i128{C_} * P_, s_ + i128{k} * P_);
    } else if (a_ == Algorithm::kLeakyBucket) {
      Advance(now, false);
      s_ = std::max(i128{0}, s_ - i128{k} * P_);
    } else if (a_ == Algorithm::kGcra) {
      const i128 b = std::max(i128{0}, tat_ - i128{now} * L_);
      tat_ = i128{now} * L_ + std::max(i128{0}, b - i128{k} * P_);
    } else if (has_ && now / P_ == sw_) {
      cur_ = std::max<int64_t>(0, cur_ - k);
    }
  }

 private:
  void Advance(int64_t now, bool fill) {
    if (!has_) s_ = fill ? i128{C_} * P_ : 0, last_ = now, has_ = true;
    if (now <= last_) return;
    const i128 moved = i128{now - last_} * L_;
    s_ = fill ? std::min(i128{C_} * P_, s_ + moved) : std::max(i128{0}, s_ - moved);
    last_ = now;
  }

  Out Bucket(int64_t now, int64_t k, bool fill, bool charge) {
    Advance(now, fill);
    const i128 cap = i128{C_} * P_;
    i128 need = i128{k} * P_;
    Out o;
    // The level t us from now, with nothing else happening.
    auto at = [&](i128 s, int64_t t) {
      return fill ? std::min(cap, s + i128{t} * L_) : std::max(i128{0}, s - i128{t} * L_);
    };
    auto wait = [&](i128 s) {  // until a shaper's queue ahead of a request drains
      return static_cast<int64_t>((s + L_ - 1) / L_);
    };
    auto admits = [&](i128 s) {
      if (fill) return s >= need;
      return s + need <= cap && !(shaper_ && max_wait_ >= 0 && wait(s) > max_wait_);
    };
    if (admits(s_)) {
      o.allowed = true;
      if (!fill && shaper_) o.delay_us = wait(s_);
      s_ = fill ? s_ - need : s_ + need;
    } else {
      if (charge) {
        s_ = fill ? std::max(-cap, s_ - need) : std::max(s_, std::min(s_ + need, 2 * cap));
        need = i128{std::min(k, C_)} * P_;
      }
      o.retry_us = Least(kExact, [&](int64_t t) { return admits(at(s_, t)); });
    }
    const i128 tokens = fill ? s_ : cap - s_;
    o.remaining = static_cast<int64_t>(std::max(i128{0}, FloorDiv(tokens, P_)));
    o.reset_us = Least(kExact, [&](int64_t t) { return at(s_, t) == (fill ? cap : 0); });
    return o;
  }

  Out Gcra(int64_t now, int64_t k, bool charge) {
    if (!has_) tat_ = i128{now} * L_, has_ = true;
    const i128 cap = i128{C_} * P_;
    i128 need = i128{k} * P_;
    auto backlog = [&](int64_t t) { return std::max(i128{0}, tat_ - i128{now + t} * L_); };
    Out o;
    i128 b = backlog(0);
    if (b + need <= cap) {
      o.allowed = true;
      tat_ = i128{now} * L_ + b + need;
      b += need;
    } else {
      if (charge) {
        const i128 after = std::min(b + need, 2 * cap);
        if (after > b) tat_ = i128{now} * L_ + after, b = after;
        need = i128{std::min(k, C_)} * P_;
      }
      o.retry_us = Least(kExact, [&](int64_t t) { return backlog(t) + need <= cap; });
    }
    o.remaining = b >= cap ? 0 : static_cast<int64_t>((cap - b) / P_);
    o.reset_us = Least(kExact, [&](int64_t t) { return backlog(t) == 0; });
    return o;
  }

  Out Window(int64_t now, int64_t k, bool charge) {
    const int64_t w = now / P_;
    if (!has_ || w > sw_) sw_ = w, cur_ = 0, has_ = true;
    Out o;
    const int64_t end = (sw_ + 1) * P_ - now;
    if (cur_ + k <= L_) {
      o.allowed = true;
      cur_ += k;
    } else {
      if (charge) cur_ = std::max(cur_, std::min(cur_ + k, 2 * L_));
      o.retry_us = end;
    }
    o.remaining = std::max<int64_t>(0, L_ - cur_);
    o.reset_us = cur_ > 0 ? end : 0;
    return o;
  }

  // The counter's estimate (hits x P) t us from now, with nothing else happening.
  i128 Estimate(int64_t now, int64_t t) const {
    if (!has_) return 0;
    const int64_t at = now + t, w = at / P_;
    int64_t cur = cur_, prev = prev_;
    if (w > sw_) prev = w == sw_ + 1 ? cur : 0, cur = 0;
    return i128{cur} * P_ + i128{prev} * (P_ - (at - w * P_));
  }

  Out Counter(int64_t now, int64_t k, bool charge) {
    const int64_t w = now / P_;
    if (!has_) sw_ = w, cur_ = prev_ = 0, has_ = true;
    if (w > sw_) prev_ = w == sw_ + 1 ? cur_ : 0, cur_ = 0, sw_ = w;
    const i128 full = i128{L_} * P_;
    i128 need = i128{k} * P_;
    Out o;
    if (Estimate(now, 0) + need <= full) {
      o.allowed = true;
      cur_ += k;
    } else {
      if (charge) {
        // As the memory store, whose counts are 32-bit: at most 2^32 - 1 hits.
        cur_ = std::max(cur_, std::min({cur_ + k, 2 * L_, int64_t{4294967295}}));
        need = i128{std::min(k, L_)} * P_;
      }
      o.retry_us = Least(2 * P_, [&](int64_t t) { return Estimate(now, t) + need <= full; });
    }
    o.remaining = static_cast<int64_t>(std::max(i128{0}, (full - Estimate(now, 0)) / P_));
    const int64_t end = (sw_ + 1) * P_ - now;
    o.reset_us = cur_ > 0 ? end + P_ : prev_ > 0 ? end : 0;
    return o;
  }

  Algorithm a_;
  int64_t L_, P_, C_;
  bool shaper_;
  int64_t max_wait_;
  bool has_ = false;
  i128 s_ = 0, tat_ = 0;
  int64_t last_ = 0, sw_ = 0, cur_ = 0, prev_ = 0;
};

class RedisWide : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { server_ = std::make_unique<testing::RedisServer>(); }
  static void TearDownTestSuite() { server_.reset(); }
  void SetUp() override {
    auto c =
        RedisClient::Connect("127.0.0.1", server_->port(), milliseconds(500), milliseconds(5000));
    ASSERT_TRUE(c.has_value()) << c.error().message;
    client_ = std::move(*c);
  }

  Result<RedisReply> Eval(const internal::LuaScript& s, const std::string& key,
                          const std::vector<std::string>& args) {
    return client_->Eval(s, {key}, args);
  }

  // `s` as it is, but with the key's TTL taken off before it returns: the TTL runs on Redis's
  // clock, the test's time is simulated, and a key Redis expired would not be the oracle's.
  const internal::LuaScript& Persisting(const internal::LuaScript& s) {
    auto& wrapped = persisting_[&s];
    if (wrapped) return *wrapped;
    // The prelude: this version's, or (the old scripts below) the one before bucket_read.
    constexpr std::string_view kPreludeEnd = "now = ARGV[1] + 0\nend\n";
    std::string prefix = s.source.substr(0, s.source.find(kPreludeEnd) + kPreludeEnd.size());
    for (const std::string& more : {std::string(internal::kLuaWidePrelude), internal::kLuaBodies}) {
      if (s.source.starts_with(prefix + more)) prefix += more;
    }
    wrapped = std::make_unique<internal::LuaScript>(internal::LuaScript{
        prefix + "local r = (function()\n" + s.source.substr(prefix.size()) +
        "\nend)()\nif redis.call('EXISTS', KEYS[1]) == 1 then redis.call('PERSIST', KEYS[1]) "
        "end\nreturn r\n"});
    return *wrapped;
  }

  static std::optional<Out> Read(const Result<RedisReply>& r) {
    if (!r || r->type != RedisReply::Type::kArray || r->elements.size() < 4) return std::nullopt;
    const auto& e = r->elements;
    for (const RedisReply& x : e) {
      if (x.type != RedisReply::Type::kInteger) return std::nullopt;
    }
    return Out{e[0].integer == 1, e[1].integer, e[2].integer, e[3].integer,
               e.size() > 4 ? e[4].integer : 0};
  }

  // One decision by the store's script for the spec (kSingle), a charge (kCharge), or a
  // decision by its body in the multi-limit script (kMulti).
  std::optional<Out> Decide(const internal::ScriptCall& call, const std::string& key, int64_t now,
                            int64_t cost, int how) {
    const bool through_multi = how == kMulti;
    std::vector<std::string> args = {std::to_string(now)};
    if (through_multi) {
      args.insert(args.end(),
                  {"0", std::to_string(call.id), std::to_string(call.params.size() + 2)});
    }
    args.insert(args.end(), call.params.begin(), call.params.end());
    args.push_back(std::to_string(cost));
    args.push_back(how == kCharge ? "1" : "0");
    std::optional<Out> out;
    if (through_multi) {
      auto r = Eval(Persisting(internal::kMultiScript), key, args);
      if (r && r->type == RedisReply::Type::kArray && r->elements.size() == 3 &&
          r->elements[1].elements.size() == 1) {
        RedisReply inner = r->elements[1].elements[0];
        out = Read(inner);
      }
    } else {
      out = Read(Eval(Persisting(*call.script), key, args));
    }
    return out;
  }

  void Refund(const internal::ScriptCall& call, const std::string& key, int64_t now, int64_t cost) {
    std::vector<std::string> args = {std::to_string(now), std::to_string(now),
                                     std::to_string(call.id)};
    args.insert(args.end(), call.params.begin(), call.params.end());
    args.push_back(std::to_string(cost));
    args.push_back("0");
    auto r = Eval(Persisting(internal::kRefundScript), key, args);
    ASSERT_TRUE(r.has_value()) << r.error().message;
  }

  static std::unique_ptr<testing::RedisServer> server_;
  std::unique_ptr<RedisClient> client_;
  std::map<const internal::LuaScript*, std::unique_ptr<internal::LuaScript>> persisting_;
};
std::unique_ptr<testing::RedisServer> RedisWide::server_;

TEST_F(RedisWide, MuldivIsExactAgainst128BitArithmetic) {
  const internal::LuaScript probe{std::string(internal::kLuaPrelude) + internal::kLuaWidePrelude +
                                  R"lua(
local out = {}
for i = 2, #ARGV, 4 do
  local q, r = muldiv(ARGV[i] + 0, ARGV[i + 1] + 0, ARGV[i + 2] + 0, ARGV[i + 3] + 0)
  out[#out + 1] = q
  out[#out + 1] = r
end
return out
)lua"};
  std::mt19937_64 rng(25);
  auto below = [&](int64_t hi) { return static_cast<int64_t>(rng() % static_cast<uint64_t>(hi)); };
  for (int round = 0; round < 40; ++round) {
    std::vector<std::string> args = {""};
    std::vector<std::array<int64_t, 4>> cases;
    for (int i = 0; i < 250; ++i) {
      // Divisors of every size up to 2^45 - 1; a*b up to ~2^98, then cut so the quotient
      // stays below 2^53 (the precondition).
      const int64_t m = 1 + below(int64_t{1} << (1 + below(45)));
      int64_t a = below(int64_t{1} << (1 + below(53)));
      int64_t b = below(int64_t{1} << (1 + below(45)));
      const int64_t c = i % 3 == 0 ? m - 1 : below(int64_t{1} << (1 + below(50)));
      while (a > 0 && b > 0 && (i128{a} * b + c) / m >= kExact) a /= 2;
      if (i % 50 == 0) a = b = 0;
      cases.push_back({a, b, c, m});
      for (int64_t x : {a, b, c, m}) args.push_back(std::to_string(x));
    }
    auto r = Eval(probe, "sluice:{muldiv}", args);
    ASSERT_TRUE(r.has_value()) << r.error().message;
    ASSERT_EQ(r->elements.size(), 2 * cases.size());
    for (size_t i = 0; i < cases.size(); ++i) {
      const auto [a, b, c, m] = cases[i];
      const i128 x = i128{a} * b + c;
      EXPECT_EQ(r->elements[2 * i].integer, static_cast<int64_t>(x / m))
          << a << " * " << b << " + " << c << " div " << m;
      EXPECT_EQ(r->elements[2 * i + 1].integer, static_cast<int64_t>(x % m))
          << a << " * " << b << " + " << c << " mod " << m;
    }
  }
}

// Today's (before issue 25) token bucket and leaky bucket scripts, verbatim: the keys they
// wrote must keep working, and a node still running them must read what the new ones write.
constexpr char kOldPrelude[] = R"lua(
local floor, ceil = math.floor, math.ceil
local function fdiv(a, b) return floor(a / b) end
local function cdiv(a, b) return ceil(a / b) end
-- A key an earlier sluice wrote as a hash: its fields packed as the scripts store them now, or
-- false when one is missing (no state). Any other type fails HMGET with WRONGTYPE.
local function unhash(key, format, ...)
  local st = redis.call('HMGET', key, ...)
  for i = 1, #st do
    st[i] = tonumber(st[i])
    if st[i] == nil then return false end
  end
  return struct.pack(format, unpack(st))
end
local now
if ARGV[1] == '' then
  local t = redis.call('TIME')
  now = t[1] * 1000000 + t[2]
else
  now = ARGV[1] + 0
end
)lua";
constexpr char kOldTokenBucket[] = R"lua(
local cap, n, d, cost = ARGV[2] + 0, ARGV[3] + 0, ARGV[4] + 0, ARGV[5] + 0
local charge = (ARGV[6] or 0) % 2 == 1
local v = redis.pcall('GET', KEYS[1])
if v and v.err then v = unhash(KEYS[1], '<dd', 's', 'l') end
local s, last = cap, now
if v then s, last = struct.unpack('<dd', v) end
if now > last then
  local e = now - last
  -- In debt (s < 0, after a charge) the bucket takes up to twice its fill time to fill.
  if e >= 2 * cap or (e >= cap and s >= 0) then s = cap else s = math.min(cap, s + e * n) end
  last = now
end
local behind = last - now
local need = cost * d
local allowed, retry, taken = 0, 0, need
if s >= need then
  s = s - need
  allowed = 1
else
  if charge then
    s = math.max(-cap, s - need)
    need = math.min(need, cap)
  else
    taken = 0
  end
  retry = behind + ceil((need - s) / n)
end
local reset = behind + ceil((cap - s) / n)
if taken > 0 then
  redis.call('SET', KEYS[1], struct.pack('<dd', s, last), 'PX', ceil(reset / 1000))
end
return {allowed, math.max(0, floor(s / d)), reset, retry}
)lua";
constexpr char kOldLeakyBucket[] = R"lua(
local cap, n, d = ARGV[2] + 0, ARGV[3] + 0, ARGV[4] + 0
local shaper, max_wait = ARGV[5] == '1', ARGV[6] + 0
local cost, charge = ARGV[7] + 0, (ARGV[8] or 0) % 2 == 1
local v = redis.pcall('GET', KEYS[1])
if v and v.err then v = unhash(KEYS[1], '<dd', 's', 'l') end
local level, last = 0, now
if v then level, last = struct.unpack('<dd', v) end
if now > last then
  local e = now - last
  -- Over its capacity (after a charge) the bucket takes up to twice its drain time to empty.
  if e >= 2 * cap or (e >= cap and level <= cap) then
    level = 0
  else
    level = math.max(0, level - e * n)
  end
  last = now
end
local behind = last - now
local need = cost * d
local allowed, retry, delay, before = 0, 0, 0, level
local bounded = shaper and max_wait >= 0
if level + need <= cap and not (bounded and behind + ceil(level / n) > max_wait) then
  if shaper then delay = behind + ceil(level / n) end
  level = level + need
  allowed = 1
else
  if charge then
    level = math.max(level, math.min(level + need, 2 * cap))
    need = math.min(need, cap)
  end
  if level + need > cap then retry = behind + ceil((level + need - cap) / n) end
  if bounded then retry = math.max(retry, behind + ceil(level / n) - max_wait) end
end
local reset = behind + ceil(level / n)
if level > before then
  redis.call('SET', KEYS[1], struct.pack('<dd', level, last), 'PX', ceil(reset / 1000))
end
return {allowed, math.max(0, floor((cap - level) / d)), reset, retry, delay}
)lua";
const internal::LuaScript kOldTokenBucketScript{std::string(kOldPrelude) + kOldTokenBucket};
const internal::LuaScript kOldLeakyBucketScript{std::string(kOldPrelude) + kOldLeakyBucket};

// The wide scripts' call for a spec in the narrow range (which the store sends to the narrow
// ones): the same arguments but the capacity in units, not units x d.
internal::ScriptCall WideCall(const LimitSpec& spec, const internal::ScriptCall& narrow) {
  internal::ScriptCall wide = narrow;
  wide.id = narrow.id + internal::kWideScriptId;
  // A narrow bucket's last argument is its spec's generation, which the wide scripts do not take.
  if (HasBurst(spec.algorithm)) wide.params.pop_back();
  switch (spec.algorithm) {
    case Algorithm::kTokenBucket:
      wide.script = &internal::kTokenBucketWideScript;
      break;
    case Algorithm::kGcra:
      wide.script = &internal::kGcraWideScript;
      break;
    case Algorithm::kLeakyBucket:
      wide.script = &internal::kLeakyBucketWideScript;
      break;
    default:
      wide.script = &internal::kSlidingWindowCounterWideScript;
      return wide;
  }
  wide.params[0] = std::to_string(spec.Capacity());
  return wide;
}

constexpr int64_t kLimits[] = {1,          7,          30001,      65521,     999999,
                               2147483647, 2147483629, 4294967291, 4294967295};
constexpr int64_t kUnitsS[] = {1, 60, 3600, 86400, 7 * 86400, 30 * 86400, 365 * 86400};

// Runs a random trace of decisions (and, every few, a refund, or the multi-limit script) on the
// spec against the oracle. Returns false when the store refuses the spec.
bool Trace(const LimitSpec& spec, uint64_t seed,
           const std::function<std::optional<Out>(const internal::ScriptCall&, const std::string&,
                                                  int64_t, int64_t, int)>& decide,
           const std::function<void(const internal::ScriptCall&, const std::string&, int64_t,
                                    int64_t)>& refund) {
  auto call = internal::ScriptForValidSpec(spec);
  if (!call) return false;
  std::mt19937_64 rng(seed);
  Oracle oracle(spec);
  const std::string key = "sluice:{wide:" + std::to_string(seed) + "}";
  const int64_t P = spec.period.count() / 1000, C = spec.Capacity();
  const i128 fill = i128{C} * P / spec.limit + 1;
  auto pick = [&](uint64_t hi) { return hi == 0 ? 0 : static_cast<int64_t>(rng() % hi); };
  // From 1973: GCRA's arrival time runs up to two fill times ahead, which the store keeps below
  // 3 x 2^51 us; the trace stays below 2^51 us (2041) so that it stays below 2^53.
  const int64_t start = 100'000'000 * kSec, step_max = ((int64_t{1} << 51) - start) / 31;
  int64_t now = start + pick(static_cast<uint64_t>(P));
  for (int step = 0; step < 30; ++step) {
    switch (rng() % 6) {
      case 0:
        break;
      case 1:
        now += 1;
        break;
      case 2:
        now += pick(static_cast<uint64_t>(P / spec.limit) + 2);
        break;
      case 3:
        now += pick(static_cast<uint64_t>(std::min<i128>(fill, step_max)));
        break;
      case 4:
        now += pick(static_cast<uint64_t>(P) + 1);
        break;
      default:
        now += pick(static_cast<uint64_t>(std::min<i128>(2 * fill, step_max)) / 16);
        break;
    }
    // Every sixth a charge, of up to twice the capacity (the store clamps a charge's cost to
    // that); every fifth a decision through the multi-limit script.
    const int how = step % 6 == 5 ? kCharge : step % 5 == 4 ? kMulti : kSingle;
    const int64_t cost = how == kCharge  ? 1 + pick(2 * static_cast<uint64_t>(C))
                         : step % 4 == 0 ? C
                         : step % 4 == 1 ? 1
                                         : pick(static_cast<uint64_t>(C) + 1);
    const Out want = oracle.Decide(now, cost, how == kCharge);
    const std::optional<Out> got = decide(*call, key, now, cost, how);
    EXPECT_TRUE(got.has_value()) << DescribeLimitSpec(spec);
    if (!got || !(*got == want)) {
      ADD_FAILURE() << DescribeLimitSpec(spec) << " step " << step << " at " << now - start
                    << "us cost " << cost << ": oracle " << want << ", redis "
                    << (got ? *got : Out{});
      return true;
    }
    if (want.allowed && cost > 0 && step % 7 == 3 && how != kCharge &&
        spec.algorithm != Algorithm::kFixedWindow) {
      oracle.Refund(now, cost);
      refund(*call, key, now, cost);
    }
  }
  return true;
}

TEST_F(RedisWide, EveryRatePerEveryUnitDecidesAsTheOracle) {
  uint64_t seed = 1;
  int decided = 0, refused = 0;
  for (Algorithm a : {Algorithm::kTokenBucket, Algorithm::kGcra, Algorithm::kLeakyBucket,
                      Algorithm::kFixedWindow, Algorithm::kSlidingWindowCounter}) {
    const bool bucket =
        a == Algorithm::kTokenBucket || a == Algorithm::kGcra || a == Algorithm::kLeakyBucket;
    for (int64_t limit : kLimits) {
      for (int64_t unit : kUnitsS) {
        for (int64_t burst : {int64_t{0}, int64_t{4294967295}, int64_t{3}}) {
          if (!bucket && burst != 0) continue;
          // The leaky bucket also as a shaper, and as one bounded to delays of half a period.
          for (int shaper : {0, 1, 2}) {
            if (shaper > 0 && a != Algorithm::kLeakyBucket) continue;
            LimitSpec spec{a, limit, std::chrono::seconds(unit), burst, shaper > 0};
            if (shaper == 2) spec.max_delay = std::chrono::milliseconds(unit * 500);
            const bool ok = Trace(
                spec, seed++, [&](auto&&... x) { return Decide(x...); },
                [&](auto&&... x) { Refund(x...); });
            // Refused only past two fill times of 2^53 us (~142 years each), 3 x 2^51 us for
            // GCRA (docs/redis.md).
            const i128 fill_us = i128{spec.Capacity()} * unit * kSec / limit;
            const i128 bound = a == Algorithm::kGcra ? 3 * (kExact / 4) : kExact;
            if (!ok) {
              EXPECT_GE(2 * fill_us + 2 * unit * kSec, bound) << DescribeLimitSpec(spec);
              ++refused;
            } else {
              ++decided;
            }
            if (HasFailure()) return;
          }
        }
      }
    }
  }
  EXPECT_GT(decided, 600);
  std::printf("%d specs decided as the oracle, %d past the fill-time bound\n", decided, refused);
}

// One key, decided in turn by today's scripts (a node not yet upgraded), the narrow scripts and
// the wide ones, on specs in today's range: each reads what the others wrote -- the old 16-byte
// state, and the wide 32-byte one whose first fields are the old format's -- and every decision
// is the oracle's.
TEST_F(RedisWide, OldNarrowAndWideScriptsReadEachOthersKeys) {
  const std::vector<LimitSpec> specs = {
      {Algorithm::kTokenBucket, 10, std::chrono::seconds(1), 50, false},
      {Algorithm::kTokenBucket, 7, std::chrono::seconds(3), 9, false},
      {Algorithm::kLeakyBucket, 3, std::chrono::seconds(1), 9, true},
      {Algorithm::kLeakyBucket, 10, std::chrono::seconds(1), 20, false},
      {Algorithm::kGcra, 7, std::chrono::seconds(1), 5, false},
      {Algorithm::kSlidingWindowCounter, 12, std::chrono::seconds(1), 0, false},
  };
  uint64_t seed = 500;
  for (const LimitSpec& spec : specs) {
    auto narrow = internal::ScriptForValidSpec(spec);
    ASSERT_TRUE(narrow.has_value());
    ASSERT_EQ(narrow->id, internal::ScriptAlgorithmId(spec.algorithm)) << "a narrow spec";
    const internal::ScriptCall wide = WideCall(spec, *narrow);
    internal::ScriptCall old = *narrow;
    if (spec.algorithm == Algorithm::kTokenBucket || spec.algorithm == Algorithm::kLeakyBucket) {
      old.script = spec.algorithm == Algorithm::kTokenBucket ? &kOldTokenBucketScript
                                                             : &kOldLeakyBucketScript;
      old.params.pop_back();  // the old scripts take no generation
    }
    const internal::ScriptCall* calls[] = {&old, narrow.operator->(), &wide};
    Oracle oracle(spec);
    std::mt19937_64 rng(seed);
    const std::string key = "sluice:{compat:" + std::to_string(seed++) + "}";
    int64_t now = kT0;
    for (int step = 0; step < 90; ++step) {
      now += static_cast<int64_t>(rng() % 3 == 0 ? 0 : rng() % (300 * 1000));
      const int64_t cost = static_cast<int64_t>(rng() % 4);
      const internal::ScriptCall& call = *calls[rng() % 3];
      const Out want = oracle.Decide(now, cost);
      const std::optional<Out> got = Decide(call, key, now, cost, kSingle);
      ASSERT_TRUE(got.has_value()) << DescribeLimitSpec(spec) << " step " << step;
      ASSERT_EQ(*got, want) << DescribeLimitSpec(spec) << " step " << step << " by "
                            << (&call == &old    ? "old"
                                : &call == &wide ? "wide"
                                                 : "narrow");
    }
  }
}

// A bucket state of any other length is refused by the wide scripts, never read as a bucket
// (struct.unpack would read a longer string's first fields silently).
TEST_F(RedisWide, AStateOfAnotherLengthIsAnErrorNotABucket) {
  const LimitSpec spec{Algorithm::kTokenBucket, 4294967295, std::chrono::hours(24 * 365), 0, false};
  auto call = internal::ScriptForValidSpec(spec);
  ASSERT_TRUE(call.has_value()) << call.error().message;
  ASSERT_EQ(call->script, &internal::kTokenBucketWideScript);
  const std::string key = "sluice:{compat:odd}";
  for (size_t bytes : {size_t{8}, size_t{24}, size_t{40}}) {
    ASSERT_TRUE(client_->Command({"SET", key, std::string(bytes, '\x01')}).has_value());
    std::vector<std::string> args = {std::to_string(kT0)};
    args.insert(args.end(), call->params.begin(), call->params.end());
    args.insert(args.end(), {"1", "0"});
    auto r = Eval(*call->script, key, args);
    EXPECT_FALSE(r.has_value()) << bytes << " bytes read as a bucket";
  }
}

// The lease script on wide specs: the request's decision and then min(want, remaining) units
// more, each as an admission of the oracle; what is not spent goes back through the refund
// script at the lease's time, as the oracle's give-back.
TEST_F(RedisWide, LeasesOfWideRatesTakeWhatTheOracleAdmits) {
  uint64_t seed = 900;
  int leases = 0, given_back = 0;
  for (Algorithm a : {Algorithm::kTokenBucket, Algorithm::kGcra, Algorithm::kLeakyBucket,
                      Algorithm::kFixedWindow}) {
    for (int64_t limit : {int64_t{30001}, int64_t{999999}, int64_t{4294967291}}) {
      const LimitSpec spec{a, limit, std::chrono::hours(24), 0, false};
      auto call = internal::ScriptForValidSpec(spec);
      ASSERT_TRUE(call.has_value()) << call.error().message;
      if (a != Algorithm::kFixedWindow) {
        ASSERT_GT(call->id, internal::kWideScriptId) << DescribeLimitSpec(spec) << " is wide";
      }
      Oracle oracle(spec);
      std::mt19937_64 rng(seed);
      const std::string key = "sluice:{lease:" + std::to_string(seed++) + "}";
      int64_t now = kT0;
      for (int step = 0; step < 40; ++step) {
        now += static_cast<int64_t>(rng() % (3 * kSec));
        const int64_t cost = static_cast<int64_t>(rng() % 3);
        const int64_t want = static_cast<int64_t>(rng() % static_cast<uint64_t>(limit));
        std::vector<std::string> args = {std::to_string(now), std::to_string(call->id),
                                         std::to_string(call->params.size() + 2)};
        args.insert(args.end(), call->params.begin(), call->params.end());
        args.insert(args.end(), {std::to_string(cost), "0", std::to_string(want), "node",
                                 std::to_string(10 * kSec)});
        auto r = client_->Eval(Persisting(internal::kLeaseScript), {key, key + ":holders"}, args);
        ASSERT_TRUE(r.has_value()) << r.error().message;
        ASSERT_EQ(r->elements.size(), 4u);
        const std::optional<Out> got = Read(r->elements[1]);
        ASSERT_TRUE(got.has_value());
        Out want_out = oracle.Decide(now, cost);
        int64_t units = 0;
        if (want_out.allowed && want > 0 && want_out.remaining > 0) {
          const int64_t e = std::min(want, want_out.remaining);
          const Out more = oracle.Decide(now, e);
          if (more.allowed) {
            units = e;
            want_out.remaining = more.remaining;
            want_out.reset_us = more.reset_us;
          }
        }
        ASSERT_EQ(*got, want_out) << DescribeLimitSpec(spec) << " step " << step;
        ASSERT_EQ(r->elements[2].integer, units) << DescribeLimitSpec(spec) << " step " << step;
        leases += units > 0;
        if (units > 1 && step % 2 == 0 && a != Algorithm::kFixedWindow) {
          ++given_back;
          const int64_t back = units / 2;
          oracle.Refund(now, back);
          Refund(*call, key, now, back);
        }
      }
    }
  }
  EXPECT_GT(leases, 100);
  EXPECT_GT(given_back, 30);
}

}  // namespace
}  // namespace sluice
