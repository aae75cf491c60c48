// Multi-region limits end to end (issue 17): three real sluiced processes, one per region (us,
// eu, ap), each on its own redis-server, reaching one global redis-server through a TcpProxy that
// adds 20 ms each way and can cut the link (support/region_harness.h). Traffic goes over HTTP
// /v1/check. The oracle is counting: admissions per region and per fixed window (the window read
// from each answer's reset), against each region's share (static), or against the parts the
// regions held while the window ran, read from /metrics before and after every request tick
// (leased; docs/regions.md states the bound). Then the load errors and warnings of regions, and a
// reload that changes shares.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "support/http_test_client.h"
#include "support/redis_server.h"
#include "support/region_harness.h"
#include "support/sluiced_process.h"

namespace sluice::testing {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

constexpr int64_t kLimit = 100;  // the leased limit, per second, across the three regions
constexpr std::array<int64_t, 3> kLeasedStatic = {34, 33, 33};  // us 0.34, eu 0.33, ap 0.33

// `static` is 100 a minute shared 50/30/20; `leased` 100 a second, refreshed every 200 ms (none
// without leased shares).
std::string Config(const std::string& static_shares = "{us: 0.5, eu: 0.3, ap: 0.2}",
                   const std::string& leased_shares = "{us: 0.34, eu: 0.33, ap: 0.33}") {
  return R"(domain: world
descriptors:
  - key: static
    rate_limit:
      name: world-static
      unit: minute
      requests_per_unit: 100
      algorithm: fixed_window
      scope: global
      regions: {mode: static, shares: )" +
         static_shares + R"(}
)" +
         (leased_shares.empty() ? ""
                                : R"(  - key: leased
    rate_limit:
      name: world-leased
      unit: second
      requests_per_unit: 100
      algorithm: fixed_window
      scope: global
      regions: {mode: leased, refresh: 200ms, shares: )" +
                                      leased_shares + R"(}
)");
}

std::string Body(const std::string& key, const std::string& value) {
  return R"({"domain":"world","descriptors":[{"entries":[{"key":")" + key + R"(","value":")" +
         value + R"("}]}]})";
}

// One answer of /v1/check: admitted or not, and the fixed window it fell in (the window's end,
// from the answer's reset, in units of `period`; wall clock, as Redis's own).
struct Answer {
  bool admitted = false;
  int64_t window = 0;
};

std::optional<Answer> Check(HttpClient& client, const std::string& body, milliseconds period) {
  auto r = client.Request("POST", "/v1/check", body, {});
  if (!r || (r->status != 200 && r->status != 429)) return std::nullopt;
  constexpr std::string_view kReset = "\"reset_after_ms\":";
  const size_t at = r->body.find(kReset);
  if (at == std::string::npos) return std::nullopt;
  const int64_t reset_ms = std::atoll(r->body.c_str() + at + kReset.size());
  const int64_t now_ms =
      std::chrono::duration_cast<milliseconds>(std::chrono::system_clock::now().time_since_epoch())
          .count();
  return Answer{r->status == 200, (now_ms + reset_ms + period.count() / 2) / period.count()};
}

// The value of one sample line of /metrics ("name{labels}"), or -1.
double Metric(int port, const std::string& sample) {
  HttpClient c(port);
  auto r = c.Request("GET", "/metrics", "", {});
  if (!r) return -1;
  const size_t at = r->body.find("\n" + sample + " ");
  if (at == std::string::npos) return -1;
  return std::stod(r->body.substr(at + sample.size() + 2));
}

// The number of keys in the Redis on `port` (DBSIZE, over a plain socket), or -1.
int64_t KeysIn(int port) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  std::string reply;
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0 &&
      send(fd, "DBSIZE\r\n", 8, MSG_NOSIGNAL) == 8) {
    char buf[64];
    while (reply.find("\r\n") == std::string::npos) {
      const ssize_t n = recv(fd, buf, sizeof buf, 0);
      if (n <= 0) break;
      reply.append(buf, static_cast<size_t>(n));
    }
  }
  close(fd);
  return reply.starts_with(":") ? std::atoll(reply.c_str() + 1) : -1;
}

std::string Series(const char* name) {
  return std::string(name) + R"({domain="world",limit="world-leased"})";
}

class SluicedRegions : public ::testing::Test {
 protected:
  SluicedRegions() : h_(milliseconds(20)) {
    char tmpl[] = "/tmp/sluiced-regions-XXXXXX";
    dir_ = mkdtemp(tmpl);
    WriteConfig(Config());
  }
  ~SluicedRegions() override { std::filesystem::remove_all(dir_); }

  void WriteConfig(const std::string& yaml) const {
    const auto tmp = dir_ / "world.yaml.tmp";
    std::ofstream(tmp) << yaml;
    std::filesystem::rename(tmp, dir_ / "world.yaml");  // a reload never reads half a file
  }

  // sluiced for region i on its own Redis, with --global-store through the link unless told
  // otherwise; `extra` replaces nothing, it is appended.
  std::vector<std::string> Args(size_t i, bool global = true,
                                const std::vector<std::string>& extra = {}) {
    std::vector<std::string> args = {
        "--config", (dir_ / "world.yaml").string(),
        "--http",   "127.0.0.1:0",
        "--grpc",   "off",
        "--store",  "redis://127.0.0.1:" + std::to_string(h_.region_port(i)),
        "--region", RegionHarness::kRegions[i]};
    if (global) {
      args.push_back("--global-store");
      args.push_back(h_.link().address());
    }
    args.insert(args.end(), extra.begin(), extra.end());
    return args;
  }

  std::unique_ptr<SluicedProcess> Start(size_t i, bool global = true) {
    auto p = std::make_unique<SluicedProcess>(Args(i, global));
    EXPECT_GT(p->port(), 0) << p->Log();
    return p;
  }

  // Starts sluiced with `args` and waits for it to exit; its status, and its log in `log`.
  static int ExitOf(const std::vector<std::string>& args, std::string& log) {
    SluicedProcess p(args, /*wait_for_http=*/false);
    const int status = p.WaitExit(seconds(10));
    log = p.Log();
    return status;
  }

  RegionHarness h_;
  std::filesystem::path dir_;
};

// Offers `offered` requests of `body` to each port in turn and checks that in every window each
// region admitted exactly min(offered in it, its part). `period` is the limit's window: the
// answers are grouped by it (a wrong one merges or splits windows).
void ExpectExactParts(const std::vector<int>& ports, const std::vector<int64_t>& parts,
                      const std::string& body, int offered, milliseconds period) {
  for (size_t i = 0; i < ports.size(); ++i) {
    HttpClient client(ports[i]);
    std::map<int64_t, std::pair<int64_t, int64_t>> by_window;  // offered, admitted
    for (int k = 0; k < offered; ++k) {
      const auto a = Check(client, body, period);
      ASSERT_TRUE(a.has_value()) << "region " << i << " request " << k;
      auto& [o, admitted] = by_window[a->window];
      ++o;
      admitted += a->admitted;
    }
    for (const auto& [window, oa] : by_window) {
      EXPECT_EQ(oa.second, std::min(oa.first, parts[i]))
          << "region " << RegionHarness::kRegions[i] << ", window " << window << ": offered "
          << oa.first;
    }
  }
}

TEST_F(SluicedRegions, StaticEachRegionAdmitsExactlyItsShareWithoutTheGlobalStore) {
  // Static regions never talk: us has a --global-store whose link is cut from the start, eu and
  // ap have none at all.
  h_.link().Cut();
  WriteConfig(Config("{us: 0.5, eu: 0.3, ap: 0.2}", ""));
  auto us = Start(0);
  auto eu = Start(1, /*global=*/false);
  auto ap = Start(2, /*global=*/false);
  // A burst far over every part; a window boundary may fall inside it.
  ExpectExactParts({us->port(), eu->port(), ap->port()}, {50, 30, 20}, Body("static", "k"), 80,
                   seconds(60));
}

// Traffic over the three regions, the parts they held, and what was admitted, per window.
class LeasedDriver {
 public:
  explicit LeasedDriver(const std::array<int, 3>& ports) : ports_(ports) {
    for (size_t i = 0; i < 3; ++i) clients_[i] = std::make_unique<HttpClient>(ports_[i]);
  }

  struct Tally {
    std::map<int64_t, std::array<int64_t, 3>> admitted;
    std::map<int64_t, std::array<int64_t, 3>> max_part;
    std::array<int64_t, 3> offered{};
    std::array<int64_t, 3> total{};
    std::array<int64_t, 3> errors{};
  };

  int64_t Part(size_t i) const {
    return static_cast<int64_t>(Metric(ports_[i], Series("sluice_region_share_units")));
  }

  // Every 20 ms tick: 3 requests to us, and one to eu and to ap every 6th tick (150, 8 and 8 a
  // second: 90/5/5), until `until` holds or `deadline` passes; returns whether `until` held.
  bool Drive(Tally& t, const std::function<bool()>& until, milliseconds deadline) {
    const auto end = std::chrono::steady_clock::now() + deadline;
    auto next = std::chrono::steady_clock::now();
    for (int tick = 0; std::chrono::steady_clock::now() < end; ++tick) {
      const std::array<int, 3> offered = {3, tick % 6 == 0, tick % 6 == 3};
      std::array<int64_t, 3> before{};
      for (size_t i = 0; i < 3; ++i) before[i] = Part(i);
      std::array<std::vector<Answer>, 3> answers;
      for (size_t i = 0; i < 3; ++i) {
        for (int k = 0; k < offered[i]; ++k) {
          ++t.offered[i];
          const auto a = Check(*clients_[i], Body("leased", "k"), seconds(1));
          if (!a) {
            ++t.errors[i];
            clients_[i] = std::make_unique<HttpClient>(ports_[i]);
            continue;
          }
          answers[i].push_back(*a);
        }
      }
      // A part moves at most once a refresh (200 ms): the one in force at each request of this
      // tick is the one before it or the one after it.
      for (size_t i = 0; i < 3; ++i) {
        const int64_t after = Part(i);
        for (const Answer& a : answers[i]) {
          auto& mp = t.max_part[a.window];
          mp[i] = std::max({mp[i], before[i], after});
          t.admitted[a.window][i] += a.admitted;
          t.total[i] += a.admitted;
        }
      }
      if (until && until()) return true;
      next += milliseconds(20);
      std::this_thread::sleep_until(next);  // paces the offered load; not a wait for a state
    }
    return !until;
  }

  // docs/regions.md: in each window a region admits at most the largest part it held in it, and
  // the regions together at most the sum of those.
  static void ExpectWithinBound(const Tally& t, const char* phase) {
    for (const auto& [window, a] : t.admitted) {
      const auto& p = t.max_part.at(window);
      for (size_t i = 0; i < 3; ++i) {
        EXPECT_LE(a[i], p[i]) << phase << ", window " << window << ", region "
                              << RegionHarness::kRegions[i];
      }
      EXPECT_LE(a[0] + a[1] + a[2], p[0] + p[1] + p[2]) << phase << ", window " << window;
    }
    for (size_t i = 0; i < 3; ++i) EXPECT_EQ(t.errors[i], 0) << phase;
  }

  // The parts now, read twice in a row: a part moves at most once a refresh, so two equal
  // readings are the parts all three held at one moment (between the two). nullopt if they
  // moved meanwhile.
  std::optional<std::array<int64_t, 3>> Snapshot() const {
    std::array<int64_t, 3> first{}, second{};
    for (size_t i = 0; i < 3; ++i) first[i] = Part(i);
    for (size_t i = 0; i < 3; ++i) second[i] = Part(i);
    if (first != second) return std::nullopt;
    return first;
  }

 private:
  std::array<int, 3> ports_;
  std::array<std::unique_ptr<HttpClient>, 3> clients_;
};

double Sum(int port_us, int port_eu, int port_ap, const char* name) {
  return Metric(port_us, Series(name)) + Metric(port_eu, Series(name)) +
         Metric(port_ap, Series(name));
}

TEST_F(SluicedRegions, LeasedQuotaFollowsSkewedDemandAndACutLinkKeepsEveryRegionInItsBound) {
  std::array<std::unique_ptr<SluicedProcess>, 3> nodes;
  std::array<int, 3> ports{};
  for (size_t i = 0; i < 3; ++i) {
    nodes[i] = Start(i);
    ports[i] = nodes[i]->port();
  }
  for (auto& n : nodes)
    ASSERT_TRUE(n->WaitForLog("reached: leased limits follow demand")) << n->Log();
  LeasedDriver d(ports);
  for (size_t i = 0; i < 3; ++i)
    EXPECT_LE(d.Part(i), kLeasedStatic[i]) << "at most its static part";

  // Skewed 90/5/5: the busy region gets most of the limit once its demand is seen.
  LeasedDriver::Tally moving;
  ASSERT_TRUE(d.Drive(
      moving, [&] { return d.Part(0) >= kLimit * 7 / 10; }, seconds(5)))
      << "us holds " << d.Part(0) << " of " << kLimit;
  // A region's demand is read over the limit's period: one more second, and every region's
  // demand is that of this traffic (not of the idle start).
  d.Drive(moving, nullptr, milliseconds(1000));
  LeasedDriver::Tally steady;
  d.Drive(steady, nullptr, milliseconds(1500));
  LeasedDriver::ExpectWithinBound(moving, "moving");
  LeasedDriver::ExpectWithinBound(steady, "steady");
  EXPECT_EQ(steady.total[1], steady.offered[1]) << "the quiet regions get what they ask";
  EXPECT_EQ(steady.total[2], steady.offered[2]);
  // 1.5 s spans at least one whole window: us admits well beyond its static 34 a second.
  EXPECT_GE(steady.total[0], 2 * kLeasedStatic[0])
      << steady.total[0] << " of " << steady.offered[0];
  // The parts held at one moment sum to at most the limit, and each region keeps one unit.
  std::optional<std::array<int64_t, 3>> parts;
  for (int attempt = 0; attempt < 20 && !parts; ++attempt) parts = d.Snapshot();
  ASSERT_TRUE(parts.has_value()) << "the parts never held still for two readings";
  EXPECT_LE((*parts)[0] + (*parts)[1] + (*parts)[2], kLimit);
  for (size_t i = 0; i < 3; ++i) EXPECT_GE((*parts)[i], 1);
  // Grants keep coming (one per refresh and node), recently.
  const double leases = Sum(ports[0], ports[1], ports[2], "sluice_region_global_leases_total");
  EXPECT_GE(leases, 3 * 3) << "three nodes, at least 3 refreshes each";
  EXPECT_LT(Metric(ports[0], "sluice_region_global_sync_age_seconds"), 1.0);
  EXPECT_EQ(Sum(ports[0], ports[1], ports[2], "sluice_region_cutoff_decisions_total"), 0);

  // The link is cut: every region keeps deciding, on its grant until it expires (3 refreshes
  // after asking), then on its static part.
  // The regions above their static part give it up before those below take theirs back: the
  // parts in force sum to at most the limit all along (each tick, the parts at one moment).
  h_.link().Cut();
  LeasedDriver::Tally cut;
  int64_t most = 0;
  const bool fell_back = d.Drive(
      cut,
      [&] {
        if (const auto p = d.Snapshot()) most = std::max(most, (*p)[0] + (*p)[1] + (*p)[2]);
        return d.Part(0) == kLeasedStatic[0] && d.Part(1) == kLeasedStatic[1] &&
               d.Part(2) == kLeasedStatic[2];
      },
      seconds(3));
  EXPECT_TRUE(fell_back) << d.Part(0) << " " << d.Part(1) << " " << d.Part(2);
  EXPECT_LE(most, kLimit) << "parts in force at one moment while the grants expired";
  LeasedDriver::Tally fallen;
  d.Drive(fallen, nullptr, milliseconds(1100));
  LeasedDriver::ExpectWithinBound(cut, "cut");
  LeasedDriver::ExpectWithinBound(fallen, "fallen back");
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_GT(cut.total[i] + fallen.total[i], 0) << "region " << RegionHarness::kRegions[i];
    EXPECT_GT(Metric(ports[i], Series("sluice_region_cutoff_decisions_total")), 0);
  }
  // Fallen back, us admits its static part a window, as if the regions never talked.
  for (const auto& [window, a] : fallen.admitted) EXPECT_LE(a[0], kLeasedStatic[0]) << window;
  EXPECT_GT(Metric(ports[0], "sluice_region_global_sync_age_seconds"), 0.6);
  EXPECT_TRUE(nodes[0]->WaitForLog("unreachable")) << nodes[0]->Log();
  EXPECT_TRUE(nodes[0]->WaitForLog("deciding on its static part, 34 of 100")) << nodes[0]->Log();

  // Restored: the parts follow demand again.
  h_.link().Restore();
  LeasedDriver::Tally back;
  EXPECT_TRUE(d.Drive(
      back, [&] { return d.Part(0) >= kLimit * 7 / 10; }, seconds(5)))
      << "us holds " << d.Part(0);
  LeasedDriver::ExpectWithinBound(back, "restored");
  EXPECT_TRUE(nodes[0]->WaitForLog("reachable again")) << nodes[0]->Log();
  EXPECT_GT(Sum(ports[0], ports[1], ports[2], "sluice_region_global_leases_total"), leases);
}

// Each case: a config (or flag) the regions cannot serve. sluiced refuses to start, with a message
// naming the limit and what to change; --check-config says the same.
TEST_F(SluicedRegions, WhatTheRegionsCannotServeIsRefusedAtStartNamingTheLimit) {
  struct Case {
    const char* what;
    std::string yaml;
    std::string region;  // empty: no --region
    bool global;
    std::vector<std::string> extra;
    int status;
    std::string message;
  };
  const std::string leased_tb = R"(domain: world
descriptors:
  - key: tb
    rate_limit:
      name: world-tb
      unit: second
      requests_per_unit: 100
      scope: global
      regions: {mode: leased, shares: {us: 0.5, eu: 0.5}}
)";
  const std::vector<Case> cases = {
      {"region not among the shares",
       Config(),
       "sa",
       true,
       {},
       1,
       "rate_limit 'world-static' has scope: global but its shares (ap, eu, us) do not list this "
       "node's region 'sa'"},
      {"shares summing above 1",
       Config("{us: 0.5, eu: 0.3, ap: 0.3}"),
       "us",
       false,
       {},
       1,
       "rate_limit 'world-static': shares sum to 1.1, more than 1"},
      {"no --region",
       Config(),
       "",
       false,
       {},
       1,
       "rate_limit 'world-static' has scope: global: start sluiced with --region (one of: ap, eu, "
       "us)"},
      {"leased without --global-store",
       Config(),
       "us",
       false,
       {},
       1,
       "rate_limit 'world-leased' has regions mode leased: start sluiced with --global-store"},
      {"leased on the default algorithm, token_bucket",
       leased_tb,
       "us",
       true,
       {},
       1,
       "rate_limit 'world-tb': regions mode leased needs algorithm: fixed_window, not "
       "token_bucket"},
      {"a Redis Cluster as the global store",
       Config(),
       "us",
       false,
       {"--global-store", "redis+cluster://127.0.0.1:7000"},
       1,
       "--global-store: a Redis Cluster is not supported"},
      {"not a Redis address",
       Config(),
       "us",
       false,
       {"--global-store", "memory"},
       1,
       "--global-store: "},
      {"--global-store without --region",
       Config(),
       "",
       true,
       {},
       2,
       "--global-store (SLUICE_GLOBAL_STORE) needs --region"},
  };
  // --check-config opens the stores as serving would, but leases nothing: the global store
  // stays empty.
  {
    WriteConfig(Config());
    std::string log;
    std::vector<std::string> args = Args(0);
    args.push_back("--check-config");
    EXPECT_EQ(ExitOf(args, log), 0) << log;
    EXPECT_EQ(KeysIn(h_.global().port()), 0);
  }
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    WriteConfig(c.yaml);
    std::vector<std::string> args = Args(0, c.global, c.extra);
    const auto at = std::find(args.begin(), args.end(), "--region");
    if (c.region.empty()) {
      args.erase(at, at + 2);
    } else {
      at[1] = c.region;
    }
    std::string log;
    EXPECT_EQ(ExitOf(args, log), c.status) << log;
    EXPECT_NE(log.find(c.message), std::string::npos) << log;
    if (c.status == 2) continue;  // a flag error: checked before any config is read
    args.push_back("--check-config");
    EXPECT_EQ(ExitOf(args, log), 1) << log;
    EXPECT_NE(log.find(c.message), std::string::npos) << log;
  }
}

// A global store unreachable from the start: sluiced starts, says so, and serves the leased
// limit on its static part; a reload that changes the shares takes effect at once, for static
// and leased limits alike. --region without any scope: global limit is accepted with a warning.
TEST_F(SluicedRegions, AnUnreachableGlobalStoreServesStaticSharesAndAReloadMovesThem) {
  h_.link().Cut();
  auto us = Start(0);
  ASSERT_GT(us->port(), 0);
  EXPECT_TRUE(us->WaitForLog("unreachable")) << us->Log();
  EXPECT_TRUE(us->WaitForLog("until it answers they decide on their static shares")) << us->Log();
  ExpectExactParts({us->port()}, {34}, Body("leased", "a"), 40,
                   seconds(1));  // 100 a second, us 0.34
  EXPECT_EQ(Metric(us->port(), Series("sluice_region_share_units")), 34);
  EXPECT_GT(Metric(us->port(), Series("sluice_region_cutoff_decisions_total")), 0);
  ExpectExactParts({us->port()}, {50}, Body("static", "a"), 60, seconds(60));

  WriteConfig(Config("{us: 0.2, eu: 0.3, ap: 0.5}", "{us: 0.6, eu: 0.2, ap: 0.2}"));
  us->Signal(SIGHUP);
  ASSERT_TRUE(us->WaitForLog("config reloaded")) << us->Log();
  EXPECT_EQ(Metric(us->port(), Series("sluice_region_share_units")), 60);
  ExpectExactParts({us->port()}, {60}, Body("leased", "b"), 70, seconds(1));
  ExpectExactParts({us->port()}, {20}, Body("static", "b"), 30, seconds(60));

  // A reload that drops the us share is refused; the running config keeps serving.
  WriteConfig(Config("{eu: 0.5, ap: 0.5}"));
  us->Signal(SIGHUP);
  ASSERT_TRUE(us->WaitForLog("reload failed, keeping the running config")) << us->Log();
  EXPECT_NE(us->Log().find("do not list this node's region 'us'"), std::string::npos);
  ExpectExactParts({us->port()}, {20}, Body("static", "c"), 30, seconds(60));

  WriteConfig(
      "domain: world\ndescriptors:\n  - key: plain\n    rate_limit: {unit: second, "
      "requests_per_unit: 5}\n");
  auto plain = Start(1, /*global=*/false);
  ASSERT_GT(plain->port(), 0);
  EXPECT_TRUE(plain->WaitForLog("--region eu: no limit has scope: global")) << plain->Log();
}

}  // namespace
}  // namespace sluice::testing
