#include "service/caller_auth.h"

#include <openssl/evp.h>
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
  // OpenSSL 3's SHA256() looks the algorithm up in the provider table on every call (locks and
  // name compares: 2-3 times the hash itself for a token). Looked up once here; a constant
  // after that, shared by every thread, never freed (the process keeps it to its end).
  static EVP_MD* const sha256 = EVP_MD_fetch(nullptr, "SHA2-256", nullptr);
  TokenDigest digest{};
  if (sha256 == nullptr ||
      EVP_Digest(token.data(), token.size(), digest.data(), nullptr, sha256, nullptr) != 1) {
    SHA256(reinterpret_cast<const unsigned char*>(token.data()), token.size(), digest.data());
  }
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
  return Authorize(table, credentials, **client, domain);
}

std::expected<std::string_view, AuthFailure> Authorize(const ApiTokens& table,
                                                       const CallerCredentials& credentials,
                                                       const ApiClient& identified,
                                                       std::string_view domain) {
  if (identified.MayCheck(domain)) return identified.name;
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
