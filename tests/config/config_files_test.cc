// What a config path may be: a regular file, or a symlink to one (Kubernetes ConfigMaps), read
// without ever blocking; every directory entry that is skipped is a warning; and an error about a
// file that is not a sluice config shows nothing of its content.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "config/config.h"
#include "support/server_test_util.h"
#include "support/temp_config_dir.h"

namespace sluice::server {
namespace {

namespace fs = std::filesystem;
using test::TempConfigDir;

constexpr char kDomainA[] =
    "domain: alpha\ndescriptors:\n  - key: k\n    rate_limit: {unit: second, requests_per_unit: "
    "1}\n";

bool HasWarning(const Config& config, const std::string& says) {
  for (const std::string& w : config.warnings()) {
    if (w.find(says) != std::string::npos) return true;
  }
  return false;
}

std::string ErrorOf(const std::string& path) {
  auto config = LoadConfig(path);
  EXPECT_FALSE(config.has_value()) << path;
  return config ? "" : config.error().message;
}

// The layout of a mounted ConfigMap: the files are symlinks into "..data", itself a symlink to a
// timestamped directory that an update replaces.
TEST(ConfigFiles, AConfigMapMountOfSymlinksLoads) {
  TempConfigDir dir("configmap");
  const fs::path root = dir.Write("x", "").parent_path();
  fs::remove(root / "x");
  fs::create_directory(root / "..2026_12_03");
  std::ofstream(root / "..2026_12_03" / "a.yaml") << kDomainA;
  fs::create_directory_symlink("..2026_12_03", root / "..data");
  fs::create_symlink("..data/a.yaml", root / "a.yaml");
  auto config = LoadConfig(root.string());
  ASSERT_TRUE(config.has_value()) << config.error().message;
  EXPECT_NE((*config)->FindDomain("alpha"), nullptr);
  EXPECT_TRUE((*config)->warnings().empty()) << "hidden entries are skipped silently";
  auto single = LoadConfig((root / "a.yaml").string());
  ASSERT_TRUE(single.has_value()) << single.error().message;
}

TEST(ConfigFiles, EverySkippedDirectoryEntryIsAWarning) {
  TempConfigDir dir("skipped");
  const fs::path root = dir.Write("a.yaml", kDomainA).parent_path();
  dir.Write("notes.txt", "not yaml");
  fs::create_symlink(root / "gone.yaml.target", root / "b.yaml");  // dangling
  ASSERT_EQ(::mkfifo((root / "c.yaml").c_str(), 0600), 0);
  fs::create_directory(root / "d.yml");
  auto config = LoadConfig(root.string());
  ASSERT_TRUE(config.has_value()) << config.error().message;
  EXPECT_EQ((*config)->domains().size(), 1u);
  EXPECT_TRUE(HasWarning(**config, "b.yaml: skipped: a symlink to nothing"));
  EXPECT_TRUE(HasWarning(**config, "c.yaml: skipped: not a regular file (a FIFO)"));
  EXPECT_TRUE(HasWarning(**config, "d.yml: skipped: not a regular file (a directory)"));
  EXPECT_TRUE(HasWarning(**config, "notes.txt: skipped: not a *.yaml or *.yml file"));
  EXPECT_EQ((*config)->warnings().size(), 4u);
}

// A FIFO opened for reading waits for a writer: a reload did, forever, on the thread that
// takes SIGTERM. Refused at once now (this test hangs, and ctest times it out, if not).
TEST(ConfigFiles, AFifoIsRefusedWithoutWaitingForAWriter) {
  TempConfigDir dir("fifo");
  const fs::path root =
      dir.Write("a.yaml",
                "domain: alpha\nplan_key: k\nplan_source: file:plans\nplans:\n  default:\n"
                "    - key: k\n      rate_limit: {unit: second, requests_per_unit: 1}\n")
          .parent_path();
  ASSERT_EQ(::mkfifo((root / "plans").c_str(), 0600), 0);
  EXPECT_NE(ErrorOf((root / "a.yaml").string()).find("plans: not a regular file (a FIFO)"),
            std::string::npos);
  ASSERT_EQ(::mkfifo((root / "config.fifo").c_str(), 0600), 0);
  EXPECT_NE(ErrorOf((root / "config.fifo").string()).find("not a regular file (a FIFO)"),
            std::string::npos);
  EXPECT_NE(ErrorOf("/dev/zero").find("not a regular file (a character device)"),
            std::string::npos);
}

TEST(ConfigFiles, ErrorsShowNothingOfAFileThatIsNotASluiceConfig) {
  TempConfigDir dir("secret");
  const auto shadow = dir.Write("shadow.yaml", "root:$6$SECRETHASH:19000:0:99999:7:::\n");
  const auto json = dir.Write("creds.yaml", "{\"aws_secret_access_key\": \"SECRETJSON\"}\n");
  for (const fs::path& p : {shadow, json}) {
    const std::string error = ErrorOf(p.string());
    EXPECT_NE(error.find("no 'domain': not a domain file"), std::string::npos) << error;
    EXPECT_EQ(error.find("SECRET"), std::string::npos) << error;
    EXPECT_EQ(error.find("aws"), std::string::npos) << error;
  }
  // A plan file that is not one is not shown either.
  const auto planned =
      dir.Write("planned.yaml",
                "domain: alpha\nplan_key: k\nplan_source: file:shadow.yaml\nplans:\n  default:\n"
                "    - key: k\n      rate_limit: {unit: second, requests_per_unit: 1}\n");
  const std::string error = ErrorOf(planned.string());
  EXPECT_NE(error.find("no 'identities': not a plan file"), std::string::npos) << error;
  EXPECT_EQ(error.find("SECRET"), std::string::npos) << error;
  // A file that is a domain file still has its unknown fields named.
  const auto typo = dir.Write("typo.yaml", std::string(kDomainA) + "descriptor: []\n");
  EXPECT_NE(ErrorOf(typo.string()).find("unknown field 'descriptor'"), std::string::npos);
}

// envoyproxy/ratelimit's MERGE_DOMAIN_CONFIG: files naming one domain add their top-level rules.
TEST(ConfigFiles, MergeDomainConfigJoinsTheRulesOfOneDomainAcrossFiles) {
  TempConfigDir dir("merge");
  dir.Write("a.yaml",
            "domain: shared\ndescriptors:\n  - key: user\n    rate_limit: {unit: minute, "
            "requests_per_unit: 5}\n");
  const fs::path root = dir.Write("b.yaml",
                                  "domain: shared\ndescriptors:\n  - key: path\n    value: /a\n"
                                  "    descriptors:\n      - key: user\n        rate_limit: "
                                  "{unit: hour, requests_per_unit: 7}\n")
                            .parent_path();
  const std::string refused = ErrorOf(root.string());
  EXPECT_NE(refused.find("domain 'shared' is already defined at"), std::string::npos) << refused;
  EXPECT_NE(refused.find("--merge-domain-config"), std::string::npos) << refused;

  auto merged = LoadConfig(root, {.merge_domains = true});
  ASSERT_TRUE(merged.has_value()) << merged.error().message;
  ASSERT_EQ((*merged)->domains().size(), 1u);
  EXPECT_EQ((*merged)->limit_count(), 2u);
  const Limit* per_user = test::MustMatch(**merged, "shared", {{"user", "u"}}).limit;
  ASSERT_NE(per_user, nullptr);
  EXPECT_EQ(per_user->requests_per_unit, 5);
  const Limit* nested = test::MustMatch(**merged, "shared", {{"path", "/a"}, {"user", "u"}}).limit;
  ASSERT_NE(nested, nullptr);
  EXPECT_EQ(nested->requests_per_unit, 7);
  EXPECT_EQ(nested->period.unit, Unit::kHour);

  // The same top-level rule in two files is still an error, naming both.
  dir.Write("c.yaml",
            "domain: shared\ndescriptors:\n  - key: user\n    rate_limit: {unit: second, "
            "requests_per_unit: 1}\n");
  auto repeated = LoadConfig(root, {.merge_domains = true});
  ASSERT_FALSE(repeated.has_value());
  EXPECT_NE(repeated.error().message.find("the rule key 'user' is also defined"), std::string::npos)
      << repeated.error().message;
  EXPECT_NE(repeated.error().message.find("c.yaml"), std::string::npos);
  EXPECT_NE(repeated.error().message.find("a.yaml"), std::string::npos);
}

TEST(ConfigFiles, MergedDomainsTakeThePlansOfTheOneFileThatHasThem) {
  TempConfigDir dir("merge-plans");
  const std::string plans =
      "domain: shared\nplan_key: api_key\nplans:\n  default:\n    - key: api_key\n"
      "      rate_limit: {unit: minute, requests_per_unit: 3}\n";
  dir.Write("a.yaml",
            "domain: shared\ndescriptors:\n  - key: user\n    rate_limit: {unit: minute, "
            "requests_per_unit: 5}\n");
  const fs::path root = dir.Write("b.yaml", plans).parent_path();
  auto merged = LoadConfig(root, {.merge_domains = true});
  ASSERT_TRUE(merged.has_value()) << merged.error().message;
  const Limit* plan = test::MustMatch(**merged, "shared", {{"api_key", "k"}}).limit;
  ASSERT_NE(plan, nullptr);
  EXPECT_EQ(plan->requests_per_unit, 3);
  EXPECT_EQ(test::MustMatch(**merged, "shared", {{"user", "u"}}).limit->requests_per_unit, 5);
  dir.Write("c.yaml", plans);
  auto twice = LoadConfig(root, {.merge_domains = true});
  ASSERT_FALSE(twice.has_value());
  EXPECT_NE(twice.error().message.find("define a domain's plans in one file"), std::string::npos);
}

// share_threshold (envoyproxy/ratelimit): the values a wildcard rule matches share one counter.
TEST(ShareThreshold, ValuesAWildcardMatchesShareOneCounter) {
  TempConfigDir dir("share");
  const auto file = dir.Write("share.yaml", R"(domain: share
descriptors:
  - key: path
    value: /files/*
    share_threshold: true
    rate_limit: {unit: minute, requests_per_unit: 2}
  - key: path
    value: /own/*
    rate_limit: {unit: minute, requests_per_unit: 2}
  - key: tenant
    value: t-*
    share_threshold: true
    descriptors:
      - key: user
        rate_limit: {unit: minute, requests_per_unit: 2}
)");
  auto config = test::MustLoad(file.string());
  ASSERT_NE(config, nullptr);
  const auto key = [&](std::initializer_list<test::Entry> entries) {
    return test::MustMatch(*config, "share", entries).counter_key;
  };
  EXPECT_EQ(key({{"path", "/files/a.pdf"}}), key({{"path", "/files/b.csv"}}));
  EXPECT_NE(key({{"path", "/own/a"}}), key({{"path", "/own/b"}})) << "no share_threshold";
  // Shared at an inner level: the tenant's pattern replaces its value, the user stays its own.
  EXPECT_EQ(key({{"tenant", "t-1"}, {"user", "u"}}), key({{"tenant", "t-2"}, {"user", "u"}}));
  EXPECT_NE(key({{"tenant", "t-1"}, {"user", "u"}}), key({{"tenant", "t-1"}, {"user", "v"}}));
  EXPECT_TRUE((*config).warnings().empty());
}

// Domain files sorted after a plan file kept their own content. (Erasing the plan file from the
// list in place assigned YAML nodes, which writes through: c.yaml became d.yaml's domain.)
TEST(ConfigFiles, DomainFilesAfterAPlanFileKeepTheirOwnContent) {
  TempConfigDir dir("after-plans");
  dir.Write("a.yaml",
            "domain: alpha\nplan_key: k\nplan_source: file:b_plans.yaml\nplans:\n  default:\n"
            "    - key: k\n      rate_limit: {unit: second, requests_per_unit: 1}\n");
  dir.Write("b_plans.yaml", "identities:\n  x: default\n");
  dir.Write("c.yaml",
            "domain: gamma\ndescriptors:\n  - key: g\n    rate_limit: {unit: minute, "
            "requests_per_unit: 3}\n");
  const fs::path root = dir.Write("d.yaml",
                                  "domain: delta\ndescriptors:\n  - key: d\n    rate_limit: "
                                  "{unit: hour, requests_per_unit: 4}\n")
                            .parent_path();
  auto config = LoadConfig(root);
  ASSERT_TRUE(config.has_value()) << config.error().message;
  ASSERT_EQ((*config)->domains().size(), 3u);
  EXPECT_EQ(test::MustMatch(**config, "gamma", {{"g", "1"}}).limit->requests_per_unit, 3);
  EXPECT_EQ(test::MustMatch(**config, "delta", {{"d", "1"}}).limit->requests_per_unit, 4);
  EXPECT_NE((*config)->FindDomain("gamma")->origin.find("c.yaml"), std::string::npos);
}

}  // namespace
}  // namespace sluice::server
