// One domain file: `domain`, `descriptors` (ratelimit's format, checked strictly) and sluice's
// `plans`, `plan_key`, `plan_source`.
#include <optional>
#include <string>
#include <vector>

#include "server/config_parse.h"
#include "server/key_escape.h"
#include "sluice/algorithm.h"

namespace sluice::server::internal {
namespace {

constexpr std::string_view kAlgorithmNames =
    "token_bucket, leaky_bucket, fixed_window, sliding_window_log, sliding_window_counter, gcra";

// A value pattern keeps its '*' raw in ids; every literal '*' elsewhere is escaped, so a
// value that is literally "a*" and the pattern "a*" get different ids.
std::string EscapedValue(std::string_view value) {
  std::string out;
  size_t start = 0;
  for (;;) {
    const size_t star = value.find('*', start);
    AppendEscaped(out, value.substr(start, star - start));
    if (star == std::string_view::npos) return out;
    out += '*';
    start = star + 1;
  }
}

struct PendingReplace {
  std::string name;
  YAML::Node node;
};

// Where in the domain a descriptor list sits.
struct Path {
  std::string id;      // the Limit::id prefix
  std::string metric;  // ratelimit's dotted key prefix
  int depth = 0;
};

class DomainParser {
 public:
  DomainParser(const std::string& file, Domain& domain) : file_(file), domain_(domain) {}

  Result<void> ParseTree(const YAML::Node& list, DescriptorTree& tree, const std::string& plan) {
    plan_ = plan;
    origins_.assign(1, "");
    Path path{Escaped(domain_.name), domain_.name, 0};
    if (!plan.empty()) {
      path.id += "|@plan=" + Escaped(plan);
      path.metric += ".plans." + plan;
    }
    return ParseList(list, tree, DescriptorTree::kRoot, path);
  }

  // Every name in a `replaces` must be the name of some rate_limit in this domain: a typo
  // there would silently replace nothing.
  Result<void> CheckReplaces() const {
    for (const PendingReplace& r : replaces_) {
      bool found = false;
      for (const Limit& l : domain_.limits) found = found || l.name == r.name;
      if (!found) {
        return ErrorAt(file_, r.node,
                       "replaces names '" + r.name + "', but no rate_limit in domain '" +
                           domain_.name + "' has that name");
      }
    }
    return {};
  }

 private:
  Result<void> ParseList(const YAML::Node& list, DescriptorTree& tree,
                         DescriptorTree::NodeId parent, const Path& path) {
    if (list.IsNull()) return {};
    if (!list.IsSequence()) {
      return ErrorAt(file_, list, "descriptors must be a list, not " + std::string(Describe(list)));
    }
    if (path.depth >= kMaxDepth) {
      return ErrorAt(file_, list,
                     "descriptors nest deeper than " + std::to_string(kMaxDepth) + " levels");
    }
    for (const YAML::Node& item : list) {
      if (auto ok = ParseDescriptor(item, tree, parent, path); !ok) return ok;
    }
    return {};
  }

  Result<void> ParseDescriptor(const YAML::Node& node, DescriptorTree& tree,
                               DescriptorTree::NodeId parent, const Path& path) {
    auto fields =
        Fields::Of(file_, node, "a descriptor",
                   {"key", "value", "rate_limit", "descriptors", "shadow_mode", "detailed_metric"},
                   {"quota_mode", "value_to_metric", "share_threshold", "metadata"});
    if (!fields) return std::unexpected(fields.error());
    if (++descriptors_ > kMaxDescriptorsPerDomain) {
      return ErrorAt(file_, node,
                     "domain '" + domain_.name + "' has more than " +
                         std::to_string(kMaxDescriptorsPerDomain) + " descriptors");
    }
    const auto key_node = fields->Get("key");
    if (!key_node) return ErrorAt(file_, node, "descriptor has no 'key'");
    auto key = ReadString(file_, *key_node, "key", kMaxNameBytes);
    if (!key) return std::unexpected(key.error());
    std::optional<std::string> value;
    if (const auto v = fields->Get("value")) {
      auto text = ReadString(file_, *v, "value", kMaxValueBytes);
      if (!text) {
        if (v->IsScalar() && v->Scalar().empty()) {
          return ErrorAt(file_, *v, "value must not be empty; omit it to match any value");
        }
        return std::unexpected(text.error());
      }
      value = std::move(*text);
    }

    const auto added = tree.AddChild(parent, *key, value);
    const std::string shown = "key '" + *key + "'" + (value ? " value '" + *value + "'" : "");
    if (!added.inserted) {
      return ErrorAt(file_, node,
                     "duplicate descriptor " + shown + " (first at " + origins_[added.node] +
                         "); siblings must differ in key or value");
    }
    origins_.resize(added.node + 1);
    origins_[added.node] = Where(file_, node);

    Path here{path.id + "|" + Escaped(*key), path.metric + "." + *key, path.depth + 1};
    if (value) {
      here.id += "=" + EscapedValue(*value);
      here.metric += "_" + *value;
    }

    bool shadow = false;
    bool detailed = false;
    for (std::string_view flag : {"shadow_mode", "detailed_metric"}) {
      const auto f = fields->Get(flag);
      if (!f) continue;
      auto b = ReadBool(file_, *f, flag);
      if (!b) return std::unexpected(b.error());
      if (*b && !fields->Get("rate_limit")) {
        return ErrorAt(file_, fields->KeyOf(flag),
                       std::string(flag) +
                           " applies to this descriptor's own rate_limit, and it has none "
                           "(nested descriptors do not inherit it)");
      }
      (flag == "shadow_mode" ? shadow : detailed) = *b;
    }

    if (const auto rl = fields->Get("rate_limit")) {
      auto limit = ParseRateLimit(*rl, shadow);
      if (!limit) return std::unexpected(limit.error());
      limit->id = here.id;
      limit->domain = domain_.name;
      limit->plan = plan_;
      limit->metric_name = limit->name.empty() ? here.metric : limit->name;
      limit->detailed_metric = detailed;
      limit->origin = origins_[added.node];
      tree.SetLimit(added.node, static_cast<int32_t>(domain_.limits.size()));
      domain_.limits.push_back(std::move(*limit));
    }
    if (const auto nested = fields->Get("descriptors")) {
      return ParseList(*nested, tree, added.node, here);
    }
    return {};
  }

  Result<Limit> ParseRateLimit(const YAML::Node& node, bool shadow_mode) {
    auto fields = Fields::Of(file_, node, "rate_limit",
                             {"unit", "requests_per_unit", "name", "replaces", "unlimited",
                              "algorithm", "burst", "shaper", "mode", "failure_mode"});
    if (!fields) return std::unexpected(fields.error());
    Limit limit;
    if (const auto n = fields->Get("name")) {
      auto name = ReadString(file_, *n, "rate_limit name", kMaxNameBytes);
      if (!name) return std::unexpected(name.error());
      limit.name = std::move(*name);
    }
    if (auto ok = ParseReplaces(*fields, limit); !ok) return std::unexpected(ok.error());
    if (auto ok = ParseModes(*fields, shadow_mode, limit); !ok) {
      return std::unexpected(ok.error());
    }

    bool unlimited = false;
    if (const auto u = fields->Get("unlimited")) {
      auto b = ReadBool(file_, *u, "unlimited");
      if (!b) return std::unexpected(b.error());
      unlimited = *b;
    }
    if (unlimited) {
      for (std::string_view f : {"unit", "requests_per_unit", "algorithm", "burst", "shaper"}) {
        if (fields->Get(f)) {
          return ErrorAt(file_, fields->KeyOf(f),
                         "an unlimited rate_limit takes no '" + std::string(f) + "'");
        }
      }
      limit.kind = LimitKind::kUnlimited;
      return limit;
    }

    const auto unit_node = fields->Get("unit");
    if (!unit_node) {
      return ErrorAt(file_, node, "rate_limit needs a 'unit' (or 'unlimited: true')");
    }
    auto unit_text = ReadString(file_, *unit_node, "unit", kMaxNameBytes);
    if (!unit_text) return std::unexpected(unit_text.error());
    const auto unit = ParseUnit(*unit_text);
    if (!unit) {
      return ErrorAt(file_, *unit_node,
                     "unknown unit '" + *unit_text +
                         "' (expected second, minute, hour, day, week, month or year)");
    }
    limit.unit = *unit;

    const auto rpu_node = fields->Get("requests_per_unit");
    if (!rpu_node) return ErrorAt(file_, node, "rate_limit needs 'requests_per_unit'");
    auto rpu = ReadInt(file_, *rpu_node, "requests_per_unit");
    if (!rpu) return std::unexpected(rpu.error());
    if (*rpu < 0 || *rpu > kMaxRequestsPerUnit) {
      return ErrorAt(
          file_, *rpu_node,
          "requests_per_unit must be between 0 and 4294967295 (got " + std::to_string(*rpu) + ")");
    }
    limit.requests_per_unit = *rpu;
    if (*rpu == 0) {
      for (std::string_view f : {"algorithm", "burst", "shaper"}) {
        if (fields->Get(f)) {
          return ErrorAt(file_, fields->KeyOf(f),
                         "requests_per_unit: 0 blocks every request; '" + std::string(f) +
                             "' has no meaning there");
        }
      }
      limit.kind = LimitKind::kBlocked;
      return limit;
    }
    return ParseSpec(*fields, node, std::move(limit));
  }

  // algorithm, burst, shaper, then ValidateLimitSpec for the exact-arithmetic ranges.
  Result<Limit> ParseSpec(const Fields& fields, const YAML::Node& node, Limit limit) {
    LimitSpec spec;
    spec.limit = limit.requests_per_unit;
    spec.period = UnitDuration(limit.unit);
    if (const auto a = fields.Get("algorithm")) {
      auto name = ReadString(file_, *a, "algorithm", kMaxNameBytes);
      if (!name) return std::unexpected(name.error());
      const auto alg = ParseAlgorithm(*name);
      if (!alg) {
        return ErrorAt(file_, *a,
                       "unknown algorithm '" + *name +
                           "' (expected one of: " + std::string(kAlgorithmNames) + ")");
      }
      spec.algorithm = *alg;
    }
    const std::string alg_name(AlgorithmName(spec.algorithm));
    if (const auto b = fields.Get("burst")) {
      if (!HasBurst(spec.algorithm)) {
        return ErrorAt(file_, fields.KeyOf("burst"),
                       "burst applies to token_bucket, gcra and leaky_bucket, not " + alg_name +
                           " (a window's capacity is its requests_per_unit)");
      }
      auto burst = ReadInt(file_, *b, "burst");
      if (!burst) return std::unexpected(burst.error());
      if (*burst <= 0) {
        return ErrorAt(file_, *b, "burst must be positive (got " + std::to_string(*burst) + ")");
      }
      spec.burst = *burst;
    }
    if (const auto s = fields.Get("shaper")) {
      auto shaper = ReadBool(file_, *s, "shaper");
      if (!shaper) return std::unexpected(shaper.error());
      if (*shaper && spec.algorithm != Algorithm::kLeakyBucket) {
        return ErrorAt(file_, fields.KeyOf("shaper"),
                       "shaper applies only to leaky_bucket, not " + alg_name);
      }
      spec.shaper = *shaper;
    }
    auto valid = ValidateLimitSpec(spec);
    if (!valid) return ErrorAt(file_, node, "rate_limit: " + valid.error().message);
    limit.spec = *valid;
    return limit;
  }

  Result<void> ParseReplaces(const Fields& fields, Limit& limit) {
    const auto list = fields.Get("replaces");
    if (!list) return {};
    if (!list->IsSequence()) {
      return ErrorAt(file_, *list,
                     "replaces must be a list of {name: ...}, not " + std::string(Describe(*list)));
    }
    for (const YAML::Node& item : *list) {
      auto f = Fields::Of(file_, item, "a replaces entry", {"name"});
      if (!f) return std::unexpected(f.error());
      const auto n = f->Get("name");
      if (!n) return ErrorAt(file_, item, "a replaces entry needs a 'name'");
      auto name = ReadString(file_, *n, "replaces name", kMaxNameBytes);
      if (!name) return std::unexpected(name.error());
      if (*name == limit.name) {
        return ErrorAt(file_, *n, "a rate_limit cannot replace itself ('" + *name + "')");
      }
      replaces_.push_back({*name, *n});
      limit.replaces.push_back(std::move(*name));
    }
    return {};
  }

  // `mode` (sluice) and `shadow_mode` (ratelimit) must agree when both are given.
  Result<void> ParseModes(const Fields& fields, bool shadow_mode, Limit& limit) {
    limit.mode = shadow_mode ? Mode::kShadow : Mode::kEnforce;
    if (const auto m = fields.Get("mode")) {
      auto text = ReadString(file_, *m, "mode", kMaxNameBytes);
      if (!text) return std::unexpected(text.error());
      Mode mode;
      if (*text == "enforce") {
        mode = Mode::kEnforce;
      } else if (*text == "shadow") {
        mode = Mode::kShadow;
      } else if (*text == "soft") {
        mode = Mode::kSoft;
      } else {
        return ErrorAt(file_, *m,
                       "unknown mode '" + *text + "' (expected enforce, shadow or soft)");
      }
      if (shadow_mode && mode != Mode::kShadow) {
        return ErrorAt(file_, *m,
                       "mode '" + *text + "' contradicts the descriptor's shadow_mode: true");
      }
      limit.mode = mode;
    }
    if (const auto f = fields.Get("failure_mode")) {
      auto text = ReadString(file_, *f, "failure_mode", kMaxNameBytes);
      if (!text) return std::unexpected(text.error());
      if (*text == "open") {
        limit.failure_mode = FailureMode::kOpen;
      } else if (*text == "closed") {
        limit.failure_mode = FailureMode::kClosed;
      } else {
        return ErrorAt(file_, *f, "unknown failure_mode '" + *text + "' (expected open or closed)");
      }
    }
    return {};
  }

  const std::string& file_;
  Domain& domain_;
  std::string plan_;
  std::vector<std::string> origins_;  // "file:line:col" per node of the tree being parsed
  size_t descriptors_ = 0;
  std::vector<PendingReplace> replaces_;
};

Result<void> ParsePlans(const std::string& file, const Fields& root, DomainParser& parser,
                        Domain& domain) {
  const auto plans = root.Get("plans");
  const auto key = root.Get("plan_key");
  if (!plans) {
    for (std::string_view f : {"plan_key", "plan_source"}) {
      if (root.Get(f)) {
        return ErrorAt(file, root.KeyOf(f), std::string(f) + " without 'plans'");
      }
    }
    return {};
  }
  if (!key) {
    return ErrorAt(file, root.KeyOf("plans"),
                   "plans need a 'plan_key': the descriptor key whose value is the identity");
  }
  auto key_text = ReadString(file, *key, "plan_key", kMaxNameBytes);
  if (!key_text) return std::unexpected(key_text.error());
  domain.plan_key = std::move(*key_text);
  if (!plans->IsMap()) {
    return ErrorAt(
        file, *plans,
        "plans must map plan names to descriptor lists, not " + std::string(Describe(*plans)));
  }
  for (auto it = plans->begin(); it != plans->end(); ++it) {
    auto name = ReadString(file, it->first, "plan name", kMaxNameBytes);
    if (!name) return std::unexpected(name.error());
    auto [tree, inserted] = domain.plans.try_emplace(*name);
    if (!inserted) return ErrorAt(file, it->first, "plan '" + *name + "' is defined twice");
    if (auto ok = parser.ParseTree(it->second, tree->second, *name); !ok) return ok;
  }
  if (!domain.plans.contains("default")) {
    return ErrorAt(file, *plans, "plans must include 'default': identities without a plan get it");
  }
  return {};
}

}  // namespace

std::optional<std::string> PeekPlanSource(const YAML::Node& root) {
  if (!root.IsMap()) return std::nullopt;
  for (auto it = root.begin(); it != root.end(); ++it) {
    if (it->first.IsScalar() && it->first.Scalar() == "plan_source" && it->second.IsScalar() &&
        it->second.Scalar().starts_with("file:")) {
      return it->second.Scalar().substr(5);
    }
  }
  return std::nullopt;
}

Result<ParsedDomain> ParseDomain(const std::string& file, const YAML::Node& root) {
  auto fields = Fields::Of(file, root, "a domain file",
                           {"domain", "descriptors", "plans", "plan_key", "plan_source"});
  if (!fields) return std::unexpected(fields.error());
  ParsedDomain parsed;
  Domain& domain = parsed.domain;
  const auto name = fields->Get("domain");
  if (!name) return ErrorAt(file, root, "no 'domain'");
  auto text = ReadString(file, *name, "domain", kMaxNameBytes);
  if (!text) return std::unexpected(text.error());
  domain.name = std::move(*text);
  domain.origin = Where(file, *name);

  DomainParser parser(file, domain);
  if (const auto list = fields->Get("descriptors")) {
    if (auto ok = parser.ParseTree(*list, domain.descriptors, ""); !ok) {
      return std::unexpected(ok.error());
    }
  }
  if (auto ok = ParsePlans(file, *fields, parser, domain); !ok) {
    return std::unexpected(ok.error());
  }
  if (auto ok = parser.CheckReplaces(); !ok) return std::unexpected(ok.error());

  if (const auto source = fields->Get("plan_source")) {
    auto src = ReadString(file, *source, "plan_source", kMaxValueBytes);
    if (!src) return std::unexpected(src.error());
    if (!src->starts_with("file:") || src->size() == 5) {
      return ErrorAt(file, *source,
                     "plan_source must be 'file:PATH' (relative to this file), not '" + *src + "'");
    }
    parsed.plan_source = src->substr(5);
    parsed.plan_source_node = *source;
  }
  return parsed;
}

}  // namespace sluice::server::internal
