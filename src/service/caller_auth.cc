#include "service/caller_auth.h"

#include <openssl/sha.h>

#include "util/ascii.h"

namespace sluice::server {

std::optional<std::string_view> BearerToken(std::string_view authorization) {
  constexpr std::string_view kScheme = "Bearer";
  if (authorization.size() < kScheme.size() ||
      !util::EqualsIgnoreAsciiCase(authorization.substr(0, kScheme.size()), kScheme)) {
    return std::nullopt;
  }
  std::string_view rest = authorization.substr(kScheme.size());
  if (!rest.empty() && rest.front() != ' ' && rest.front() != '\t') return std::nullopt;
  while (!rest.empty() && (rest.front() == ' ' || rest.front() == '\t')) rest.remove_prefix(1);
  while (!rest.empty() && (rest.back() == ' ' || rest.back() == '\t')) rest.remove_suffix(1);
  return rest;
}

TokenDigest DigestOfToken(std::string_view token) {
  TokenDigest digest{};
  SHA256(reinterpret_cast<const unsigned char*>(token.data()), token.size(), digest.data());
  return digest;
}

std::expected<const ApiClient*, AuthFailure> Identify(const ApiTokens& table,
                                                      const CallerCredentials& credentials) {
  if (credentials.bearer_token) {
    const ApiClient* client = table.FindToken(DigestOfToken(*credentials.bearer_token));
    if (client == nullptr) return std::unexpected(AuthFailure::kUnknown);
    return client;
  }
  for (const std::string& san : credentials.verified_sans) {
    if (const ApiClient* client = table.FindSan(san)) return client;
  }
  return std::unexpected(credentials.verified_sans.empty() ? AuthFailure::kMissing
                                                           : AuthFailure::kUnknown);
}

std::expected<std::string_view, AuthFailure> Authorize(const ApiTokens& table,
                                                       const CallerCredentials& credentials,
                                                       std::string_view domain) {
  auto client = Identify(table, credentials);
  if (!client) return std::unexpected(client.error());
  if ((*client)->MayCheck(domain)) return (*client)->name;
  if (!credentials.bearer_token) {
    // Another listed SAN of the same certificate may name a client that may.
    for (const std::string& san : credentials.verified_sans) {
      const ApiClient* other = table.FindSan(san);
      if (other != nullptr && other->MayCheck(domain)) return other->name;
    }
  }
  return std::unexpected(AuthFailure::kDomain);
}

}  // namespace sluice::server
