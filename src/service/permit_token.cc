#include "service/permit_token.h"

#include <sys/random.h>

#include <array>
#include <cerrno>
#include <cstdint>

#include "util/hex.h"

namespace sluice::server {
namespace {

constexpr uint8_t kVersion = 1;
constexpr char kAlphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

std::string Base64Url(const std::string& in) {
  std::string out;
  out.reserve((in.size() + 2) / 3 * 4);
  for (size_t i = 0; i < in.size(); i += 3) {
    const size_t n = std::min<size_t>(3, in.size() - i);
    uint32_t v = 0;
    for (size_t k = 0; k < 3; ++k) {
      v = v << 8 | (k < n ? static_cast<uint8_t>(in[i + k]) : 0);
    }
    for (size_t k = 0; k < n + 1; ++k) out += kAlphabet[(v >> (18 - 6 * k)) & 63];
  }
  return out;
}

// Each byte's value in kAlphabet, -1 for a byte outside it: one load per character of a permit
// rather than a chain of range tests (DecodePermit runs on every release and renew).
constexpr std::array<int8_t, 256> kSextets = [] {
  std::array<int8_t, 256> table{};
  table.fill(-1);
  for (int i = 0; i < 64; ++i) table[static_cast<uint8_t>(kAlphabet[i])] = static_cast<int8_t>(i);
  return table;
}();

// Strict: no padding, and the unused low bits of a last partial group must be zero (so one
// permit has exactly one text).
Result<std::string> FromBase64Url(std::string_view in) {
  if (in.size() % 4 == 1) return MakeError("permit: not base64url");
  std::string out(in.size() / 4 * 3 + (in.size() % 4 == 0 ? 0 : in.size() % 4 - 1), '\0');
  size_t o = 0;
  for (size_t i = 0; i < in.size(); i += 4) {
    const size_t n = std::min<size_t>(4, in.size() - i);
    uint32_t v = 0;
    for (size_t k = 0; k < 4; ++k) {
      const int s = k < n ? kSextets[static_cast<uint8_t>(in[i + k])] : 0;
      if (s < 0) return MakeError("permit: not base64url");
      v = v << 6 | static_cast<uint32_t>(s);
    }
    const size_t bytes = n - 1;
    if (bytes < 3 && (v & ((1u << (8 * (3 - bytes))) - 1)) != 0) {
      return MakeError("permit: not base64url");
    }
    for (size_t k = 0; k < bytes; ++k) out[o++] = static_cast<char>((v >> (16 - 8 * k)) & 0xff);
  }
  return out;
}

}  // namespace

std::string PermitToken::Id() const {
  std::string out;
  out.reserve(2 * random.size());
  for (const uint8_t b : random) util::AppendHexByte(out, b, util::HexCase::kLower);
  return out;
}

std::string EncodePermit(const PermitToken& token) {
  std::string raw;
  raw += static_cast<char>(kVersion);
  raw.append(reinterpret_cast<const char*>(token.random.data()), token.random.size());
  raw += static_cast<char>(token.keys.size());
  for (const std::string& key : token.keys) {
    raw += static_cast<char>(key.size() >> 8);
    raw += static_cast<char>(key.size() & 0xff);
    raw += key;
  }
  return Base64Url(raw);
}

Result<PermitToken> DecodePermit(std::string_view text) {
  if (text.empty()) return MakeError("permit: must not be empty");
  if (text.size() > kMaxPermitBytes) {
    return MakeError("permit: longer than any permit (" + std::to_string(kMaxPermitBytes) +
                     " bytes)");
  }
  auto raw = FromBase64Url(text);
  if (!raw) return std::unexpected(raw.error());
  const std::string& r = *raw;
  PermitToken token;
  if (r.size() < 18 || static_cast<uint8_t>(r[0]) != kVersion) {
    return MakeError("permit: not a permit of this server");
  }
  for (size_t i = 0; i < token.random.size(); ++i) token.random[i] = static_cast<uint8_t>(r[1 + i]);
  const size_t count = static_cast<uint8_t>(r[17]);
  if (count > kMaxPermitSlots) return MakeError("permit: too many slots");
  // An acquire that takes no slot answers no permit.
  if (count == 0) return MakeError("permit: not a permit of this server");
  size_t at = 18;
  token.keys.reserve(count);
  for (size_t i = 0; i < count; ++i) {
    if (r.size() - at < 2) return MakeError("permit: truncated");
    const size_t len =
        static_cast<size_t>(static_cast<uint8_t>(r[at])) << 8 | static_cast<uint8_t>(r[at + 1]);
    at += 2;
    if (len == 0 || len > kMaxPermitKeyBytes || r.size() - at < len) {
      return MakeError("permit: truncated");
    }
    std::string key = r.substr(at, len);
    at += len;
    const size_t hash = key.find('#');
    if (hash == std::string::npos || hash == 0)
      return MakeError("permit: not a permit of this server");
    token.keys.push_back(std::move(key));
  }
  if (at != r.size()) return MakeError("permit: trailing bytes");
  return token;
}

std::string_view PoolIdOf(std::string_view key) { return key.substr(0, key.find('#')); }

Result<std::array<uint8_t, 16>> PermitIds::Next() const {
  std::array<uint8_t, 16> out{};
  size_t got = 0;
  while (got < out.size()) {
    const ssize_t n = getrandom(out.data() + got, out.size() - got, 0);
    if (n < 0) {
      if (errno == EINTR) continue;
      return MakeError("the kernel's random source failed (getrandom)");
    }
    got += static_cast<size_t>(n);
  }
  return out;
}

}  // namespace sluice::server
