// Files and directories to a Config; the boundary where yaml-cpp's exceptions become errors.
#include <algorithm>
#include <exception>
#include <filesystem>
#include <map>
#include <set>
#include <string>
#include <system_error>
#include <vector>

#include "config/config.h"
#include "config/config_parse.h"

namespace sluice::server {
namespace {

namespace fs = std::filesystem;
using internal::ParsedDomain;

struct SourceFile {
  std::string name;  // as shown in errors
  YAML::Node root;
};

// The same file however it is spelled, for telling plan files apart in a directory.
fs::path Canonical(const fs::path& p) {
  std::error_code ec;
  fs::path c = fs::weakly_canonical(p, ec);
  return ec ? p.lexically_normal() : c;
}

fs::path PlanPath(const std::string& config_file, const std::string& source) {
  const fs::path p(source);
  return p.is_absolute() ? p : fs::path(config_file).parent_path() / p;
}

Result<SourceFile> ReadSource(const std::string& name, size_t max_bytes) {
  auto text = internal::ReadFileText(name, max_bytes);
  if (!text) return std::unexpected(text.error());
  auto root = internal::ParseDocument(name, *text);
  if (!root) return std::unexpected(root.error());
  return SourceFile{name, *root};
}

// LoadOptions::default_sync for every counted limit whose rule sets no sync: of it.
void ApplyDefaultSync(Domain& domain, const QuotaSync& sync, internal::Warnings& warnings) {
  if (sync.mode == SyncMode::kExact) return;
  for (Limit& limit : domain.limits) {
    if (limit.kind != LimitKind::kLimited || limit.sync_configured) continue;
    const Algorithm a = limit.spec.algorithm;
    if (limit.shed) {
      warnings.push_back(limit.origin + ": --default-sync " +
                         (sync.mode == SyncMode::kLeased ? "leased" : "batched") +
                         " does not apply to this limit with a shed rule, which stays exact");
      continue;
    }
    if (!SharedSyncCanServe(limit.spec)) {
      warnings.push_back(limit.origin + ": --default-sync " +
                         (sync.mode == SyncMode::kLeased ? "leased" : "batched") +
                         " does not apply to this " + std::string(AlgorithmName(a)) +
                         (limit.spec.shaper ? " shaper" : "") +
                         (limit.spec.IsCalendar() ? " calendar" : "") +
                         " limit, which stays exact (set its sync: to say so)");
      continue;
    }
    limit.sync = sync;
  }
}

Result<Domain> BuildDomain(const SourceFile& source, internal::Warnings& warnings,
                           Algorithm default_algorithm) {
  auto parsed = internal::ParseDomain(source.name, source.root, warnings, default_algorithm);
  if (!parsed) return std::unexpected(parsed.error());
  if (parsed->plan_source.empty()) return std::move(parsed->domain);
  const std::string plan_file = PlanPath(source.name, parsed->plan_source).string();
  auto plans = ReadSource(plan_file, internal::kMaxPlanFileBytes);
  if (!plans) {
    return internal::ErrorAt(source.name, parsed->plan_source_node,
                             "plan_source: " + plans.error().message);
  }
  if (auto ok = internal::ParsePlanFile(plans->name, plans->root, parsed->domain); !ok) {
    return std::unexpected(ok.error());
  }
  parsed->domain.plan_source = plan_file;
  return std::move(parsed->domain);
}

std::string_view TypeName(const fs::file_status& status) {
  switch (status.type()) {
    case fs::file_type::directory:
      return "a directory";
    case fs::file_type::fifo:
      return "a FIFO";
    case fs::file_type::socket:
      return "a socket";
    case fs::file_type::character:
      return "a character device";
    case fs::file_type::block:
      return "a block device";
    case fs::file_type::not_found:
      return "gone";
    default:
      return "unreadable";
  }
}

// The *.yaml and *.yml regular files of `dir` (symlinks followed: ConfigMap mounts use them).
// Every other entry is skipped with a warning, so that a domain file that became a dangling
// symlink, or a file saved as .yml.bak, is not silently missing from the config; hidden
// entries (".x.swp", Kubernetes' "..data" directory) are skipped silently.
Result<std::vector<std::string>> ListYamlFiles(const fs::path& dir, internal::Warnings& warnings) {
  std::vector<std::string> files;
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    const fs::path& p = it->path();
    const std::string name = p.filename().string();
    const std::string ext = p.extension().string();
    if (name.starts_with(".")) continue;
    if (ext != ".yaml" && ext != ".yml") {
      warnings.push_back(p.string() + ": skipped: not a *.yaml or *.yml file");
      continue;
    }
    std::error_code type_ec;
    const fs::file_status status = it->status(type_ec);
    if (status.type() != fs::file_type::regular) {
      const bool dangling = status.type() == fs::file_type::not_found && it->is_symlink(type_ec);
      warnings.push_back(p.string() + ": skipped: " +
                         (dangling ? std::string("a symlink to nothing")
                                   : "not a regular file (" + std::string(TypeName(status)) + ")"));
      continue;
    }
    files.push_back(p.string());
  }
  if (ec) return MakeError(dir.string() + ": cannot list: " + ec.message());
  std::sort(files.begin(), files.end());  // errors and duplicates reported in a stable order
  std::sort(warnings.begin(), warnings.end());
  if (files.empty()) return MakeError(dir.string() + ": no *.yaml or *.yml files");
  return files;
}

// `added` (from `file`) into `into`, the same domain from an earlier file: its top-level rules
// join those of `into`, its limits are appended (the trees renumbered to match), and its plans
// are taken if `into` has none; plans in both files are refused, as a merge of them would have
// no obvious meaning.
Result<void> MergeDomain(Domain& into, Domain added) {
  const std::string where = added.origin + ": domain '" + added.name + "'";
  if (!added.plan_key.empty() && !into.plan_key.empty()) {
    return MakeError(where + " has plans, and so has its definition at " + into.origin +
                     "; define a domain's plans in one file");
  }
  if (added.priority_key_configured && into.priority_key_configured &&
      added.priority_key != into.priority_key) {
    return MakeError(where + " has priority_key '" + added.priority_key +
                     "', but its definition at " + into.origin + " has '" + into.priority_key +
                     "'");
  }
  if (added.priority_key_configured) {
    into.priority_key = std::move(added.priority_key);
    into.priority_key_configured = true;
  }
  if (added.forward_auth && into.forward_auth) {
    return MakeError(where + " has forward_auth (" + added.forward_auth->origin +
                     "), and so has its definition at " + into.origin +
                     "; define a domain's forward_auth in one file");
  }
  const auto offset = static_cast<int32_t>(into.limits.size());
  if (auto conflict = into.descriptors.Graft(added.descriptors, offset)) {
    return MakeError(where + ": the rule " + *conflict + " is also defined at the top of " +
                     into.origin + "; merged files must not repeat a top-level rule");
  }
  if (!added.plan_key.empty()) {
    into.plan_key = std::move(added.plan_key);
    for (auto& [name, tree] : added.plans) {
      DescriptorTree& merged = into.plans[name];
      merged.Graft(tree, offset);  // a fresh tree: no conflicts
    }
    into.identity_plans = std::move(added.identity_plans);
    into.identity_zones = std::move(added.identity_zones);
    into.plan_source = std::move(added.plan_source);
  }
  if (added.forward_auth) into.forward_auth = std::move(added.forward_auth);
  for (Limit& l : added.limits) into.limits.push_back(std::move(l));
  for (std::string& key : added.attribute_keys) {
    if (std::find(into.attribute_keys.begin(), into.attribute_keys.end(), key) ==
        into.attribute_keys.end()) {
      into.attribute_keys.push_back(std::move(key));
    }
  }
  return {};
}

Result<std::shared_ptr<const Config>> Load(const fs::path& path, const LoadOptions& options) {
  std::error_code ec;
  const bool is_dir = fs::is_directory(path, ec);
  std::vector<SourceFile> sources;
  internal::Warnings warnings;
  if (!is_dir) {
    auto source = ReadSource(path.string(), internal::kMaxConfigFileBytes);
    if (!source) return std::unexpected(source.error());
    sources.push_back(std::move(*source));
  } else {
    auto files = ListYamlFiles(path, warnings);
    if (!files) return std::unexpected(files.error());
    for (const std::string& f : *files) {
      auto source = ReadSource(f, internal::kMaxConfigFileBytes);
      if (!source) return std::unexpected(source.error());
      sources.push_back(std::move(*source));
    }
    // A file some domain names as its plan_source is that domain's plan file, not a domain.
    std::set<fs::path> plan_files;
    for (const SourceFile& s : sources) {
      if (auto plan = internal::PeekPlanSource(s.root)) {
        plan_files.insert(Canonical(PlanPath(s.name, *plan)));
      }
    }
    // Kept by building a new vector, not by erasing in place: erasing assigns one element to
    // another, and assigning a YAML::Node writes through to the node it refers to, so the
    // files after a plan file took one another's content.
    std::vector<SourceFile> domain_files;
    for (SourceFile& s : sources) {
      if (!plan_files.contains(Canonical(s.name))) domain_files.push_back(std::move(s));
    }
    sources = std::move(domain_files);
  }
  std::map<std::string, Domain, std::less<>> domains;
  for (const SourceFile& s : sources) {
    auto domain = BuildDomain(s, warnings, options.default_algorithm);
    if (!domain) return std::unexpected(domain.error());
    ApplyDefaultSync(*domain, options.default_sync, warnings);
    internal::AddZoneAttributeKeys(*domain);
    for (Limit& limit : domain->limits) {
      if (auto ok = internal::ApplyRegion(limit, options.region); !ok) {
        return std::unexpected(ok.error());
      }
    }
    if (const auto it = domains.find(domain->name); it != domains.end()) {
      if (!options.merge_domains) {
        return MakeError(domain->origin + ": domain '" + domain->name + "' is already defined at " +
                         it->second.origin +
                         " (--merge-domain-config merges them, as ratelimit's "
                         "MERGE_DOMAIN_CONFIG does)");
      }
      if (auto merged = MergeDomain(it->second, std::move(*domain)); !merged) {
        return std::unexpected(merged.error());
      }
      continue;
    }
    std::string name = domain->name;
    domains.emplace(std::move(name), std::move(*domain));
  }
  internal::AddPriorityKeys(domains);
  return std::make_shared<const Config>(std::move(domains), std::move(warnings));
}

}  // namespace

std::string_view ModeName(Mode mode) {
  switch (mode) {
    case Mode::kEnforce:
      return "enforce";
    case Mode::kShadow:
      return "shadow";
    case Mode::kSoft:
      return "soft";
  }
  return "unknown";
}

std::string_view FailureModeName(FailureMode mode) {
  return mode == FailureMode::kClosed ? "closed" : "open";
}

std::string_view OverLimitHitsName(OverLimitHits hits) {
  return hits == OverLimitHits::kCount ? "count" : "drop";
}

const std::string& Domain::PlanFor(std::string_view identity) const {
  static const std::string kDefault = "default";
  const auto it = identity_plans.find(identity);
  return it == identity_plans.end() ? kDefault : it->second;
}

size_t Config::limit_count() const {
  size_t n = 0;
  for (const auto& [name, domain] : domains_) n += domain.limits.size();
  return n;
}

Result<std::shared_ptr<const Config>> LoadConfig(const std::filesystem::path& path,
                                                 const LoadOptions& options) {
  // yaml-cpp reports misuse and some malformed input by throwing; none of it leaves here.
  try {
    return Load(path, options);
  } catch (const YAML::Exception& e) {
    return MakeError(path.string() + ": invalid YAML: " + e.what());
  } catch (const std::exception& e) {
    return MakeError(path.string() + ": cannot load: " + e.what());
  }
}

std::string ConfigSummary(const Config& config) {
  size_t plans = 0;
  for (const auto& [name, domain] : config.domains()) plans += domain.plans.size();
  const size_t domains = config.domains().size();
  return std::to_string(domains) + (domains == 1 ? " domain, " : " domains, ") +
         std::to_string(config.limit_count()) + " limits, " + std::to_string(plans) + " plans";
}

Result<std::string> CheckConfig(const std::filesystem::path& path, const LoadOptions& options) {
  auto config = LoadConfig(path, options);
  if (!config) return std::unexpected(config.error());
  return ConfigSummary(**config);
}

}  // namespace sluice::server
