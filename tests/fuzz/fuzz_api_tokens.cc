// Fuzz target: the --api-tokens file reader (config/api_tokens.h), on the file's text as sluiced
// reads it. Checks, besides "no crash, no UB, no exception":
// - reading is deterministic (the same text gives the same table or the same error);
// - an error names the file;
// - a loaded table holds only what the reader promises: every client named, no name twice,
//   each with one credential (tokens + SANs = clients), domains either ["*"] or a non-empty
//   list without "*", each of which the client may check;
// - with that table, no credential is kMissing, a token no digest in the input could name is
//   kUnknown, and a client listed by SAN is let in exactly for its domains.
#include <cstddef>
#include <cstdint>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "config/api_tokens.h"
#include "fuzz_check.h"
#include "service/caller_auth.h"

namespace {

using sluice::server::ApiClient;
using sluice::server::ApiTokens;
using sluice::server::AuthFailure;
using sluice::server::CallerCredentials;

constexpr char kFile[] = "fuzz-tokens.yaml";

void CheckLoaded(const ApiTokens& table) {
  FUZZ_CHECK(!table.clients().empty());
  FUZZ_CHECK(table.tokens() + table.sans() == table.clients().size());
  std::set<std::string> names;
  for (const ApiClient& c : table.clients()) {
    FUZZ_CHECK(!c.name.empty());
    FUZZ_CHECK(names.insert(c.name).second);
    FUZZ_CHECK(c.all_domains != !c.domains.empty());
    for (const std::string& d : c.domains) {
      FUZZ_CHECK(d != "*" && !d.empty());
      FUZZ_CHECK(c.MayCheck(d));
    }
  }
  FUZZ_CHECK(Authorize(table, CallerCredentials{}, "d") == std::unexpected(AuthFailure::kMissing));
  // No input holds a preimage of a digest it lists: a fixed token names no client.
  FUZZ_CHECK(Authorize(table, CallerCredentials{.bearer_token = "fuzz", .verified_sans = {}},
                       "d") == std::unexpected(AuthFailure::kUnknown));
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* bytes, size_t size) {
  const std::string text(reinterpret_cast<const char*>(bytes), size);
  const auto table = sluice::server::ParseApiTokens(kFile, text);
  const auto again = sluice::server::ParseApiTokens(kFile, text);
  FUZZ_CHECK(table.has_value() == again.has_value());
  if (!table) {
    FUZZ_CHECK(table.error().message == again.error().message);
    FUZZ_CHECK(table.error().message.rfind(kFile, 0) == 0);
    return 0;
  }
  FUZZ_CHECK((*table)->clients().size() == (*again)->clients().size());
  CheckLoaded(**table);
  for (const ApiClient& c : (*table)->clients()) {
    if (c.san.empty()) continue;
    FUZZ_CHECK((*table)->FindSan(c.san) == &c);
    const std::string sans[] = {c.san};
    const CallerCredentials credentials{.bearer_token = std::nullopt, .verified_sans = sans};
    for (const std::string& d : c.domains) {
      FUZZ_CHECK(Authorize(**table, credentials, d) == std::string_view(c.name));
    }
    // A domain longer than any it lists is none of them.
    std::string unlisted = "d";
    for (const std::string& d : c.domains) unlisted += d;
    const auto outside = Authorize(**table, credentials, unlisted);
    FUZZ_CHECK(c.all_domains ? outside == std::string_view(c.name)
                             : outside == std::unexpected(AuthFailure::kDomain));
  }
  return 0;
}
