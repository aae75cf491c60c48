// ServerTlsContext's loading and reloading against the test certificates, and FileWatcher.
#include "tls/server_tls_context.h"

#include <gtest/gtest.h>
#include <openssl/ssl.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>

#include "support/test_certs.h"
#include "support/tls_test_client.h"
#include "support/wait_for.h"
#include "tls/file_watcher.h"

namespace sluice::tls {
namespace {

using sluice::testing::TestCerts;

// The certificates are made today, valid for years; this clock reads the real time.
MonotonicClock& Clock() {
  static MonotonicClock clock;
  return clock;
}

TlsServerSettings Pair(const TestCerts& certs, const std::string& cert, const std::string& key) {
  TlsServerSettings s;
  s.cert_file = certs[cert];
  s.key_file = certs[key];
  return s;
}

std::string ServedFingerprint(const ServerTlsContext& tls) {
  return sluice::testing::Fingerprint(SSL_CTX_get0_certificate(tls.Current().get()));
}

TEST(ServerTlsContext, LoadsAPairWithItsChain) {
  TestCerts certs;
  ASSERT_TRUE(certs.ok());
  auto tls =
      ServerTlsContext::Create(Pair(certs, "chain.pem", "server.key"), {"http/1.1"}, Clock());
  ASSERT_TRUE(tls.has_value()) << tls.error().message;
  EXPECT_EQ(ServedFingerprint(**tls), sluice::testing::FileFingerprint(certs["server.pem"]));
  const int64_t now =
      std::chrono::duration_cast<std::chrono::seconds>(Clock().Now().time_since_epoch()).count();
  EXPECT_GT((*tls)->ExpirySeconds(), now);
  EXPECT_EQ((*tls)->generation(), 1u);
}

TEST(ServerTlsContext, RefusesBadPairs) {
  TestCerts certs;
  ASSERT_TRUE(certs.ok());
  auto expired = ServerTlsContext::Create(Pair(certs, "expired.pem", "expired.key"), {}, Clock());
  ASSERT_FALSE(expired.has_value());
  EXPECT_NE(expired.error().message.find("expired"), std::string::npos) << expired.error().message;

  auto mismatch = ServerTlsContext::Create(Pair(certs, "server.pem", "server2.key"), {}, Clock());
  ASSERT_FALSE(mismatch.has_value());
  EXPECT_NE(mismatch.error().message.find("does not match"), std::string::npos);

  auto missing = ServerTlsContext::Create(Pair(certs, "nope.pem", "server.key"), {}, Clock());
  ASSERT_FALSE(missing.has_value());
  EXPECT_NE(missing.error().message.find("nope.pem"), std::string::npos);

  // Not valid yet: a clock set to 2019 sees the same certificate before its notBefore.
  ManualClock past(Timestamp(std::chrono::seconds(1'546'300'800)));  // 2019-01-01
  auto early = ServerTlsContext::Create(Pair(certs, "server.pem", "server.key"), {}, past);
  ASSERT_FALSE(early.has_value());
  EXPECT_NE(early.error().message.find("not valid yet"), std::string::npos);
}

TEST(ServerTlsContext, ReloadSwapsOnlyOnSuccess) {
  TestCerts certs;
  ASSERT_TRUE(certs.ok());
  const auto cert = certs.dir() / "live.pem";
  const auto key = certs.dir() / "live.key";
  std::filesystem::copy_file(certs["server.pem"], cert);
  std::filesystem::copy_file(certs["server.key"], key);
  TlsServerSettings s;
  s.cert_file = cert.string();
  s.key_file = key.string();
  auto tls = ServerTlsContext::Create(s, {}, Clock());
  ASSERT_TRUE(tls.has_value()) << tls.error().message;
  const std::shared_ptr<SSL_CTX> first = (*tls)->Current();

  const auto over = std::filesystem::copy_options::overwrite_existing;
  std::filesystem::copy_file(certs["server2.pem"], cert, over);
  std::filesystem::copy_file(certs["server2.key"], key, over);
  ASSERT_TRUE((*tls)->Reload().has_value());
  EXPECT_EQ(ServedFingerprint(**tls), sluice::testing::FileFingerprint(certs["server2.pem"]));
  // The first context is still whole for whoever holds it.
  EXPECT_EQ(sluice::testing::Fingerprint(SSL_CTX_get0_certificate(first.get())),
            sluice::testing::FileFingerprint(certs["server.pem"]));

  std::filesystem::copy_file(certs["server.pem"], cert, over);  // key left as server2's
  auto bad = (*tls)->Reload();
  ASSERT_FALSE(bad.has_value());
  EXPECT_EQ(ServedFingerprint(**tls), sluice::testing::FileFingerprint(certs["server2.pem"]));
  EXPECT_EQ((*tls)->generation(), 2u);
}

TEST(FileWatcher, CallsBackOnAChangeAndStopsPromptly) {
  TestCerts certs;
  ASSERT_TRUE(certs.ok());
  const auto file = certs.dir() / "watched.pem";
  std::filesystem::copy_file(certs["server.pem"], file);
  std::atomic<int> changes{0};
  auto watcher = std::make_unique<FileWatcher>(std::vector<std::string>{file.string()},
                                               std::chrono::milliseconds(20), [&] { ++changes; });
  std::filesystem::copy_file(certs["server2.pem"], file,
                             std::filesystem::copy_options::overwrite_existing);
  EXPECT_TRUE(sluice::testing::WaitFor([&] { return changes.load() >= 1; }));
  // A long interval does not delay Stop: it wakes the thread.
  auto slow = std::make_unique<FileWatcher>(std::vector<std::string>{file.string()},
                                            std::chrono::hours(1), [] {});
  const auto before = std::chrono::steady_clock::now();
  slow.reset();
  EXPECT_LT(std::chrono::steady_clock::now() - before, std::chrono::seconds(5));
}

}  // namespace
}  // namespace sluice::tls
