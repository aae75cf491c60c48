// A domain file's `forward_auth:` section (config/forward_auth.h), checked strictly: every error
// names the file, line and column of what is wrong.
#include <array>
#include <string>
#include <utility>

#include "config/config_parse.h"

namespace sluice::server::internal {
namespace {

// More would be a config written by a program gone wrong: each action is a descriptor checked
// on every request to the endpoint.
constexpr size_t kMaxActions = 64;
constexpr size_t kMaxEntriesPerAction = 64;  // the service checks descriptors of up to 64 entries

// An HTTP field name is a token (RFC 9110 5.1).
bool IsToken(std::string_view s) {
  constexpr std::string_view kSpecials = "!#$%&'*+-.^_`|~";
  for (char c : s) {
    const auto u = static_cast<unsigned char>(c);
    const bool alnum = (u >= '0' && u <= '9') || ((u | 0x20) >= 'a' && (u | 0x20) <= 'z');
    if (!alnum && kSpecials.find(c) == std::string_view::npos) return false;
  }
  return !s.empty();
}

Result<ForwardAuthEntry> ParseNamedEntry(const std::string& file, const YAML::Node& node) {
  auto fields =
      Fields::Of(file, node, "a forward_auth entry", {"header", "query", "generic_key", "key"});
  if (!fields) return std::unexpected(fields.error());
  ForwardAuthEntry entry;
  int sources = 0;
  YAML::Node source;
  for (const auto& [name, field] :
       {std::pair{"header", RequestField::kHeader}, std::pair{"query", RequestField::kQuery},
        std::pair{"generic_key", RequestField::kGenericKey}}) {
    const auto v = fields->Get(name);
    if (!v) continue;
    ++sources;
    source = *v;
    auto text = ReadString(file, *v, name,
                           field == RequestField::kGenericKey ? kMaxValueBytes : kMaxNameBytes);
    if (!text) return std::unexpected(text.error());
    entry.field = field;
    (field == RequestField::kGenericKey ? entry.value : entry.name) = std::move(*text);
  }
  if (sources != 1) {
    return ErrorAt(file, node,
                   "a forward_auth entry takes one of header, query or generic_key, with a key "
                   "(e.g. {header: X-Api-Key, key: api_key})");
  }
  if (entry.field == RequestField::kHeader && !IsToken(entry.name)) {
    return ErrorAt(file, source, "header '" + entry.name + "' is not an HTTP field name");
  }
  if (const auto k = fields->Get("key")) {
    auto key = ReadString(file, *k, "key", kMaxNameBytes);
    if (!key) return std::unexpected(key.error());
    entry.key = std::move(*key);
  } else if (entry.field == RequestField::kGenericKey) {
    entry.key = "generic_key";  // Envoy's default descriptor_key
  } else {
    return ErrorAt(file, node,
                   std::string(entry.field == RequestField::kHeader ? "header" : "query") + " '" +
                       entry.name +
                       "' needs a 'key': the descriptor key its value is "
                       "given under");
  }
  return entry;
}

Result<ForwardAuthEntry> ParseEntry(const std::string& file, const YAML::Node& node) {
  if (node.IsMap()) return ParseNamedEntry(file, node);
  auto name = ReadString(file, node, "a forward_auth entry", kMaxNameBytes);
  if (!name) return std::unexpected(name.error());
  ForwardAuthEntry entry;
  entry.key = *name;
  if (*name == "remote_address") {
    entry.field = RequestField::kRemoteAddress;
  } else if (*name == "method") {
    entry.field = RequestField::kMethod;
  } else if (*name == "host") {
    entry.field = RequestField::kHost;
  } else if (*name == "path") {
    entry.field = RequestField::kPath;
  } else {
    return ErrorAt(file, node,
                   "unknown forward_auth entry '" + *name +
                       "' (expected remote_address, method, host, path, or {header: NAME, key: "
                       "KEY}, {query: NAME, key: KEY}, {generic_key: VALUE})");
  }
  return entry;
}

Result<std::vector<ForwardAuthAction>> ParseActions(const std::string& file,
                                                    const YAML::Node& list) {
  if (!list.IsSequence() || list.size() == 0) {
    return ErrorAt(file, list,
                   "actions must be a list of descriptors, each a list of entries (e.g. "
                   "- [remote_address]), not " +
                       std::string(list.IsSequence() ? "an empty list" : Describe(list)));
  }
  if (list.size() > kMaxActions) {
    return ErrorAt(file, list, "more than " + std::to_string(kMaxActions) + " actions");
  }
  std::vector<ForwardAuthAction> actions;
  for (size_t i = 0; i < list.size(); ++i) {
    const YAML::Node item = list[i];
    if (item.IsNull()) return EmptyItemError(file, list, i, "a list of entries");
    if (!item.IsSequence() || item.size() == 0) {
      return ErrorAt(file, item,
                     "an action must be a non-empty list of entries (e.g. [remote_address]), "
                     "not " +
                         std::string(item.IsSequence() ? "an empty list" : Describe(item)));
    }
    if (item.size() > kMaxEntriesPerAction) {
      return ErrorAt(
          file, item,
          "an action has more than " + std::to_string(kMaxEntriesPerAction) + " entries");
    }
    ForwardAuthAction action;
    for (size_t j = 0; j < item.size(); ++j) {
      if (item[j].IsNull()) return EmptyItemError(file, item, j, "an entry");
      auto entry = ParseEntry(file, item[j]);
      if (!entry) return std::unexpected(entry.error());
      action.entries.push_back(std::move(*entry));
    }
    actions.push_back(std::move(action));
  }
  return actions;
}

// Addresses and CIDR blocks, and the literal `unix`: a peer on a Unix-socket listener.
Result<void> ParseTrustedProxies(const std::string& file, const YAML::Node& list, ForwardAuth& fa) {
  if (!list.IsSequence()) {
    return ErrorAt(file, list,
                   "trusted_proxies must be a list of addresses, CIDR blocks or unix, not " +
                       std::string(Describe(list)));
  }
  std::vector<util::IpNetwork>& networks = fa.trusted_proxies;
  for (size_t i = 0; i < list.size(); ++i) {
    const YAML::Node item = list[i];
    if (item.IsNull()) return EmptyItemError(file, list, i, "an address or CIDR block");
    auto text = ReadString(file, item, "a trusted proxy", kMaxNameBytes);
    if (!text) return std::unexpected(text.error());
    if (*text == "unix") {
      fa.trust_unix = true;
      continue;
    }
    auto network = util::ParseIpNetwork(*text);
    if (!network) return ErrorAt(file, item, "trusted proxy '" + *text + "': " + network.error());
    networks.push_back(*network);
  }
  return {};
}

// One `normalize` option: its value must be one of `names`, read as the matching entry of
// `values`.
template <typename E, size_t N>
Result<void> ParseChoice(const std::string& file, const Fields& fields, std::string_view name,
                         const std::array<std::string_view, N>& names,
                         const std::array<E, N>& values, E& out) {
  const auto v = fields.Get(name);
  if (!v) return {};
  auto text = ReadString(file, *v, name, kMaxNameBytes);
  if (!text) return std::unexpected(text.error());
  for (size_t i = 0; i < N; ++i) {
    if (*text == names[i]) {
      out = values[i];
      return {};
    }
  }
  std::string expected;
  for (size_t i = 0; i < N; ++i)
    expected += (i == 0 ? "" : i + 1 == N ? " or " : ", ") + std::string(names[i]);
  return ErrorAt(file, *v,
                 "normalize." + std::string(name) + ": '" + *text + "' is not " + expected);
}

// `normalize:`, the options of the canonical path (util/canonical_path.h).
Result<util::PathNormalize> ParseNormalize(const std::string& file, const YAML::Node& node) {
  using N = util::PathNormalize;
  auto fields = Fields::Of(file, node, "normalize",
                           {"trailing_slash", "path_params", "path_case", "escaped_slashes"});
  if (!fields) return std::unexpected(fields.error());
  N n;
  for (Result<void> r :
       {ParseChoice(
            file, *fields, "trailing_slash", std::array<std::string_view, 2>{"keep", "strip"},
            std::array{N::TrailingSlash::kKeep, N::TrailingSlash::kStrip}, n.trailing_slash),
        ParseChoice(file, *fields, "path_params", std::array<std::string_view, 2>{"keep", "strip"},
                    std::array{N::PathParams::kKeep, N::PathParams::kStrip}, n.path_params),
        ParseChoice(file, *fields, "path_case", std::array<std::string_view, 2>{"keep", "lower"},
                    std::array{N::PathCase::kKeep, N::PathCase::kLower}, n.path_case),
        ParseChoice(file, *fields, "escaped_slashes",
                    std::array<std::string_view, 3>{"keep", "decode", "reject"},
                    std::array{N::EscapedSlashes::kKeep, N::EscapedSlashes::kDecode,
                               N::EscapedSlashes::kReject},
                    n.escaped_slashes)}) {
    if (!r) return std::unexpected(r.error());
  }
  return n;
}

}  // namespace

Result<ForwardAuth> ParseForwardAuth(const std::string& file, const YAML::Node& node) {
  auto fields = Fields::Of(file, node, "forward_auth", {"trusted_proxies", "actions", "normalize"});
  if (!fields) return std::unexpected(fields.error());
  ForwardAuth fa;
  fa.origin = Where(file, node);
  if (const auto t = fields->Get("trusted_proxies")) {
    if (auto parsed = ParseTrustedProxies(file, *t, fa); !parsed) {
      return std::unexpected(parsed.error());
    }
  }
  if (const auto n = fields->Get("normalize")) {
    auto normalize = ParseNormalize(file, *n);
    if (!normalize) return std::unexpected(normalize.error());
    fa.normalize = *normalize;
  }
  const auto actions = fields->Get("actions");
  if (!actions) {
    return ErrorAt(file, node,
                   "forward_auth needs 'actions': the descriptors a request makes (e.g. "
                   "- [remote_address])");
  }
  auto parsed = ParseActions(file, *actions);
  if (!parsed) return std::unexpected(parsed.error());
  fa.actions = std::move(*parsed);
  return fa;
}

}  // namespace sluice::server::internal
