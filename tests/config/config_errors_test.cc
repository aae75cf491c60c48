// Every bad config is a fixture file named for what is wrong; each must fail with the file,
// the line of the offending node, and a message that says what is wrong.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "config/config.h"
#include "support/server_test_util.h"

namespace sluice::server {
namespace {

using test::Fixture;
using test::LoadError;

struct BadCase {
  const char* file;
  int line;  // 1-based line the error must name
  const char* says;
};

void PrintTo(const BadCase& c, std::ostream* os) { *os << c.file; }

class BadConfigTest : public ::testing::TestWithParam<BadCase> {};

TEST_P(BadConfigTest, NamesFileLineAndProblem) {
  const BadCase& c = GetParam();
  const std::string path = Fixture(c.file);
  const std::string error = LoadError(path);
  const std::string where = path + ":" + std::to_string(c.line) + ":";
  EXPECT_TRUE(error.starts_with(where)) << "error: " << error << "\nexpected prefix: " << where;
  EXPECT_NE(error.find(c.says), std::string::npos) << "error: " << error;
}

INSTANTIATE_TEST_SUITE_P(
    Fixtures, BadConfigTest,
    ::testing::Values(
        BadCase{"bad_unknown_field.yaml", 6, "unknown field 'requests_per_unt' in rate_limit"},
        BadCase{"bad_unknown_descriptor_field.yaml", 4, "unknown field 'rate_limits'"},
        BadCase{"bad_requests_per_unit_negative.yaml", 6, "between 0 and 4294967295 (got -3)"},
        BadCase{"bad_requests_per_unit_quoted.yaml", 6, "must be an integer, not a quoted"},
        BadCase{"bad_requests_per_unit_not_number.yaml", 6, "must be an integer, not 'ten'"},
        BadCase{"bad_requests_per_unit_too_large.yaml", 6, "(got 4294967296)"},
        BadCase{"bad_requests_per_unit_float.yaml", 6, "must be an integer, not '08'"},
        BadCase{"bad_key_not_string.yaml", 3, "key must be a string, not a list"},
        BadCase{"bad_key_missing.yaml", 3, "descriptor has no 'key'"},
        BadCase{"bad_descriptors_not_list.yaml", 3, "descriptors must be a list, not a mapping"},
        BadCase{"bad_bool_type.yaml", 4, "shadow_mode must be true or false, not '1'"},
        BadCase{"bad_unit_unknown.yaml", 5, "unknown unit 'fortnight'"},
        BadCase{"bad_algorithm_unknown.yaml", 7, "unknown algorithm 'leaky_window'"},
        BadCase{"bad_mode_unknown.yaml", 7, "unknown mode 'dry_run'"},
        BadCase{"bad_failure_mode_unknown.yaml", 7, "unknown failure_mode 'ajar'"},
        BadCase{"bad_shadow_mode_conflict.yaml", 8, "contradicts the descriptor's shadow_mode"},
        BadCase{"bad_duplicate_sibling.yaml", 9,
                "duplicate descriptor key 'user' value 'dave' (first at "},
        BadCase{"bad_duplicate_key_only_sibling.yaml", 9, "duplicate descriptor key 'ip' (first"},
        BadCase{"bad_duplicate_field.yaml", 7, "field 'unit' appears twice in rate_limit"},
        BadCase{"bad_burst_on_window.yaml", 8, "not sliding_window_counter"},
        BadCase{"bad_burst_zero.yaml", 7, "burst must be positive (got 0)"},
        BadCase{"bad_shaper_on_token_bucket.yaml", 7, "shaper applies only to leaky_bucket"},
        BadCase{"bad_max_delay_on_meter.yaml", 8,
                "max_delay applies only to a leaky_bucket shaper (shaper: true)"},
        BadCase{"bad_max_delay_duration.yaml", 9, "max_delay: invalid duration 'half a second'"},
        BadCase{"bad_max_delay_over_queue.yaml", 11,
                "max_delay must be from 0s to burst/rate = 2s, the most a full queue imposes "
                "(got 3s)"},
        BadCase{"bad_spec_out_of_range.yaml", 5, "sliding_window_log keeps one 4-byte timestamp"},
        BadCase{"bad_unlimited_with_unit.yaml", 6, "an unlimited rate_limit takes no 'unit'"},
        BadCase{"bad_blocked_with_burst.yaml", 7, "requests_per_unit: 0 blocks every request"},
        BadCase{"bad_replaces_itself.yaml", 9, "cannot replace itself ('limit_a')"},
        BadCase{"bad_missing_domain.yaml", 1, "no 'domain'"},
        BadCase{"bad_two_documents.yaml", 3, "a second YAML document"},
        // yaml-cpp's LoadAll never returned on this file (found by tests/fuzz/fuzz_config_yaml).
        BadCase{"bad_endless_documents.yaml", 3, "a second YAML document"},
        BadCase{"bad_over_limit_hits.yaml", 7,
                "unknown over_limit_hits 'sometimes' (expected drop or count)"},
        // sync: a lease needs an algorithm that can lend units ahead of use.
        BadCase{"bad_sync_leased_sliding_log.yaml", 9,
                "rate_limit 'logged': sync mode leased needs token_bucket, gcra, fixed_window or "
                "leaky_bucket, not sliding_window_log"},
        BadCase{"bad_sync_leased_shaper.yaml", 10,
                "rate_limit 'shaped': sync mode leased cannot serve shaper: true"},
        // Batched reads a window's count back from Redis's answers: a sliding window has none.
        BadCase{"bad_sync_batched_sliding_counter.yaml", 9,
                "rate_limit 'counted': sync mode batched needs token_bucket, gcra, fixed_window "
                "or leaky_bucket, not sliding_window_counter"},
        BadCase{"bad_sync_unknown.yaml", 8,
                "unknown sync mode 'lazy' (expected exact, leased or batched)"},
        BadCase{"bad_sync_ttl_on_batched.yaml", 8, "lease_ttl applies only to sync mode leased"},
        BadCase{"bad_sync_ttl_range.yaml", 8, "lease_ttl must be a duration from 10ms to 1h"},
        BadCase{"bad_sync_no_mode.yaml", 8, "sync needs a 'mode'"},
        // scope: global and its regions (docs/regions.md).
        BadCase{"bad_regions_shares_over_one.yaml", 11,
                "rate_limit 'r': shares sum to 1.1, more than 1"},
        BadCase{"bad_regions_share_zero.yaml", 11,
                "share of region 'us' must be a number in (0, 1]"},
        BadCase{"bad_regions_share_below_one_request.yaml", 11,
                "rate_limit 'r': share 0.005 of region 'eu' is less than one of its 100 requests"},
        BadCase{"bad_regions_without_global.yaml", 9, "regions applies only to scope: global"},
        BadCase{"bad_regions_global_without_regions.yaml", 8,
                "scope: global needs regions: {mode: static|leased"},
        BadCase{"bad_regions_scope_unknown.yaml", 8,
                "unknown scope 'planet' (expected region or global)"},
        BadCase{"bad_regions_mode_unknown.yaml", 10, "unknown regions mode 'dynamic'"},
        BadCase{"bad_regions_refresh_static.yaml", 11,
                "refresh applies only to regions mode leased"},
        BadCase{"bad_regions_refresh_range.yaml", 12, "refresh must be a duration from 50ms to 1h"},
        BadCase{"bad_regions_region_name.yaml", 11, "region name 'us:east' must be 1 to 64"},
        BadCase{"bad_regions_leased_not_fixed_window.yaml", 11,
                "rate_limit 'r': regions mode leased needs algorithm: fixed_window, not "
                "sliding_window_log"},
        BadCase{"bad_regions_no_shares.yaml", 10, "regions needs 'shares'"},
        BadCase{"bad_share_threshold.yaml", 5, "share_threshold needs a wildcard value"},
        // Merge keys: a bad merge value, and a typo in a merged mapping named where it is
        // written (the anchor), not where it is merged.
        BadCase{"bad_merge_not_mapping.yaml", 5,
                "a merge key (<<) takes a mapping or a list of mappings, not a scalar"},
        BadCase{"bad_merge_unknown_field.yaml", 6,
                "unknown field 'requests_per_unt' in rate_limit"},
        // A ratelimit field out of place is ignored, but names inside it are still checked.
        BadCase{"bad_ignored_field_typo.yaml", 9, "unknown field 'rate_limt'"},
        // sluice's own fields are not in ratelimit's global list: out of place, they are typos.
        BadCase{"bad_misplaced_extension.yaml", 4, "unknown field 'algorithm' in a descriptor"},
        // A null list item's own mark is the next item's line; the error names the list's line.
        BadCase{"bad_empty_list_item.yaml", 3, "item 2 of this list is empty"},
        BadCase{"bad_plan_file_missing.yaml", 3, "no_such_plans.yaml: cannot read"},
        BadCase{"bad_plans_without_default.yaml", 4, "plans must include 'default'"},
        BadCase{"bad_plans_without_plan_key.yaml", 2, "plans need a 'plan_key'"},
        BadCase{"bad_plan_source_scheme.yaml", 3, "plan_source must be 'file:PATH'"},
        // forward_auth (docs/gateways.md).
        BadCase{"bad_forward_auth_cidr_host_bits.yaml", 3,
                "trusted proxy '10.0.0.1/8': host bits are set after the prefix (the block is "
                "10.0.0.0/8)"},
        BadCase{"bad_forward_auth_cidr_prefix.yaml", 3,
                "trusted proxy '10.0.0.0/33': the prefix length after '/' must be 0 to 32"},
        BadCase{"bad_forward_auth_header_without_key.yaml", 6, "header 'X-Api-Key' needs a 'key'"},
        BadCase{"bad_forward_auth_unknown_entry.yaml", 4, "unknown forward_auth entry 'uri'"},
        BadCase{"bad_forward_auth_no_actions.yaml", 3, "forward_auth needs 'actions'"},
        BadCase{"bad_forward_auth_action_not_list.yaml", 4,
                "an action must be a non-empty list of entries"},
        BadCase{"bad_forward_auth_header_name.yaml", 4,
                "header 'X Api Key' is not an HTTP field name"},
        BadCase{"bad_forward_auth_two_sources.yaml", 4,
                "takes one of header, query or generic_key"},
        BadCase{"bad_forward_auth_unknown_field.yaml", 3, "unknown field 'trusted_proxy'"},
        BadCase{"bad_forward_auth_normalize_value.yaml", 5,
                "normalize.escaped_slashes: 'unescape' is not keep, decode or reject"},
        BadCase{"bad_forward_auth_normalize_option.yaml", 3, "unknown field 'merge_slashes'"}));

// Errors inside a plan file name the plan file and its line.
TEST(BadPlanFile, UnknownPlanNamesThePlanFileLine) {
  const std::string error = LoadError(Fixture("bad_plan_file_unknown_plan.yaml"));
  const std::string where = Fixture("bad_plan_identities_unknown_plan.yaml") + ":3:";
  EXPECT_TRUE(error.starts_with(where)) << error;
  EXPECT_NE(error.find("unknown plan 'golden' for identity 'u2'"), std::string::npos) << error;
  EXPECT_NE(error.find("default, silver"), std::string::npos) << error;
}

TEST(BadPlanFile, MalformedPlanFileNamesBothFiles) {
  const std::string error = LoadError(Fixture("bad_plan_file_malformed.yaml"));
  EXPECT_TRUE(error.starts_with(Fixture("bad_plan_file_malformed.yaml") + ":3:")) << error;
  EXPECT_NE(error.find(Fixture("bad_plan_identities_malformed.yaml") + ":"), std::string::npos)
      << error;
  EXPECT_NE(error.find("invalid YAML"), std::string::npos) << error;
}

TEST(BadYaml, MalformedYamlNamesFileAndLine) {
  const std::string path = Fixture("bad_malformed_yaml.yaml");
  const std::string error = LoadError(path);
  // The flow mapping opened on line 4 is never closed; the parser notices on line 4 or 5.
  EXPECT_TRUE(error.starts_with(path + ":4:") || error.starts_with(path + ":5:")) << error;
  EXPECT_NE(error.find("invalid YAML"), std::string::npos) << error;
}

TEST(BadYaml, EmptyFile) {
  const std::string path = Fixture("bad_empty_file.yaml");
  EXPECT_EQ(LoadError(path), path + ": empty file (expected a mapping)");
}

TEST(BadFiles, MissingFile) {
  const std::string path = Fixture("does_not_exist.yaml");
  const std::string error = LoadError(path);
  EXPECT_TRUE(error.starts_with(path + ": cannot read")) << error;
}

TEST(BadFiles, DuplicateDomainAcrossFilesNamesBoth) {
  const std::string dir = Fixture("bad_duplicate_domain");
  const std::string error = LoadError(dir);
  EXPECT_TRUE(error.starts_with(dir + "/two.yaml:2:")) << error;
  EXPECT_NE(error.find("domain 'shared' is already defined at " + dir + "/one.yaml:1:"),
            std::string::npos)
      << error;
}

TEST(BadFiles, DirectoryWithoutYamlFiles) {
  const std::string dir = Fixture("empty_dir");
  EXPECT_EQ(LoadError(dir), dir + ": no *.yaml or *.yml files");
}

// A temporary file removed at the end of the test.
class TempYaml {
 public:
  explicit TempYaml(const std::string& text)
      : path_(std::filesystem::temp_directory_path() /
              ("sluice_cfg_" + std::to_string(::getpid()) + "_" + std::to_string(counter_++) +
               ".yaml")) {
    std::ofstream(path_) << text;
  }
  ~TempYaml() { std::filesystem::remove(path_); }
  std::string path() const { return path_.string(); }

 private:
  static inline int counter_ = 0;
  std::filesystem::path path_;
};

std::string NestedDescriptors(int levels) {
  std::string yaml = "domain: deep\ndescriptors:\n";
  std::string indent = "  ";
  for (int i = 0; i < levels; ++i) {
    yaml += indent + "- key: k" + std::to_string(i) + "\n";
    if (i + 1 < levels) yaml += indent + "  descriptors:\n";
    indent += "    ";
  }
  return yaml;
}

TEST(Limits, SixteenLevelsLoadSeventeenDoNot) {
  TempYaml ok(NestedDescriptors(16));
  EXPECT_TRUE(LoadConfig(ok.path()).has_value());
  TempYaml deep(NestedDescriptors(17));
  const std::string error = LoadError(deep.path());
  // The 17th list begins on line 3 + 2 * 16 (each level is a key line and a descriptors line).
  EXPECT_TRUE(error.starts_with(deep.path() + ":35:")) << error;
  EXPECT_NE(error.find("deeper than 16 levels"), std::string::npos) << error;
}

TEST(Limits, OverlongKey) {
  TempYaml f("domain: d\ndescriptors:\n  - key: " + std::string(257, 'k') + "\n");
  const std::string error = LoadError(f.path());
  EXPECT_TRUE(error.starts_with(f.path() + ":3:")) << error;
  EXPECT_NE(error.find("key is longer than 256 bytes"), std::string::npos) << error;
}

TEST(Limits, ControlCharacterInValue) {
  TempYaml f("domain: d\ndescriptors:\n  - key: k\n    value: \"a\\tb\"\n");
  const std::string error = LoadError(f.path());
  EXPECT_TRUE(error.starts_with(f.path() + ":4:")) << error;
  EXPECT_NE(error.find("value contains a control character"), std::string::npos) << error;
}

TEST(CheckConfig, ReportsErrorsLikeLoad) {
  auto r = CheckConfig(Fixture("bad_unit_unknown.yaml"));
  ASSERT_FALSE(r.has_value());
  EXPECT_NE(r.error().message.find("unknown unit 'fortnight'"), std::string::npos);
}

}  // namespace
}  // namespace sluice::server
