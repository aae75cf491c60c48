// --audit-log end to end: the real sluiced writes a line pair per admin write and a line per
// config reload (with the config file's SHA-256), reopens the file on SIGHUP after a
// logrotate-style rename, and refuses to start when the file cannot be opened.
#include <gtest/gtest.h>
#include <signal.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "service/audit_log.h"
#include "support/http_test_client.h"
#include "support/sluiced_process.h"
#include "support/temp_config_dir.h"

namespace sluice::testing {
namespace {

using nlohmann::json;

constexpr char kConfig[] = R"yaml(
domain: d
descriptors:
  - key: k
    rate_limit: {unit: hour, requests_per_unit: 5, algorithm: fixed_window}
)yaml";

std::vector<json> Lines(const std::filesystem::path& p) {
  std::ifstream in(p);
  std::vector<json> lines;
  for (std::string line; std::getline(in, line);) lines.push_back(json::parse(line));
  return lines;
}

std::string Read(const std::filesystem::path& p) {
  std::ifstream in(p);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

int Post(int port, const std::string& body) {
  HttpClient client(port);
  auto r = client.Request("POST", "/v1/state?domain=d&k=a", body,
                          {"Authorization: Bearer adm1n-secret"});
  return r ? r->status : 0;
}

TEST(SluicedAudit, WritesAreLoggedAndSighupReopensAfterARename) {
  server::test::TempConfigDir dir("sluiced-audit");
  const auto config = dir.Write("d.yaml", kConfig);
  const auto log = dir.path() / "audit.log";
  auto sluiced =
      StartSluiced(config.string(), {"--admin-token", "adm1n-secret", "--audit-log", log.string()});
  ASSERT_GT(sluiced->port(), 0);
  EXPECT_EQ(Post(sluiced->port(), R"({"debit": 2})"), 200);
  std::filesystem::rename(log, dir.path() / "audit.log.1");
  EXPECT_EQ(Post(sluiced->port(), R"({"debit": 1})"), 200);  // still into the renamed file
  sluiced->Signal(SIGHUP);
  ASSERT_TRUE(sluiced->WaitForLog("config reloaded")) << sluiced->Log();
  EXPECT_EQ(Post(sluiced->port(), R"({"credit": 1})"), 200);

  const std::vector<json> old_lines = Lines(dir.path() / "audit.log.1");
  ASSERT_EQ(old_lines.size(), 4u);
  EXPECT_EQ(old_lines[1]["after"]["remaining"], 3);
  EXPECT_EQ(old_lines[3]["after"]["remaining"], 2);
  const std::vector<json> lines = Lines(log);
  ASSERT_EQ(lines.size(), 3u);
  EXPECT_EQ(lines[0]["event"], "reload");
  EXPECT_EQ(lines[0]["outcome"], "ok");
  EXPECT_EQ(lines[0]["sha256"], server::Sha256Hex(Read(config)));
  EXPECT_EQ(lines[1]["action"], "credit");
  EXPECT_EQ(lines[1]["client"], "admin-token");
  EXPECT_EQ(lines[2]["after"]["remaining"], 3);
  for (const auto& p : {log, dir.path() / "audit.log.1"}) {
    EXPECT_EQ(Read(p).find("adm1n-secret"), std::string::npos) << "no secret in " << p;
  }
}

TEST(SluicedAudit, AnAuditLogThatCannotBeOpenedStopsTheStart) {
  server::test::TempConfigDir dir("sluiced-audit-bad");
  const auto config = dir.Write("d.yaml", kConfig);
  SluicedProcess sluiced(
      {"--config", config.string(), "--http", "127.0.0.1:0", "--grpc", "off", "--admin-token", "t",
       "--audit-log", (dir.path() / "no-such-dir" / "audit.log").string()},
      /*wait_for_http=*/false);
  EXPECT_EQ(sluiced.WaitExit(), 1);
  EXPECT_NE(sluiced.Log().find("cannot open --audit-log"), std::string::npos) << sluiced.Log();
}

}  // namespace
}  // namespace sluice::testing
