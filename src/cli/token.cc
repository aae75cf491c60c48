#include "cli/token.h"

#include <openssl/rand.h>
#include <openssl/sha.h>

#include <array>

#include "util/hex.h"

namespace sluice::cli {
namespace {

// RFC 4648 section 5, without padding: the characters a Bearer token68 (RFC 6750), an HTTP
// header value, gRPC metadata and a shell word all take as they are.
std::string Base64Url(const unsigned char* bytes, size_t size) {
  static constexpr char kAlphabet[] =
      "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
  std::string out;
  uint32_t bits = 0;
  int held = 0;
  for (size_t i = 0; i < size; ++i) {
    bits = bits << 8 | bytes[i];
    held += 8;
    while (held >= 6) {
      held -= 6;
      out += kAlphabet[(bits >> held) & 0x3F];
    }
  }
  if (held > 0) out += kAlphabet[(bits << (6 - held)) & 0x3F];
  return out;
}

}  // namespace

Result<NewToken> MakeToken() {
  std::array<unsigned char, 32> random{};
  if (RAND_bytes(random.data(), static_cast<int>(random.size())) != 1) {
    return MakeError("the system's random source gave no bytes (OpenSSL RAND_bytes failed)");
  }
  NewToken made;
  // The prefix makes a leaked token recognisable (secret scanners, a grep of a log).
  made.token = "sluice_" + Base64Url(random.data(), random.size());
  std::array<unsigned char, SHA256_DIGEST_LENGTH> digest{};
  SHA256(reinterpret_cast<const unsigned char*>(made.token.data()), made.token.size(),
         digest.data());
  made.sha256_line = "token_sha256: ";
  for (unsigned char b : digest) util::AppendHexByte(made.sha256_line, b);
  return made;
}

}  // namespace sluice::cli
