// `sluice recommend`'s flags and what it runs: from a CSV trace (identity = key), from a JSONL
// trace of /v1/check bodies replayed through a config (per limit), or from a running sluiced's
// /v1/usage. Text for a person, or --output json.
#ifndef SLUICE_CLI_RECOMMEND_COMMAND_H_
#define SLUICE_CLI_RECOMMEND_COMMAND_H_

#include <string>
#include <vector>

namespace CLI {
class App;
}

namespace sluice::cli {

struct RecommendFlags {
  std::string input;
  std::string config;
  std::string per = "1m";
  double percentile = 99;
  double headroom = 1.2;
  std::string algorithm = "token_bucket";
  std::vector<int64_t> candidates;
  std::string output = "text";
  std::string peaks;  // a CSV of every identity's peaks
  std::string from;
  std::string admin_token;
  std::string domain;
  std::string limit;
};

void AddRecommendFlags(CLI::App& command, RecommendFlags& flags);

// The exit code: 0, 1 (the output could not be written, sluiced could not be read) or 2 (bad
// flags or input).
int RunRecommend(const RecommendFlags& flags, const CLI::App& command);

}  // namespace sluice::cli

#endif  // SLUICE_CLI_RECOMMEND_COMMAND_H_
