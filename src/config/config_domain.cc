// One domain file: `domain`, `descriptors` (ratelimit's format, checked strictly) and sluice's
// `plans`, `plan_key`, `plan_source`.
#include <algorithm>
#include <optional>
#include <string>
#include <vector>

#include "config/config_parse.h"
#include "config/key_escape.h"
#include "sluice/algorithm.h"
#include "sluice/duration.h"

namespace sluice::server::internal {
namespace {

constexpr std::string_view kAlgorithmNames =
    "token_bucket, leaky_bucket, fixed_window, sliding_window_log, sliding_window_counter, gcra";

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
  DomainParser(const std::string& file, Domain& domain, Warnings& warnings,
               Algorithm default_algorithm)
      : file_(file), domain_(domain), warnings_(warnings), default_algorithm_(default_algorithm) {}

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

  // A `replaces` name that no rate_limit of the domain has replaces nothing. ratelimit loads
  // it silently; it is most likely a typo, so say so.
  // A domain that sheds removes its priority_key entry from every descriptor before matching:
  // a rule of this file keyed on it could never match.
  Result<void> CheckPriorityKey() const {
    const bool sheds = std::any_of(domain_.limits.begin(), domain_.limits.end(), SheddingLimit);
    if (!sheds) return {};
    for (const auto& [key, node] : keys_) {
      if (key != domain_.priority_key) continue;
      return ErrorAt(file_, node,
                     "key '" + key +
                         "' is the domain's priority_key, which a domain with a shed "
                         "rule removes from descriptors before matching: this rule could never "
                         "match (set priority_key to another name)");
    }
    return {};
  }

  void CheckReplaces() const {
    for (const PendingReplace& r : replaces_) {
      bool found = false;
      for (const Limit& l : domain_.limits) found = found || l.name == r.name;
      if (!found) {
        WarnAt(warnings_, file_, r.node,
               "replaces names '" + r.name + "', but no rate_limit in domain '" + domain_.name +
                   "' has that name; it replaces nothing");
      }
    }
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
    for (size_t i = 0; i < list.size(); ++i) {
      const YAML::Node item = list[i];
      if (item.IsNull()) return EmptyItemError(file_, list, i, "a descriptor with a 'key'");
      if (auto ok = ParseDescriptor(item, tree, parent, path); !ok) return ok;
    }
    return {};
  }

  Result<void> ParseDescriptor(const YAML::Node& node, DescriptorTree& tree,
                               DescriptorTree::NodeId parent, const Path& path) {
    auto fields = Fields::Of(
        file_, node, "a descriptor",
        {"key", "value", "rate_limit", "concurrency", "descriptors", "shadow_mode",
         "detailed_metric", "quota_mode", "share_threshold", "value_to_metric", "metadata"},
        &warnings_);
    if (!fields) return std::unexpected(fields.error());
    if (++descriptors_ > kMaxDescriptorsPerDomain) {
      return ErrorAt(file_, node,
                     "domain '" + domain_.name + "' has more than " +
                         std::to_string(kMaxDescriptorsPerDomain) + " descriptors");
    }
    const auto key_node = fields->Get("key");
    if (!key_node) {
      if (fields->Present("key")) return ErrorAt(file_, fields->KeyOf("key"), "empty 'key'");
      return ErrorAt(file_, node, "descriptor has no 'key'");
    }
    auto key = ReadString(file_, *key_node, "key", kMaxNameBytes);
    if (!key) return std::unexpected(key.error());
    keys_.emplace_back(*key, *key_node);
    auto value = ReadValue(*fields);
    if (!value) return std::unexpected(value.error());
    if (auto ok = CheckUpstreamOnly(*fields); !ok) return ok;

    const auto added = tree.AddChild(parent, *key, *value);
    const std::string shown = "key '" + *key + "'" + (*value ? " value '" + **value + "'" : "");
    if (!added.inserted) {
      return ErrorAt(file_, node,
                     "duplicate descriptor " + shown + " (first at " + origins_[added.node] +
                         "); siblings must differ in key or value");
    }
    origins_.resize(added.node + 1);
    origins_[added.node] = Where(file_, node);

    Path here{path.id + "|" + Escaped(*key), path.metric + "." + *key, path.depth + 1};
    if (*value) {
      here.id += '=';
      AppendEscapedPattern(here.id, **value);
      here.metric += "_" + **value;
    }

    if (auto ok = ReadShareThreshold(*fields, *value, tree, added.node); !ok) return ok;

    const auto shadow = ReadDescriptorFlag(*fields, "shadow_mode");
    if (!shadow) return std::unexpected(shadow.error());
    const auto detailed = ReadDescriptorFlag(*fields, "detailed_metric");
    if (!detailed) return std::unexpected(detailed.error());
    const auto quota = ReadDescriptorFlag(*fields, "quota_mode");
    if (!quota) return std::unexpected(quota.error());

    const auto rl = fields->Get("rate_limit");
    const auto cc = fields->Get("concurrency");
    if (rl || cc) {
      auto limit = rl ? ParseRateLimit(*rl, *shadow) : ConcurrencyOnly(*shadow);
      if (!limit) return std::unexpected(limit.error());
      if (cc) {
        auto concurrency =
            ParseConcurrency(file_, *cc, rl ? std::optional(limit->failure_mode) : std::nullopt);
        if (!concurrency) return std::unexpected(concurrency.error());
        limit->concurrency = *concurrency;
      }
      limit->id = here.id;
      limit->domain = domain_.name;
      limit->plan = plan_;
      limit->metric_name = limit->name.empty() ? here.metric : limit->name;
      limit->detailed_metric = *detailed;
      limit->quota_mode = *quota;
      limit->origin = origins_[added.node];
      tree.SetLimit(added.node, static_cast<int32_t>(domain_.limits.size()));
      domain_.limits.push_back(std::move(*limit));
    }
    if (const auto nested = fields->Get("descriptors")) {
      return ParseList(*nested, tree, added.node, here);
    }
    return {};
  }

  // A descriptor with `concurrency` and no `rate_limit`: no rate limit (kind kUnlimited, as
  // `unlimited: true` is), only its permits, which shadow_mode observes as it would a rate limit.
  static Result<Limit> ConcurrencyOnly(bool shadow_mode) {
    Limit limit;
    limit.kind = LimitKind::kUnlimited;
    limit.mode = shadow_mode ? Mode::kShadow : Mode::kEnforce;
    return limit;
  }

  // ratelimit reads an empty or null `value` as no value (config_impl.go: the key alone is the
  // descriptor's key), so both make a key-only rule.
  Result<std::optional<std::string>> ReadValue(const Fields& fields) const {
    const auto v = fields.Get("value");
    if (!v || (v->IsScalar() && v->Scalar().empty())) return std::nullopt;
    auto text = ReadString(file_, *v, "value", kMaxValueBytes);
    if (!text) return std::unexpected(text.error());
    return std::optional<std::string>(std::move(*text));
  }

  // shadow_mode and detailed_metric belong to the descriptor's own rate_limit; without one they
  // do nothing (nested descriptors do not inherit them), which ratelimit accepts silently.
  // shadow_mode also applies to the descriptor's own concurrency slots (permit_rules.h).
  Result<bool> ReadDescriptorFlag(const Fields& fields, std::string_view flag) const {
    const auto f = fields.Get(flag);
    if (!f) return false;
    auto b = ReadBool(file_, *f, flag);
    if (!b) return std::unexpected(b.error());
    const bool applies =
        fields.Get("rate_limit") || (flag == "shadow_mode" && fields.Get("concurrency"));
    if (*b && !applies) {
      WarnAt(warnings_, file_, fields.KeyOf(flag),
             std::string(flag) +
                 " has no effect: this descriptor has no rate_limit, and nested descriptors do "
                 "not inherit it");
    }
    return *b;
  }

  // share_threshold (envoyproxy/ratelimit): every value a wildcard rule matches shares one
  // counter instead of one each. Only a wildcard value can have it, as upstream requires.
  Result<void> ReadShareThreshold(const Fields& fields, const std::optional<std::string>& value,
                                  DescriptorTree& tree, DescriptorTree::NodeId node) const {
    const auto f = fields.Get("share_threshold");
    if (!f) return {};
    auto b = ReadBool(file_, *f, "share_threshold");
    if (!b) return std::unexpected(b.error());
    if (!*b) return {};
    if (!value || !ValuePattern::IsPattern(*value)) {
      return ErrorAt(file_, fields.KeyOf("share_threshold"),
                     "share_threshold needs a wildcard value (one with '*'): it makes every value "
                     "the wildcard matches share one counter");
    }
    tree.ShareCounter(node, *value);
    return {};
  }

  // ratelimit fields sluice does not implement: value_to_metric only changes metric names and
  // metadata only annotates responses, so they load and are ignored, with a warning.
  Result<void> CheckUpstreamOnly(const Fields& fields) const {
    if (const auto f = fields.Get("value_to_metric")) {
      auto b = ReadBool(file_, *f, "value_to_metric");
      if (!b) return std::unexpected(b.error());
      if (*b) {
        WarnAt(warnings_, file_, fields.KeyOf("value_to_metric"),
               "value_to_metric is ignored: metrics keep the rule's key (use detailed_metric for "
               "per-value metrics)");
      }
    }
    if (const auto m = fields.Get("metadata")) {
      if (!m->IsMap()) {
        return ErrorAt(file_, *m, "metadata must be a mapping, not " + std::string(Describe(*m)));
      }
      WarnAt(warnings_, file_, fields.KeyOf("metadata"),
             "metadata is ignored: sluice does not return descriptor metadata");
    }
    return {};
  }

  Result<Limit> ParseRateLimit(const YAML::Node& node, bool shadow_mode) {
    auto fields = Fields::Of(file_, node, "rate_limit",
                             {"unit",
                              "period",
                              "calendar",
                              "timezone",
                              "timezone_from",
                              "week_start",
                              "requests_per_unit",
                              "name",
                              "replaces",
                              "unlimited",
                              "algorithm",
                              "burst",
                              "shaper",
                              "max_delay",
                              "mode",
                              "failure_mode",
                              "over_limit_hits",
                              "sync",
                              "scope",
                              "regions",
                              "shed"},
                             &warnings_);
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
    // ratelimit decodes requests_per_unit as a uint32 even where it then ignores it.
    std::optional<int64_t> rpu;
    if (const auto r = fields->Get("requests_per_unit")) {
      auto n = ReadInt(file_, *r, "requests_per_unit", &warnings_);
      if (!n) return std::unexpected(n.error());
      if (*n < 0 || *n > kMaxRequestsPerUnit) {
        return ErrorAt(
            file_, *r,
            "requests_per_unit must be between 0 and 4294967295 (got " + std::to_string(*n) + ")");
      }
      rpu = *n;
    }

    bool unlimited = false;
    if (const auto u = fields->Get("unlimited")) {
      auto b = ReadBool(file_, *u, "unlimited");
      if (!b) return std::unexpected(b.error());
      unlimited = *b;
    }
    if (unlimited) return ParseUnlimited(*fields, std::move(limit));

    auto calendar = ParseCalendar(file_, *fields);
    if (!calendar) return std::unexpected(calendar.error());
    if (*calendar) {
      // A calendar rule reports its unit's nominal length where one length is asked for
      // (docs/quotas.md, "What clients see"); its windows are the spec's calendar periods.
      limit.period = LimitPeriod::Of(CalendarReportUnit((*calendar)->unit));
      limit.spec.calendar = std::move(**calendar);
      auto from = ParseTimezoneFrom(file_, *fields);
      if (!from) return std::unexpected(from.error());
      limit.timezone_from = std::move(*from);
    } else {
      auto period = ParseWindow(*fields, node);
      if (!period) return std::unexpected(period.error());
      limit.period = *period;
    }

    if (!rpu) {
      WarnAt(warnings_, file_, node,
             "rate_limit has no requests_per_unit, so it is 0 and blocks every request (as in "
             "envoyproxy/ratelimit); write requests_per_unit: 0 to say so");
    }
    limit.requests_per_unit = rpu.value_or(0);
    if (limit.requests_per_unit == 0) {
      for (std::string_view f :
           {"algorithm", "burst", "shaper", "max_delay", "sync", "scope", "regions", "calendar",
            "timezone", "timezone_from", "week_start", "shed"}) {
        if (fields->Present(f)) {
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

  // `unit` (ratelimit's names) or `period` (any length): exactly one of them.
  Result<LimitPeriod> ParseWindow(const Fields& fields, const YAML::Node& node) {
    const auto unit_node = fields.Get("unit");
    const auto period_node = fields.Get("period");
    if (unit_node && period_node) {
      return ErrorAt(file_, fields.KeyOf("period"),
                     "a rate_limit takes 'unit' or 'period', not both");
    }
    if (period_node) {
      auto text = ReadString(file_, *period_node, "period", kMaxNameBytes);
      if (!text) return std::unexpected(text.error());
      auto period = ParsePeriod(*text);
      if (!period) return ErrorAt(file_, *period_node, period.error().message);
      return *period;
    }
    if (!unit_node) {
      const char* key = fields.Present("period") ? "period" : "unit";
      const YAML::Node at = fields.Present(key) ? fields.KeyOf(key) : node;
      return ErrorAt(file_, at, "rate_limit needs a 'unit' or a 'period' (or 'unlimited: true')");
    }
    auto unit_text = ReadString(file_, *unit_node, "unit", kMaxNameBytes);
    if (!unit_text) return std::unexpected(unit_text.error());
    const auto unit = ParseUnit(*unit_text);
    if (!unit) {
      return ErrorAt(file_, *unit_node,
                     "unknown unit '" + *unit_text +
                         "' (expected second, minute, hour, day, week, month or year)");
    }
    return LimitPeriod::Of(*unit);
  }

  // ratelimit refuses `unlimited: true` only together with a valid unit; requests_per_unit and
  // a unit it does not know are ignored there, so they load here with a warning. sluice's own
  // algorithm parameters mean nothing without a limit and stay errors.
  Result<Limit> ParseUnlimited(const Fields& fields, Limit limit) {
    for (std::string_view f :
         {"period", "calendar", "timezone", "timezone_from", "week_start", "algorithm", "burst",
          "shaper", "max_delay", "sync", "scope", "regions", "shed"}) {
      if (fields.Present(f)) {
        return ErrorAt(file_, fields.KeyOf(f),
                       "an unlimited rate_limit takes no '" + std::string(f) + "'");
      }
    }
    if (const auto u = fields.Get("unit")) {
      if (!u->IsScalar()) {
        return ErrorAt(file_, *u, "unit must be a string, not " + std::string(Describe(*u)));
      }
      if (ParseUnit(u->Scalar())) {
        return ErrorAt(file_, fields.KeyOf("unit"), "an unlimited rate_limit takes no 'unit'");
      }
      WarnAt(warnings_, file_, fields.KeyOf("unit"),
             "unit '" + u->Scalar() + "' is ignored: the rate_limit is unlimited");
    }
    if (fields.Get("requests_per_unit")) {
      WarnAt(warnings_, file_, fields.KeyOf("requests_per_unit"),
             "requests_per_unit is ignored: the rate_limit is unlimited");
    }
    limit.kind = LimitKind::kUnlimited;
    return limit;
  }

  // algorithm, burst, shaper, max_delay, then ValidateLimitSpec for the exact-arithmetic ranges
  // (and max_delay's: at most what a full queue imposes).
  Result<Limit> ParseSpec(const Fields& fields, const YAML::Node& node, Limit limit) {
    LimitSpec spec;
    spec.algorithm = default_algorithm_;
    spec.limit = limit.requests_per_unit;
    spec.period = limit.period.length;
    // A calendar window is a fixed window: `calendar` alone picks it.
    spec.calendar = std::move(limit.spec.calendar);
    if (spec.IsCalendar()) spec.algorithm = Algorithm::kFixedWindow;
    if (const auto a = fields.Get("algorithm")) {
      auto name = ReadString(file_, *a, "algorithm", kMaxNameBytes);
      if (!name) return std::unexpected(name.error());
      const auto alg = ParseAlgorithm(*name);
      if (!alg) {
        return ErrorAt(file_, *a,
                       "unknown algorithm '" + *name +
                           "' (expected one of: " + std::string(kAlgorithmNames) + ")");
      }
      if (spec.IsCalendar() && *alg != Algorithm::kFixedWindow) {
        return ErrorAt(file_, *a,
                       "calendar windows are fixed windows: algorithm must be fixed_window (or "
                       "left out), not " +
                           *name);
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
    if (const auto m = fields.Get("max_delay")) {
      if (!spec.shaper) {
        return ErrorAt(file_, fields.KeyOf("max_delay"),
                       "max_delay applies only to a leaky_bucket shaper (shaper: true)");
      }
      auto text = ReadString(file_, *m, "max_delay", kMaxNameBytes);
      if (!text) return std::unexpected(text.error());
      auto d = ParseDuration(*text);
      if (!d) return ErrorAt(file_, *m, "max_delay: " + d.error().message);
      spec.max_delay = *d;
    }
    auto valid = ValidateLimitSpec(spec);
    if (!valid) {
      // An error only max_delay causes is shown at max_delay.
      LimitSpec unbounded = spec;
      unbounded.max_delay = Duration::max();
      const auto max_delay = fields.Get("max_delay");
      const bool at_max_delay = max_delay && ValidateLimitSpec(unbounded).has_value();
      return ErrorAt(file_, at_max_delay ? *max_delay : node,
                     "rate_limit: " + valid.error().message);
    }
    limit.spec = *valid;
    if (const auto s = fields.Get("sync")) {
      auto sync = ParseSync(*s, limit);
      if (!sync) return std::unexpected(sync.error());
      limit.sync = *sync;
      limit.sync_configured = true;
    }
    auto regions = ParseRegionScope(file_, fields.Get("scope"), fields.Get("regions"), limit,
                                    LimitName(limit), warnings_);
    if (!regions) return std::unexpected(regions.error());
    limit.regions = std::move(*regions);
    if (limit.regions.global && limit.spec.IsCalendar()) {
      return ErrorAt(file_, fields.KeyOf("scope"),
                     LimitName(limit) +
                         ": scope: global cannot serve a calendar window (regions share a limit "
                         "per fixed-length period; keep the calendar rule per store)");
    }
    auto shed = ParseShed(file_, fields, limit, LimitName(limit));
    if (!shed) return std::unexpected(shed.error());
    limit.shed = std::move(*shed);
    return limit;
  }

  // `sync: exact|leased|batched`, or `sync: {mode: leased, lease_ttl: 2s}` /
  // `{mode: batched, interval: 100ms}`. A lease is quota taken ahead of use, which only an
  // algorithm whose admissions are units taken from one count can give; a batched node reads
  // that count back from Redis's answers, which a sliding window's state cannot be read from
  // (docs/redis.md). Neither can serve a shaper, whose delay depends on the shared queue.
  Result<QuotaSync> ParseSync(const YAML::Node& node, const Limit& limit) {
    QuotaSync sync;
    YAML::Node mode_node = node;
    std::optional<Fields> fields;
    if (node.IsMap()) {
      auto f = Fields::Of(file_, node, "sync", {"mode", "lease_ttl", "interval"}, &warnings_);
      if (!f) return std::unexpected(f.error());
      fields = std::move(*f);
      const auto m = fields->Get("mode");
      if (!m) return ErrorAt(file_, node, "sync needs a 'mode' (exact, leased or batched)");
      mode_node = *m;
    }
    auto mode = ReadString(file_, mode_node, "sync mode", kMaxNameBytes);
    if (!mode) return std::unexpected(mode.error());
    if (*mode == "exact") {
      sync.mode = SyncMode::kExact;
    } else if (*mode == "leased") {
      sync.mode = SyncMode::kLeased;
    } else if (*mode == "batched") {
      sync.mode = SyncMode::kBatched;
    } else {
      return ErrorAt(file_, mode_node,
                     "unknown sync mode '" + *mode + "' (expected exact, leased or batched)");
    }
    const std::string name = LimitName(limit);
    if (sync.mode != SyncMode::kExact && limit.spec.IsCalendar()) {
      return ErrorAt(file_, mode_node,
                     name + ": sync mode " + *mode +
                         " cannot serve a calendar window (leases and batches are sized by a "
                         "fixed-length period); use sync: exact");
    }
    if (sync.mode != SyncMode::kExact && !SharedSyncCanServe(limit.spec)) {
      if (limit.spec.shaper) {
        return ErrorAt(file_, mode_node,
                       name + ": sync mode " + *mode +
                           " cannot serve shaper: true (a shaper's delay depends on every "
                           "node's queue)");
      }
      return ErrorAt(file_, mode_node,
                     name + ": sync mode " + *mode +
                         " needs token_bucket, gcra, fixed_window or leaky_bucket, not " +
                         std::string(AlgorithmName(limit.spec.algorithm)) +
                         (sync.mode == SyncMode::kLeased
                              ? " (a sliding window cannot lend hits ahead of time)"
                              : " (a sliding window's state cannot be read back from "
                                "Redis's answers)"));
    }
    if (!fields) return sync;
    struct TimeField {
      const char* key;
      SyncMode mode;
      Duration* out;
      Duration min, max;
    };
    const TimeField times[] = {
        {"lease_ttl", SyncMode::kLeased, &sync.lease_ttl, std::chrono::milliseconds(10),
         std::chrono::hours(1)},
        {"interval", SyncMode::kBatched, &sync.interval, std::chrono::milliseconds(1),
         std::chrono::minutes(1)},
    };
    for (const TimeField& t : times) {
      const auto v = fields->Get(t.key);
      if (!v) continue;
      if (sync.mode != t.mode) {
        return ErrorAt(file_, fields->KeyOf(t.key),
                       std::string(t.key) + " applies only to sync mode " +
                           (t.mode == SyncMode::kLeased ? "leased" : "batched"));
      }
      auto text = ReadString(file_, *v, t.key, kMaxNameBytes);
      if (!text) return std::unexpected(text.error());
      auto d = ParseDuration(*text);
      if (!d || *d < t.min || *d > t.max) {
        return ErrorAt(file_, *v,
                       std::string(t.key) + " must be a duration from " + FormatDuration(t.min) +
                           " to " + FormatDuration(t.max) + " (got '" + *text + "')");
      }
      *t.out = *d;
    }
    return sync;
  }

  static std::string LimitName(const Limit& limit) {
    return limit.name.empty() ? std::string("rate_limit") : "rate_limit '" + limit.name + "'";
  }

  Result<void> ParseReplaces(const Fields& fields, Limit& limit) {
    const auto list = fields.Get("replaces");
    if (!list) return {};
    if (!list->IsSequence()) {
      return ErrorAt(file_, *list,
                     "replaces must be a list of {name: ...}, not " + std::string(Describe(*list)));
    }
    for (size_t i = 0; i < list->size(); ++i) {
      const YAML::Node item = (*list)[i];
      if (item.IsNull()) return EmptyItemError(file_, *list, i, "{name: ...}");
      auto f = Fields::Of(file_, item, "a replaces entry", {"name"}, &warnings_);
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
    if (const auto h = fields.Get("over_limit_hits")) {
      auto text = ReadString(file_, *h, "over_limit_hits", kMaxNameBytes);
      if (!text) return std::unexpected(text.error());
      if (*text == "drop") {
        limit.over_limit_hits = OverLimitHits::kDrop;
      } else if (*text == "count") {
        limit.over_limit_hits = OverLimitHits::kCount;
      } else {
        return ErrorAt(file_, *h,
                       "unknown over_limit_hits '" + *text + "' (expected drop or count)");
      }
    }
    return {};
  }

  const std::string& file_;
  Domain& domain_;
  Warnings& warnings_;
  const Algorithm default_algorithm_;
  std::string plan_;
  std::vector<std::string> origins_;  // "file:line:col" per node of the tree being parsed
  size_t descriptors_ = 0;
  std::vector<PendingReplace> replaces_;
  std::vector<std::pair<std::string, YAML::Node>> keys_;  // every rule's key, for CheckPriorityKey
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
  auto entries = MappingEntries(file, *plans, "plans", "plan");
  if (!entries) return std::unexpected(entries.error());
  for (const auto& [plan_name, rules] : *entries) {
    auto name = ReadString(file, plan_name, "plan name", kMaxNameBytes);
    if (!name) return std::unexpected(name.error());
    auto tree = domain.plans.try_emplace(*name).first;
    if (auto ok = parser.ParseTree(rules, tree->second, *name); !ok) return ok;
  }
  if (!domain.plans.contains("default")) {
    return ErrorAt(file, *plans, "plans must include 'default': identities without a plan get it");
  }
  return {};
}

}  // namespace

std::optional<std::string> PeekPlanSource(const YAML::Node& root) {
  if (!root.IsMap()) return std::nullopt;
  auto entries = MappingEntries("", root, "a domain file", "field");
  if (!entries) return std::nullopt;
  for (const auto& [key, value] : *entries) {
    if (key.Scalar() == "plan_source" && value.IsScalar() && value.Scalar().starts_with("file:")) {
      return value.Scalar().substr(5);
    }
  }
  return std::nullopt;
}

Result<ParsedDomain> ParseDomain(const std::string& file, const YAML::Node& root,
                                 Warnings& warnings, Algorithm default_algorithm) {
  if (auto ok = RequireIdentifyingKey(file, root, "a domain file", "domain"); !ok) {
    return std::unexpected(ok.error());
  }
  auto fields = Fields::Of(
      file, root, "a domain file",
      {"domain", "descriptors", "plans", "plan_key", "plan_source", "forward_auth", "priority_key"},
      &warnings);
  if (!fields) return std::unexpected(fields.error());
  ParsedDomain parsed;
  Domain& domain = parsed.domain;
  const auto name = fields->Get("domain");
  if (!name) {
    if (fields->Present("domain")) return ErrorAt(file, fields->KeyOf("domain"), "empty 'domain'");
    return ErrorAt(file, root, "no 'domain'");
  }
  auto text = ReadString(file, *name, "domain", kMaxNameBytes);
  if (!text) return std::unexpected(text.error());
  domain.name = std::move(*text);
  domain.origin = Where(file, *name);

  if (const auto key = fields->Get("priority_key")) {
    auto key_text = ReadString(file, *key, "priority_key", kMaxNameBytes);
    if (!key_text) return std::unexpected(key_text.error());
    domain.priority_key = std::move(*key_text);
    domain.priority_key_configured = true;
  }

  DomainParser parser(file, domain, warnings, default_algorithm);
  if (const auto list = fields->Get("descriptors")) {
    if (auto ok = parser.ParseTree(*list, domain.descriptors, ""); !ok) {
      return std::unexpected(ok.error());
    }
  }
  if (auto ok = ParsePlans(file, *fields, parser, domain); !ok) {
    return std::unexpected(ok.error());
  }
  parser.CheckReplaces();
  if (auto ok = parser.CheckPriorityKey(); !ok) return std::unexpected(ok.error());

  if (const auto fa = fields->Get("forward_auth")) {
    auto parsed_fa = ParseForwardAuth(file, *fa);
    if (!parsed_fa) return std::unexpected(parsed_fa.error());
    parsed_fa->origin = Where(file, fields->KeyOf("forward_auth"));
    domain.forward_auth = std::move(*parsed_fa);
  }

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
