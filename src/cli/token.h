// `sluice token`: a new caller token for sluiced's --api-tokens file (docs/security.md, "Caller
// identity"), and the line that names it there. The file stores only the token's SHA-256,
// unsalted, which is safe because the token is 256 random bits: nothing shorter or chosen by
// a person should be used as one.
#ifndef SLUICE_CLI_TOKEN_H_
#define SLUICE_CLI_TOKEN_H_

#include <string>

#include "sluice/status.h"

namespace sluice::cli {

struct NewToken {
  std::string token;        // "sluice_" + 43 characters of base64url (32 random bytes)
  std::string sha256_line;  // "token_sha256: <64 lower-case hex digits>"
};

// 32 bytes from OpenSSL's CSPRNG; an error when it cannot give them (never a weaker token).
Result<NewToken> MakeToken();

}  // namespace sluice::cli

#endif  // SLUICE_CLI_TOKEN_H_
