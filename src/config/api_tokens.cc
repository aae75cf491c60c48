#include "config/api_tokens.h"

#include <algorithm>
#include <optional>
#include <utility>

#include "config/config_yaml.h"
#include "util/hex.h"

namespace sluice::server {
namespace {

using internal::ErrorAt;
using internal::Fields;

constexpr size_t kMaxClientNameBytes = 256;
constexpr size_t kMaxSanBytes = 1024;
constexpr size_t kMaxDomainBytes = 256;  // as a config's domain names (config_yaml.h)

// 64 hex digits (either case) as 32 bytes; nullopt for anything else.
std::optional<TokenDigest> ParseDigest(std::string_view hex) {
  TokenDigest digest{};
  if (hex.size() != digest.size() * 2) return std::nullopt;
  for (size_t i = 0; i < digest.size(); ++i) {
    const int hi = util::HexValue(hex[2 * i]);
    const int lo = util::HexValue(hex[2 * i + 1]);
    if (hi < 0 || lo < 0) return std::nullopt;
    digest[i] = static_cast<unsigned char>(hi << 4 | lo);
  }
  return digest;
}

Result<void> ReadDomains(const std::string& file, const YAML::Node& node, ApiClient& client) {
  const std::string what = "client '" + client.name + "': domains";
  if (!node.IsSequence()) {
    return ErrorAt(file, node,
                   what + " must be a list ([billing] or [\"*\"]), not " +
                       std::string(internal::Describe(node)));
  }
  if (node.size() == 0) {
    return ErrorAt(file, node, what + " is empty: list the domains it may check, or [\"*\"]");
  }
  for (size_t i = 0; i < node.size(); ++i) {
    if (node[i].IsNull()) return internal::EmptyItemError(file, node, i, "a domain");
    auto domain = internal::ReadString(file, node[i], what + " item", kMaxDomainBytes);
    if (!domain) return std::unexpected(domain.error());
    if (*domain == "*") {
      client.all_domains = true;
    } else {
      client.domains.push_back(std::move(*domain));
    }
  }
  if (client.all_domains && !client.domains.empty()) {
    return ErrorAt(file, node, what + ": \"*\" (every domain) must be alone in the list");
  }
  return {};
}

// Where a client's credential goes, once it is known not to repeat another's.
struct Credential {
  std::optional<TokenDigest> digest;
  std::string san;
};

Result<Credential> ReadCredential(const std::string& file, const YAML::Node& item,
                                  const Fields& fields, const std::string& name) {
  const auto token = fields.Get("token_sha256");
  const auto san = fields.Get("san");
  if (token.has_value() == san.has_value()) {
    return ErrorAt(file, item,
                   "client '" + name + "' needs exactly one of token_sha256 and san (" +
                       (token ? "both are" : "neither is") + " given)");
  }
  Credential credential;
  if (token) {
    // The value is never quoted: a token pasted here by mistake must not reach the log.
    const std::optional<TokenDigest> digest =
        token->IsScalar() ? ParseDigest(token->Scalar()) : std::nullopt;
    if (!digest) {
      return ErrorAt(file, *token,
                     "client '" + name +
                         "': token_sha256 must be 64 hex digits, the SHA-256 of the token "
                         "(`sluice token` prints the line); the value is not shown");
    }
    credential.digest = *digest;
    return credential;
  }
  auto text = internal::ReadString(file, *san, "client '" + name + "': san", kMaxSanBytes);
  if (!text) return std::unexpected(text.error());
  credential.san = std::move(*text);
  return credential;
}

}  // namespace

bool ApiClient::MayCheck(std::string_view domain) const {
  return all_domains || std::find(domains.begin(), domains.end(), domain) != domains.end();
}

const ApiClient* ApiTokens::FindToken(const TokenDigest& digest) const {
  const auto it = by_token_.find(digest);
  return it == by_token_.end() ? nullptr : &clients_[it->second];
}

const ApiClient* ApiTokens::FindSan(std::string_view san) const {
  const auto it = by_san_.find(san);
  return it == by_san_.end() ? nullptr : &clients_[it->second];
}

Result<std::shared_ptr<const ApiTokens>> ParseApiTokens(const std::string& file,
                                                        const std::string& text) {
  auto root = internal::ParseDocument(file, text);
  if (!root) return std::unexpected(root.error());
  if (auto r = internal::RequireIdentifyingKey(file, *root, "a token file", "clients"); !r) {
    return std::unexpected(r.error());
  }
  auto top = Fields::Of(file, *root, "the token file", {"clients"});
  if (!top) return std::unexpected(top.error());
  const auto list = top->Get("clients");
  if (!list || !list->IsSequence() || list->size() == 0) {
    return ErrorAt(file, list ? *list : *root, "clients must be a non-empty list of clients");
  }
  auto table = std::make_shared<ApiTokens>();
  for (size_t i = 0; i < list->size(); ++i) {
    const YAML::Node item = (*list)[i];
    if (item.IsNull()) return internal::EmptyItemError(file, *list, i, "a client");
    auto fields =
        Fields::Of(file, item, "a client", {"name", "token_sha256", "san", "domains", "admin"});
    if (!fields) return std::unexpected(fields.error());
    const auto name_node = fields->Get("name");
    if (!name_node) return ErrorAt(file, item, "a client needs a name");
    auto name = internal::ReadString(file, *name_node, "name", kMaxClientNameBytes);
    if (!name) return std::unexpected(name.error());
    ApiClient client;
    client.name = std::move(*name);
    for (const ApiClient& other : table->clients_) {
      if (other.name == client.name) {
        return ErrorAt(file, *name_node, "client '" + client.name + "' is listed twice");
      }
    }
    auto credential = ReadCredential(file, item, *fields, client.name);
    if (!credential) return std::unexpected(credential.error());
    const auto domains = fields->Get("domains");
    if (!domains) return ErrorAt(file, item, "client '" + client.name + "' needs domains");
    if (auto r = ReadDomains(file, *domains, client); !r) return std::unexpected(r.error());
    if (const auto admin = fields->Get("admin")) {
      auto value = internal::ReadBool(file, *admin, "client '" + client.name + "': admin");
      if (!value) return std::unexpected(value.error());
      client.admin = *value;
    }
    client.san = credential->san;
    const size_t index = table->clients_.size();
    const bool fresh = credential->digest
                           ? table->by_token_.emplace(*credential->digest, index).second
                           : table->by_san_.emplace(credential->san, index).second;
    if (!fresh) {
      return ErrorAt(file, item,
                     "client '" + client.name + "' has the same " +
                         (credential->digest ? "token_sha256" : "san") + " as another client");
    }
    table->clients_.push_back(std::move(client));
  }
  return std::shared_ptr<const ApiTokens>(std::move(table));
}

Result<std::shared_ptr<const ApiTokens>> LoadApiTokens(const std::string& path) {
  auto text = internal::ReadFileText(path, kMaxApiTokensFileBytes);
  if (!text) return std::unexpected(text.error());
  return ParseApiTokens(path, *text);
}

}  // namespace sluice::server
