// The sluiced configuration: rate limit rules in the envoyproxy/ratelimit YAML format plus
// sluice's extensions (algorithm, burst, mode, failure mode, plans). docs/configuration.md is
// the reference for the format; this header is the loaded, validated form.
//
//   auto config = LoadConfig("/etc/sluice");            // a file, or a directory of *.yaml
//   if (!config) log(config.error().message);           // "api.yaml:12:7: unknown unit 'sec'..."
//   MatchResult m = Match(**config, "api", entries);     // descriptor.h
//
// A Config is immutable once loaded: share it as shared_ptr<const Config> and swap the pointer
// to reload; readers on other threads keep the old one alive for as long as they use it.
#ifndef SLUICE_CONFIG_CONFIG_H_
#define SLUICE_CONFIG_CONFIG_H_

#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "config/descriptor_tree.h"
#include "config/forward_auth.h"
#include "config/limit_unit.h"
#include "core/shed.h"
#include "sluice/limit_spec.h"
#include "sluice/permits.h"
#include "sluice/quota_sync.h"
#include "sluice/region_scope.h"
#include "sluice/status.h"

namespace sluice::server {

// enforce: over the limit is rejected. shadow: decide and count, but always allow.
// soft: allow, count, and mark the response as over its soft limit.
enum class Mode { kEnforce, kShadow, kSoft };
// What to decide when the store cannot be reached.
enum class FailureMode { kOpen, kClosed };
// kBlocked is ratelimit's `requests_per_unit: 0` (its Example 3, a deny list): every request is
// over the limit and no store is asked. kUnlimited (`unlimited: true`) always allows, also
// without a store.
enum class LimitKind { kLimited, kUnlimited, kBlocked };
// How hits over the limit count (docs/configuration.md, over_limit_hits). drop: a refused request
// takes nothing, and a request one limit refuses takes nothing from the others. count
// (envoyproxy/ratelimit's behaviour): every hit is charged (Limiter::Charge), into debt beyond
// the limit, and never given back.
enum class OverLimitHits { kDrop, kCount };

std::string_view ModeName(Mode mode);
std::string_view FailureModeName(FailureMode mode);
std::string_view OverLimitHitsName(OverLimitHits hits);

// A descriptor's `concurrency: {max_in_flight: 100, permit_ttl: 30s}` (docs/load-protection.md):
// at most max_in_flight requests of the descriptor in flight at once, across every sluiced
// sharing the store, taken by POST /v1/acquire and given back by /v1/release. Always exact:
// `sync: leased|batched` and `scope: global` are refused (a permit cannot be leased ahead or
// split among regions without breaking the invariant).
struct ConcurrencyLimit {
  PermitSpec spec;  // max_in_flight > 0, ttl = permit_ttl > 0
  // What an acquire is answered when the store cannot be asked: `failure_mode` in the
  // concurrency block, else the descriptor's rate_limit's, else open.
  FailureMode failure_mode = FailureMode::kOpen;
  // `shed` in the concurrency block: slots kept free for more important priorities
  // (PermitAcquire::reserve = ShedReserve(*shed, priority, max_in_flight)).
  std::optional<ShedRule> shed;

  bool operator==(const ConcurrencyLimit&) const = default;
};

struct Limit {
  // Stable store namespace: the domain, the plan if any, and the configured descriptor path,
  // escaped (key_escape.h), e.g. "api|path=%2Fv1%2Fpay|method=POST". It changes only when the
  // path to the rule does, so a reload that edits a number keeps the counters.
  std::string id;
  std::string domain;
  std::string plan;         // the plan whose tree defines this limit; empty for `descriptors`
  std::string name;         // rate_limit.name; may be empty
  std::string metric_name;  // name, or ratelimit's dotted key "api.path_/v1/pay.method_POST"
  LimitKind kind = LimitKind::kLimited;
  // `unit` or `period` as configured (a second for unlimited); spec.period is its length.
  LimitPeriod period = LimitPeriod::Of(Unit::kSecond);
  int64_t requests_per_unit = 0;  // as configured (0 for unlimited and blocked)
  LimitSpec spec;                 // validated by ValidateLimitSpec when kind == kLimited
  Mode mode = Mode::kEnforce;
  FailureMode failure_mode = FailureMode::kOpen;
  // rate_limit.over_limit_hits; unset: the server's default (--over-limit-hits).
  std::optional<OverLimitHits> over_limit_hits;
  // envoyproxy/ratelimit's quota_mode: over this limit alone a request still passes, unless
  // every quota_mode limit of the request is over (LimitCheck::quota).
  bool quota_mode = false;
  // rate_limit.sync: how the nodes sharing a Redis keep this limit (docs/redis.md).
  QuotaSync sync = {};
  bool sync_configured = false;  // the rule sets `sync` (else LoadOptions::default_sync)
  // rate_limit.scope and .regions (docs/regions.md). With scope global, `spec` is this node's
  // region's static part and regions.global_spec the whole limit.
  RegionScope regions = {};
  bool detailed_metric = false;
  // A calendar rule's timezone_from: the descriptor key whose value names the request's zone
  // (a Domain::attribute_keys entry); empty: the rule's own zone only (docs/quotas.md, "A zone
  // per customer").
  std::string timezone_from;
  // rate_limit.shed (docs/load-protection.md, "Priority shedding"): the capacity each priority
  // may fill; unset: every request may take the last hit.
  std::optional<ShedRule> shed;
  std::vector<std::string> replaces;  // names of limits this one replaces in the same request
  std::string origin;                 // "file:line" of the descriptor, for messages
  // The descriptor's concurrency limit, if it has one. A descriptor with `concurrency` and no
  // `rate_limit` is a Limit of kind kUnlimited (no rate limit) with this set. Its permits live
  // under their own store namespace (LimiterSet's pool id), apart from the rate limit's counters.
  std::optional<ConcurrencyLimit> concurrency;
};

// One domain: its rules, its plans, and who is on which plan.
struct Domain {
  std::string name;
  std::string origin;  // "file:line" of `domain:`
  // Owned here; the trees hold indices into it.
  std::vector<Limit> limits;
  DescriptorTree descriptors;

  // Plans (tiers). Empty plan_key: the domain has none.
  std::string plan_key;  // the descriptor key whose value is the identity, e.g. "api_key"
  std::map<std::string, DescriptorTree, std::less<>> plans;  // always has "default" if any
  struct Hash {
    using is_transparent = void;
    size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
  };
  // identity value -> plan name (a key of `plans`), from plan_source.
  std::unordered_map<std::string, std::string, Hash, std::equal_to<>> identity_plans;
  std::string plan_source;  // the resolved plan file path, or empty
  // identity value -> IANA zone name, from plan_source entries that give a `timezone`: the zone
  // of that identity's calendar limits with timezone_from, over the request's (docs/quotas.md,
  // "A zone per customer"). Validated at load.
  std::unordered_map<std::string, std::string, Hash, std::equal_to<>> identity_zones;

  // Descriptor keys that are request attributes, not identity (descriptor.h, RequestAttribute):
  // stripped from every descriptor of the domain before matching and keying. Each feature that
  // reads one adds its key here at load (a rule's timezone_from, the domain's priority_key).
  std::vector<std::string> attribute_keys;

  // The descriptor entry that carries a request's priority (the domain's `priority_key`),
  // stripped (in attribute_keys) only when a limit of the domain has a shed rule.
  std::string priority_key = "priority";
  bool priority_key_configured = false;  // written in the domain file

  // How the forward-auth endpoint turns a request into this domain's descriptors; unset: the
  // domain does not serve it.
  std::optional<ForwardAuth> forward_auth;

  // The plan for an identity: its assigned plan, else "default". Requires plans.
  const std::string& PlanFor(std::string_view identity) const;
};

class Config {
 public:
  explicit Config(std::map<std::string, Domain, std::less<>> domains,
                  std::vector<std::string> warnings = {})
      : domains_(std::move(domains)), warnings_(std::move(warnings)) {}

  const Domain* FindDomain(std::string_view name) const {
    const auto it = domains_.find(name);
    return it == domains_.end() ? nullptr : &it->second;
  }
  // By name, for listing the loaded config (/v1/limits).
  const std::map<std::string, Domain, std::less<>>& domains() const { return domains_; }
  size_t limit_count() const;
  // What loaded but has no effect ("file:line:col: what"), e.g. a field envoyproxy/ratelimit
  // accepts that sluice ignores; sluiced logs these at load and reload.
  const std::vector<std::string>& warnings() const { return warnings_; }

 private:
  std::map<std::string, Domain, std::less<>> domains_;
  std::vector<std::string> warnings_;
};

// Where this node stands among regions (sluiced --region, --global-store).
struct RegionOptions {
  std::string region;         // empty: none (a limit of scope global is then refused)
  bool global_store = false;  // a global store is configured (regions mode leased needs one)
};

struct LoadOptions {
  // envoyproxy/ratelimit's MERGE_DOMAIN_CONFIG: files naming the same domain add their
  // top-level rules to it (a top-level key and value in two files is still an error). Off, a
  // domain in two files is an error.
  bool merge_domains = false;
  // The algorithm of a rule that names none. envoyproxy/ratelimit counts in fixed windows
  // aligned to the epoch: --default-algorithm fixed_window gives its numbers everywhere.
  Algorithm default_algorithm = Algorithm::kTokenBucket;
  // The sync of a rule that sets none (sluiced --default-sync): leases or batches for every
  // limit of an unchanged upstream config. A limit whose algorithm cannot lease stays exact,
  // with a warning.
  QuotaSync default_sync = {};
  // For limits of scope global: this node's region, and whether a global store is set.
  RegionOptions region = {};
};

// Loads `path`: one YAML file holding one domain, or a directory whose *.yaml and *.yml files
// (not recursive; names starting with '.' skipped) each hold one domain. Files a domain names
// as its plan_source are plan files, not domains. Every error names the file, the line and
// column, and what is wrong; nothing throws.
Result<std::shared_ptr<const Config>> LoadConfig(const std::filesystem::path& path,
                                                 const LoadOptions& options = {});

// A one-line summary of a loaded config ("2 domains, 9 limits, 3 plans").
std::string ConfigSummary(const Config& config);

// For --check-config: loads and discards. On success, ConfigSummary (warnings are in
// LoadConfig's result; sluiced prints them).
Result<std::string> CheckConfig(const std::filesystem::path& path, const LoadOptions& options = {});

}  // namespace sluice::server

#endif  // SLUICE_CONFIG_CONFIG_H_
