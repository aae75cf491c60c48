// Properties of canonical paths over many generated paths (a seeded generator: a failure
// reproduces), for every combination of the options:
// - the output is a fixed point: canonicalising it again gives it back;
// - it starts with '/', holds no "//", no "." or ".." segment, no escape of an unreserved
//   character and no lower-case escape; with escaped_slashes: decode no %2F, with path_case:
//   lower no upper-case letter outside escapes, with trailing_slash: strip no trailing '/' but
//   the root's, with path_params: strip no ';';
// - respelling the input without changing what it names (an unreserved character escaped, in
//   either case; "./" or "x/../" after a '/'; a '/' doubled) gives the same output.
#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "util/canonical_path.h"

namespace sluice::util {
namespace {

using Opts = PathNormalize;

constexpr uint64_t kSeed = 29;
constexpr int kPathsPerOptions = 2500;

bool IsUnreservedByte(int b) {
  return (b >= 'a' && b <= 'z') || (b >= 'A' && b <= 'Z') || (b >= '0' && b <= '9') || b == '-' ||
         b == '.' || b == '_' || b == '~';
}

// Paths built from the pieces that matter to canonicalisation, bad escapes included.
std::string RandomPath(std::mt19937_64& rng) {
  static const std::vector<std::string> kPieces = {
      "/",   "/",  "/", ".",   "..", "%2e", "%2E",    "%2F", "%2f", "%41", "%7e",      "%3b",
      ";",   ";p", "a", "B",   "~",  "v1",  "Search", "%",   "%zz", " ",   "\xc3\xa9", "%C3",
      "%a9", ":",  "@", "%00", "=",  "%25", "-",      "_",   "x.y", "%5C", "\\"};
  std::string p = "/";
  const size_t n = rng() % 12;
  for (size_t i = 0; i < n; ++i) p += kPieces[rng() % kPieces.size()];
  return p;
}

// A respelling of `p` (valid: every '%' starts a good escape) that names the same path.
std::string Respell(const std::string& p, std::mt19937_64& rng) {
  std::vector<size_t> literals, slashes;
  for (size_t i = 0; i < p.size(); ++i) {
    if (p[i] == '%') {
      i += 2;
    } else if (p[i] == '/') {
      slashes.push_back(i);
    } else if (IsUnreservedByte(static_cast<unsigned char>(p[i]))) {
      literals.push_back(i);
    }
  }
  static constexpr char kHexUpper[] = "0123456789ABCDEF";
  static constexpr char kHexLower[] = "0123456789abcdef";
  const size_t kind = rng() % 4;
  if (kind == 0 && !literals.empty()) {
    const size_t at = literals[rng() % literals.size()];
    const auto b = static_cast<unsigned char>(p[at]);
    const char* hex = rng() % 2 ? kHexUpper : kHexLower;
    return p.substr(0, at) + "%" + hex[b >> 4] + hex[b & 0xf] + p.substr(at + 1);
  }
  const size_t at = slashes[rng() % slashes.size()];  // p starts with '/'
  if (kind == 1) return p.substr(0, at + 1) + "./" + p.substr(at + 1);
  if (kind == 2) return p.substr(0, at + 1) + "zz/../" + p.substr(at + 1);
  return p.substr(0, at) + "/" + p.substr(at);
}

std::vector<Opts> EveryOptions() {
  std::vector<Opts> all;
  for (auto t : {Opts::TrailingSlash::kKeep, Opts::TrailingSlash::kStrip}) {
    for (auto p : {Opts::PathParams::kKeep, Opts::PathParams::kStrip}) {
      for (auto c : {Opts::PathCase::kKeep, Opts::PathCase::kLower}) {
        for (auto e : {Opts::EscapedSlashes::kKeep, Opts::EscapedSlashes::kDecode,
                       Opts::EscapedSlashes::kReject}) {
          all.push_back({t, p, c, e});
        }
      }
    }
  }
  return all;
}

void ExpectCanonicalShape(const std::string& out, const Opts& o, const std::string& in) {
  ASSERT_TRUE(out.starts_with('/')) << in;
  EXPECT_EQ(out.find("//"), std::string::npos) << in << " -> " << out;
  size_t start = 1;
  while (start <= out.size()) {
    size_t end = out.find('/', start);
    if (end == std::string::npos) end = out.size();
    const std::string segment = out.substr(start, end - start);
    EXPECT_NE(segment, ".") << in << " -> " << out;
    EXPECT_NE(segment, "..") << in << " -> " << out;
    start = end + 1;
  }
  for (size_t i = 0; i < out.size(); ++i) {
    const char c = out[i];
    if (c == '%') {
      ASSERT_LE(i + 2, out.size() - 1) << in << " -> " << out;
      const std::string hex = out.substr(i + 1, 2);
      EXPECT_EQ(hex.find_first_not_of("0123456789ABCDEF"), std::string::npos) << out;
      const int b = std::stoi(hex, nullptr, 16);
      EXPECT_FALSE(IsUnreservedByte(b)) << in << " -> " << out << " keeps %" << hex;
      if (o.escaped_slashes != Opts::EscapedSlashes::kKeep) {
        EXPECT_NE(b, '/') << out;
      }
      i += 2;
      continue;
    }
    if (o.path_case == Opts::PathCase::kLower) {
      EXPECT_FALSE(c >= 'A' && c <= 'Z') << out;
    }
    if (o.path_params == Opts::PathParams::kStrip) {
      EXPECT_NE(c, ';') << in << " -> " << out;
    }
  }
  if (o.trailing_slash == Opts::TrailingSlash::kStrip && out != "/") {
    EXPECT_FALSE(out.ends_with('/')) << in << " -> " << out;
  }
}

TEST(CanonicalPathProperty, FixedPointShapeAndRespellings) {
  std::mt19937_64 rng(kSeed);
  size_t accepted = 0;
  size_t refused = 0;
  for (const Opts& o : EveryOptions()) {
    for (int i = 0; i < kPathsPerOptions; ++i) {
      const std::string in = RandomPath(rng);
      const auto out = CanonicalPath(in, o);
      if (!out) {
        ++refused;
        continue;
      }
      ++accepted;
      ExpectCanonicalShape(*out, o, in);
      const auto again = CanonicalPath(*out, o);
      ASSERT_TRUE(again) << *out << ": " << again.error();
      EXPECT_EQ(*again, *out) << "not a fixed point: " << in;
      const std::string respelt = Respell(in, rng);
      const auto same = CanonicalPath(respelt, o);
      ASSERT_TRUE(same) << respelt << ": " << same.error();
      EXPECT_EQ(*same, *out) << in << " respelt as " << respelt;
      if (HasFailure()) return;  // one reported input, not thousands
    }
  }
  // The generator reaches both outcomes often: the properties were checked on many paths.
  EXPECT_GT(accepted, 10'000u);
  EXPECT_GT(refused, 1'000u);
}

}  // namespace
}  // namespace sluice::util
