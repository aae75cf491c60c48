// redis+sentinel:// addresses and the readers of what sentinels answer (no processes: the
// failovers are in sentinel_failover_test.cc).
#include "store/redis/sentinel_reply.h"

#include <gtest/gtest.h>

#include <string>

#include "sluice/redis_store.h"
#include "store/redis/redis_endpoint.h"
#include "store/redis/sentinel_transport.h"

namespace sluice {
namespace {

using internal::MasterAddress;
using internal::RedisReply;

RedisReply Str(std::string s) { return RedisReply{RedisReply::Type::kString, 0, std::move(s), {}}; }
RedisReply Arr(std::vector<RedisReply> e) {
  return RedisReply{RedisReply::Type::kArray, 0, {}, std::move(e)};
}

TEST(SentinelAddress, ParsesSentinelsMasterDatabaseAndCredentials) {
  auto a = ParseRedisAddress("redis+sentinel://alice:s3cr:et@10.0.0.1:26379,h2:26380/mymaster/3");
  ASSERT_TRUE(a.has_value()) << a.error().message;
  EXPECT_EQ(a->sentinels, (std::vector<std::string>{"10.0.0.1:26379", "h2:26380"}));
  EXPECT_EQ(a->sentinel_master, "mymaster");
  EXPECT_EQ(a->db, 3);
  EXPECT_EQ(a->user, "alice");
  EXPECT_EQ(a->password, "s3cr:et");  // the master's; the sentinels' is a flag of its own
  EXPECT_TRUE(a->sentinel_password.empty());
  EXPECT_FALSE(a->tls.enabled);
  EXPECT_TRUE(a->cluster_seeds.empty());

  auto b = ParseRedisAddress("redis+sentinel://127.0.0.1:26379/mymaster");
  ASSERT_TRUE(b.has_value());
  EXPECT_EQ(b->db, 0);
  EXPECT_TRUE(b->password.empty());

  auto tls = ParseRedisAddress("rediss+sentinel://127.0.0.1:26379/mymaster");
  ASSERT_TRUE(tls.has_value());
  EXPECT_TRUE(tls->tls.enabled);
}

TEST(SentinelAddress, RefusesMalformedOnes) {
  for (const char* bad : {
           "redis+sentinel://127.0.0.1:26379",             // no master
           "redis+sentinel://127.0.0.1:26379/",            // empty master
           "redis+sentinel://127.0.0.1:26379/my master",   // a space
           "redis+sentinel://127.0.0.1:26379/mymaster/x",  // database not a number
           "redis+sentinel://127.0.0.1:26379/mymaster/",   // empty database
           "redis+sentinel://127.0.0.1/mymaster",          // no port
           "redis+sentinel://127.0.0.1:26379,/mymaster",   // empty sentinel
           "redis+sentinel://127.0.0.1:0/mymaster",        // port 0
       }) {
    EXPECT_FALSE(ParseRedisAddress(bad).has_value()) << bad;
  }
  // The error shows no password.
  auto e = ParseRedisAddress("redis+sentinel://u:hunter2@127.0.0.1:26379");
  ASSERT_FALSE(e.has_value());
  EXPECT_EQ(e.error().message.find("hunter2"), std::string::npos) << e.error().message;
}

// rediss+sentinel://: the sentinels get the store's TLS context and are verified against their
// own hosts; the master the sentinels name gets the name docs/security.md states.
internal::SentinelSettings SettingsFor(const std::string& address,
                                       const std::string& server_name = "") {
  auto o = ParseRedisAddress(address);
  EXPECT_TRUE(o.has_value());
  o->tls.server_name = server_name;
  auto endpoint = internal::MakeEndpoint(*o);
  EXPECT_TRUE(endpoint.has_value()) << endpoint.error().message;
  return internal::SentinelFor(*o, *endpoint);
}

TEST(SentinelTls, SentinelsAreVerifiedAgainstTheirOwnHosts) {
  const auto s =
      SettingsFor("rediss+sentinel://10.0.0.1:26379,sentinel-b.test:26380/m", "redis.test");
  ASSERT_EQ(s.sentinels.size(), 2u);
  ASSERT_NE(s.master_template.tls, nullptr);
  for (const auto& sentinel : s.sentinels) {
    EXPECT_EQ(sentinel.tls, s.master_template.tls) << sentinel.Name();
    EXPECT_TRUE(sentinel.tls_name.empty()) << sentinel.Name();
  }
  EXPECT_EQ(s.sentinels[1].host, "sentinel-b.test");
}

TEST(SentinelTls, AMasterNamedByIpIsVerifiedAgainstTheServerNameElseASentinelsHostName) {
  const MasterAddress ip{"10.0.0.9", 6379};
  // The configured name first.
  EXPECT_EQ(SettingsFor("rediss+sentinel://10.0.0.1:26379,sentinel-b.test:26380/m", "redis.test")
                .MasterAt(ip)
                .tls_name,
            "redis.test");
  // Else the first sentinel host in the address that is a name.
  const auto by_seed = SettingsFor("rediss+sentinel://10.0.0.1:26379,sentinel-b.test:26380/m");
  const auto master = by_seed.MasterAt(ip);
  EXPECT_EQ(master.host, "10.0.0.9");
  EXPECT_EQ(master.port, 6379);
  EXPECT_EQ(master.tls_name, "sentinel-b.test");
  // Sentinels all named by IP: the master's own IP.
  EXPECT_TRUE(SettingsFor("rediss+sentinel://10.0.0.1:26379/m").MasterAt(ip).tls_name.empty());
  // A master named by a DNS name: that name.
  EXPECT_TRUE(by_seed.MasterAt({"redis-a.test", 6379}).tls_name.empty());
  // Plaintext: no name at all.
  const auto plain = SettingsFor("redis+sentinel://sentinel-b.test:26380/m");
  EXPECT_EQ(plain.MasterAt(ip).tls, nullptr);
  EXPECT_TRUE(plain.MasterAt(ip).tls_name.empty());
}

TEST(SentinelTls, TheStoreOpensAndAnUnusableCaFileIsRefusedAtStart) {
  auto o = ParseRedisAddress("rediss+sentinel://127.0.0.1:1/mymaster");
  ASSERT_TRUE(o.has_value());
  o->monitor_interval = std::chrono::milliseconds(0);
  EXPECT_TRUE(OpenRedisStore(*o).has_value());
  o->tls.ca_file = "/nonexistent/ca.pem";
  auto refused = OpenRedisStore(*o);
  ASSERT_FALSE(refused.has_value());
  EXPECT_NE(refused.error().message.find("/nonexistent/ca.pem"), std::string::npos);
}

TEST(SentinelReply, ReadsTheMastersAddress) {
  auto a = internal::ReadMasterAddress(Arr({Str("10.0.0.5"), Str("6380")}), "m");
  ASSERT_TRUE(a.has_value());
  EXPECT_EQ(*a, (MasterAddress{"10.0.0.5", 6380}));
  // Nil: the sentinel does not know the name, and says so.
  auto nil = internal::ReadMasterAddress(RedisReply{}, "m");
  ASSERT_FALSE(nil.has_value());
  EXPECT_NE(nil.error().message.find("'m'"), std::string::npos);
  for (const RedisReply& bad :
       {Arr({Str("10.0.0.5")}), Arr({Str("10.0.0.5"), Str("0")}),
        Arr({Str("10.0.0.5"), Str("65536")}), Arr({Str(""), Str("1")}), Arr({Str("a b"), Str("1")}),
        Arr({Str("h"), Str("-1")}), Arr({Str("h"), Str("1"), Str("x")}), Str("10.0.0.5:6380")}) {
    EXPECT_FALSE(internal::ReadMasterAddress(bad, "m").has_value());
  }
}

TEST(SentinelReply, ReadsOnlyItsOwnMastersSwitch) {
  EXPECT_EQ(internal::ReadSwitchMaster("mymaster 10.0.0.1 6379 10.0.0.2 6380", "mymaster"),
            (MasterAddress{"10.0.0.2", 6380}));
  EXPECT_FALSE(internal::ReadSwitchMaster("other 10.0.0.1 6379 10.0.0.2 6380", "mymaster"));
  EXPECT_FALSE(internal::ReadSwitchMaster("mymaster2 10.0.0.1 6379 10.0.0.2 6380", "mymaster"));
  EXPECT_FALSE(internal::ReadSwitchMaster("mymaster 10.0.0.1 6379 10.0.0.2", "mymaster"));
  EXPECT_FALSE(internal::ReadSwitchMaster("mymaster 10.0.0.1 6379 10.0.0.2 6380 ", "mymaster"));
  EXPECT_FALSE(internal::ReadSwitchMaster("mymaster 10.0.0.1 6379 10.0.0.2 x", "mymaster"));
  EXPECT_FALSE(internal::ReadSwitchMaster("", "mymaster"));

  const RedisReply push = Arr({Str("message"), Str("+switch-master"), Str("payload")});
  EXPECT_EQ(internal::ReadMessage(push, "+switch-master"), "payload");
  EXPECT_FALSE(internal::ReadMessage(push, "+sdown"));
  EXPECT_FALSE(internal::ReadMessage(Arr({Str("subscribe"), Str("+switch-master"), Str("1")}),
                                     "+switch-master"));
}

TEST(SentinelReply, TrustsOnlyARoleOfMaster) {
  EXPECT_TRUE(internal::SaysMaster(Arr({Str("master"), RedisReply{}, Arr({})})));
  EXPECT_FALSE(internal::SaysMaster(Arr({Str("slave"), Str("127.0.0.1")})));
  EXPECT_FALSE(internal::SaysMaster(Arr({Str("sentinel")})));
  EXPECT_FALSE(internal::SaysMaster(Arr({})));
  EXPECT_FALSE(internal::SaysMaster(Str("master")));
  EXPECT_FALSE(internal::SaysMaster(
      Arr({RedisReply{RedisReply::Type::kStatus, 0, "master", {}}})));  // not a bulk string
}

}  // namespace
}  // namespace sluice
