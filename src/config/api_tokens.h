// The callers sluiced lets check, and which domains each may check (--api-tokens FILE,
// docs/security.md "Caller identity"):
//
//   clients:
//     - name: edge-envoy
//       san: spiffe://cluster.local/ns/edge/sa/envoy   # a verified client certificate's SAN
//       domains: ["*"]
//     - name: billing-service
//       token_sha256: 9f86d081...                      # SHA-256 of its bearer token, 64 hex
//       domains: [billing]
//     - name: support-desk
//       token_sha256: 2c26b46b...
//       domains: [billing]
//       admin: true        # may also change counters of its domains (POST/DELETE /v1/state)
//
// The file holds digests, never tokens: a token is found by the SHA-256 of what a caller
// presents (service/caller_auth.h computes it), in a hash map keyed by the 32 bytes, so no
// presented token is compared with a stored one byte by byte.
//
//   auto table = LoadApiTokens("/etc/sluice/tokens.yaml");
//   if (!table) log(table.error().message);  // "file:line:col: what", no value of the file
#ifndef SLUICE_CONFIG_API_TOKENS_H_
#define SLUICE_CONFIG_API_TOKENS_H_

#include <array>
#include <cstddef>
#include <cstring>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "sluice/status.h"

namespace sluice::server {

// A SHA-256 digest.
using TokenDigest = std::array<unsigned char, 32>;

struct ApiClient {
  std::string name;
  std::string san;                   // its certificate's SAN; empty for a client by token
  bool all_domains = false;          // domains: ["*"]
  std::vector<std::string> domains;  // otherwise, the ones it may check (not empty)
  // May change counters of those domains through the admin API (POST and DELETE /v1/state),
  // named by `name` in the audit log (--audit-log). False: it reads them only.
  bool admin = false;

  bool MayCheck(std::string_view domain) const;
};

class ApiTokens {
 public:
  // The client whose token has this digest, or nullptr.
  const ApiClient* FindToken(const TokenDigest& digest) const;
  // The client listed with exactly this SAN, or nullptr.
  const ApiClient* FindSan(std::string_view san) const;

  const std::vector<ApiClient>& clients() const { return clients_; }
  size_t tokens() const { return by_token_.size(); }
  size_t sans() const { return by_san_.size(); }

 private:
  friend Result<std::shared_ptr<const ApiTokens>> ParseApiTokens(const std::string& file,
                                                                 const std::string& text);
  // A digest is uniformly distributed (a caller cannot choose one without inverting SHA-256),
  // so its first bytes are a good hash as they are.
  struct DigestHash {
    size_t operator()(const TokenDigest& d) const {
      size_t h = 0;
      std::memcpy(&h, d.data(), sizeof h);
      return h;
    }
  };
  struct StringHash {
    using is_transparent = void;
    size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
  };

  std::vector<ApiClient> clients_;
  std::unordered_map<TokenDigest, size_t, DigestHash> by_token_;  // index into clients_
  std::unordered_map<std::string, size_t, StringHash, std::equal_to<>> by_san_;
};

// The largest token file read.
inline constexpr size_t kMaxApiTokensFileBytes = 4 << 20;

// The table `text` describes (`file` names it in errors), or the first thing wrong with it:
// an unknown field, a client with no or both of token_sha256 and san, a digest that is not 64
// hex digits, a name, digest or SAN listed twice, an empty or mixed ("*" with names) domain
// list. No error quotes a value of the file but a client's name (a misplaced token must not
// reach the log).
Result<std::shared_ptr<const ApiTokens>> ParseApiTokens(const std::string& file,
                                                        const std::string& text);

// The file at `path`, read and parsed.
Result<std::shared_ptr<const ApiTokens>> LoadApiTokens(const std::string& path);

}  // namespace sluice::server

#endif  // SLUICE_CONFIG_API_TOKENS_H_
