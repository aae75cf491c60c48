// Utf8SequenceLength, IsValidUtf8 and AppendUtf8, checked against Table 3-7 of the Unicode
// standard (written out below as data) and nlohmann::json as independent oracles.
#include "util/utf8.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include "utf8_test_util.h"

namespace sluice::util {
namespace {

using namespace std::string_literals;
using test_support::Encode;
using test_support::Hex;
using test_support::Table37Length;

// The oracle for UTF-8 validity: nlohmann's lexer rejects ill-formed UTF-8 inside strings
// (Unicode Table 3-7). Only meaningful for bytes that need no JSON escaping.
bool OracleValidUtf8(const std::string& s) {
  for (unsigned char c : s) {
    if (c < 0x20 || c == '"' || c == '\\') ADD_FAILURE() << "oracle given a byte needing escaping";
  }
  return nlohmann::json::accept("\"" + s + "\"");
}

// ---- IsValidUtf8: the CLI's tests, from tests/cli/json_text_test.cc ----

TEST(JsonUtf8Test, AcceptsValidSequences) {
  EXPECT_TRUE(IsValidUtf8(""));
  EXPECT_TRUE(IsValidUtf8("plain ascii"));
  EXPECT_TRUE(IsValidUtf8("\0"s));
  EXPECT_TRUE(IsValidUtf8("\x7f"));
  EXPECT_TRUE(IsValidUtf8("\xc2\x80"));
  EXPECT_TRUE(IsValidUtf8("\xdf\xbf"));
  EXPECT_TRUE(IsValidUtf8("\xe0\xa0\x80"));
  EXPECT_TRUE(IsValidUtf8("\xed\x9f\xbf"));  // U+D7FF
  EXPECT_TRUE(IsValidUtf8("\xee\x80\x80"));  // U+E000
  EXPECT_TRUE(IsValidUtf8("\xef\xbf\xbf"));  // U+FFFF (a noncharacter, but well-formed)
  EXPECT_TRUE(IsValidUtf8("\xf0\x90\x80\x80"));
  EXPECT_TRUE(IsValidUtf8("\xf4\x8f\xbf\xbf"));  // U+10FFFF
  EXPECT_TRUE(IsValidUtf8("caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80!"));
}

TEST(JsonUtf8Test, AcceptsEveryScalarValue) {
  for (uint32_t cp = 0; cp <= 0x10ffff; ++cp) {
    if (cp >= 0xd800 && cp <= 0xdfff) continue;
    if (!IsValidUtf8(Encode(cp))) {
      ADD_FAILURE() << "rejected U+" << std::hex << cp;
      return;
    }
  }
}

TEST(JsonUtf8Test, RejectsOverlongs) {
  EXPECT_FALSE(IsValidUtf8("\xc0\x80"));          // NUL in 2 bytes
  EXPECT_FALSE(IsValidUtf8("\xc0\xaf"));          // '/' in 2 bytes
  EXPECT_FALSE(IsValidUtf8("\xc1\xbf"));          // U+007F in 2 bytes
  EXPECT_FALSE(IsValidUtf8("\xe0\x80\x80"));      // NUL in 3 bytes
  EXPECT_FALSE(IsValidUtf8("\xe0\x9f\xbf"));      // U+07FF in 3 bytes
  EXPECT_FALSE(IsValidUtf8("\xf0\x80\x80\x80"));  // NUL in 4 bytes
  EXPECT_FALSE(IsValidUtf8("\xf0\x8f\xbf\xbf"));  // U+FFFF in 4 bytes
  EXPECT_FALSE(IsValidUtf8("ok\xc0\x80ok"));
}

TEST(JsonUtf8Test, RejectsSurrogates) {
  EXPECT_FALSE(IsValidUtf8("\xed\xa0\x80"));              // U+D800
  EXPECT_FALSE(IsValidUtf8("\xed\xaf\xbf"));              // U+DBFF
  EXPECT_FALSE(IsValidUtf8("\xed\xb0\x80"));              // U+DC00
  EXPECT_FALSE(IsValidUtf8("\xed\xbf\xbf"));              // U+DFFF
  EXPECT_FALSE(IsValidUtf8("\xed\xa0\xbd\xed\xb8\x80"));  // a CESU-8 surrogate pair
  for (uint32_t cp = 0xd800; cp <= 0xdfff; ++cp) {
    if (IsValidUtf8(Encode(cp))) {
      ADD_FAILURE() << "accepted surrogate U+" << std::hex << cp;
      return;
    }
  }
}

TEST(JsonUtf8Test, RejectsBeyondU10FFFF) {
  EXPECT_FALSE(IsValidUtf8("\xf4\x90\x80\x80"));  // U+110000
  EXPECT_FALSE(IsValidUtf8("\xf7\xbf\xbf\xbf"));  // U+1FFFFF
  EXPECT_FALSE(IsValidUtf8("\xf5\x80\x80\x80"));
  EXPECT_FALSE(IsValidUtf8("\xf8\x88\x80\x80\x80"));      // old 5-byte form
  EXPECT_FALSE(IsValidUtf8("\xfc\x84\x80\x80\x80\x80"));  // old 6-byte form
  EXPECT_FALSE(IsValidUtf8("\xfe"));
  EXPECT_FALSE(IsValidUtf8("\xff"));
}

TEST(JsonUtf8Test, RejectsTruncatedSequences) {
  EXPECT_FALSE(IsValidUtf8("\xc3"));
  EXPECT_FALSE(IsValidUtf8("\xe2\x82"));
  EXPECT_FALSE(IsValidUtf8("\xe2"));
  EXPECT_FALSE(IsValidUtf8("\xf0\x9f\x98"));
  EXPECT_FALSE(IsValidUtf8("\xf0\x9f"));
  EXPECT_FALSE(IsValidUtf8("\xf0"));
  EXPECT_FALSE(IsValidUtf8("abc\xe2\x82"));           // truncated at the end
  EXPECT_FALSE(IsValidUtf8("\xe2\x82x"));             // interrupted by ASCII
  EXPECT_FALSE(IsValidUtf8("\xf0\x9f\x98\xc3\xa9"));  // interrupted by a lead byte
  // Every proper prefix of a valid 4-byte sequence is invalid.
  const std::string emoji = "\xf0\x9f\x98\x80";
  for (size_t n = 1; n < emoji.size(); ++n) {
    EXPECT_FALSE(IsValidUtf8(emoji.substr(0, n))) << n;
    EXPECT_FALSE(IsValidUtf8("a" + emoji.substr(0, n) + "b")) << n;
  }
}

TEST(JsonUtf8Test, LooksOnlyInsideTheView) {
  // The bytes completing a sequence lie just past the view's end: they must not be read.
  const std::string buf = "a\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80";
  EXPECT_TRUE(IsValidUtf8(std::string_view(buf)));
  EXPECT_FALSE(IsValidUtf8(std::string_view(buf).substr(0, 2)));  // "a" + C3
  EXPECT_FALSE(IsValidUtf8(std::string_view(buf).substr(1, 4)));  // C3 A9 E2 82
  EXPECT_FALSE(IsValidUtf8(std::string_view(buf).substr(3, 5)));  // E2 82 AC F0 9F
  EXPECT_FALSE(IsValidUtf8(std::string_view(buf).substr(6, 3)));  // F0 9F 98
  EXPECT_TRUE(IsValidUtf8(std::string_view(buf).substr(1, 5)));   // C3 A9 E2 82 AC
}

TEST(JsonUtf8Test, RejectsStrayContinuationBytes) {
  EXPECT_FALSE(IsValidUtf8("\x80"));
  EXPECT_FALSE(IsValidUtf8("\xbf"));
  EXPECT_FALSE(IsValidUtf8("a\x80"));
  EXPECT_FALSE(IsValidUtf8("\xc3\xa9\xa9"));  // one continuation too many
  EXPECT_FALSE(IsValidUtf8("\xe2\x82\xac\x80"));
  for (int c = 0x80; c <= 0xbf; ++c) {
    EXPECT_FALSE(IsValidUtf8(std::string(1, static_cast<char>(c)))) << c;
  }
}

// Exhaustive over every two-byte string of non-ASCII bytes and over three-byte strings with a
// 0xE0..0xEF lead, and a sweep of four-byte leads: agreement with the oracle.
TEST(JsonUtf8Test, AgreesWithOracleOnShortByteStrings) {
  int disagreements = 0;
  auto check = [&](const std::string& s) {
    const bool got = IsValidUtf8(s);
    const bool want = OracleValidUtf8(s);
    if (got != want && ++disagreements <= 10) {
      ADD_FAILURE() << Hex(s) << ": IsValidUtf8=" << got << " oracle=" << want;
    }
  };
  for (int a = 0x80; a <= 0xff; ++a) {
    check(std::string{static_cast<char>(a)});
    for (int b = 0x20; b <= 0xff; ++b) {
      if (b == '"' || b == '\\') continue;
      check(std::string{static_cast<char>(a), static_cast<char>(b)});
    }
  }
  for (int a = 0xe0; a <= 0xef; ++a) {
    for (int b = 0x7f; b <= 0xc0; ++b) {
      for (int c = 0x7f; c <= 0xc0; ++c) {
        check(std::string{static_cast<char>(a), static_cast<char>(b), static_cast<char>(c)});
      }
    }
  }
  for (int a = 0xf0; a <= 0xff; ++a) {
    for (int b = 0x7f; b <= 0xc0; ++b) {
      check(std::string{static_cast<char>(a), static_cast<char>(b), '\x80', '\x80'});
      check(std::string{static_cast<char>(a), static_cast<char>(b), '\xbf', '\xbf'});
    }
  }
  EXPECT_EQ(disagreements, 0);
}

TEST(JsonUtf8Test, AgreesWithOracleOnRandomByteStrings) {
  // Biased towards the bytes where UTF-8 decoding has edges.
  const std::vector<unsigned char> interesting = {
      'a',  0x7f, 0x80, 0x8f, 0x90, 0x9f, 0xa0, 0xbf, 0xc0, 0xc1, 0xc2, 0xdf, 0xe0, 0xe1, 0xec,
      0xed, 0xee, 0xef, 0xf0, 0xf1, 0xf3, 0xf4, 0xf5, 0xf7, 0xf8, 0xfb, 0xfc, 0xfe, 0xff};
  std::mt19937 rng(7);
  std::uniform_int_distribution<size_t> pick(0, interesting.size() - 1);
  std::uniform_int_distribution<int> len(1, 12);
  int disagreements = 0;
  for (int iter = 0; iter < 200000; ++iter) {
    std::string s;
    const int n = len(rng);
    for (int i = 0; i < n; ++i) s += static_cast<char>(interesting[pick(rng)]);
    const bool got = IsValidUtf8(s);
    const bool want = OracleValidUtf8(s);
    if (got != want && ++disagreements <= 10) {
      ADD_FAILURE() << Hex(s) << ": IsValidUtf8=" << got << " oracle=" << want;
    }
  }
  EXPECT_EQ(disagreements, 0);
}

// ---- Utf8SequenceLength against Table 3-7 ----

std::string Bytes(std::initializer_list<int> bytes) {
  std::string s;
  for (int b : bytes) s += static_cast<char>(b);
  return s;
}

TEST(Utf8SequenceLength, Table37Boundaries) {
  struct Case {
    std::string bytes;
    size_t length;  // of the sequence at the start, 0 if none
  };
  const std::vector<Case> cases = {
      {Bytes({0x00}), 1},
      {Bytes({0x7F}), 1},
      {Bytes({0x80}), 0},  // a continuation byte alone
      {Bytes({0xBF}), 0},
      {Bytes({0xC0, 0x80}), 0},  // overlong: C0 and C1 start nothing
      {Bytes({0xC1, 0xBF}), 0},
      {Bytes({0xC2, 0x80}), 2},  // U+0080
      {Bytes({0xC2, 0x7F}), 0},
      {Bytes({0xC2, 0xC0}), 0},
      {Bytes({0xDF, 0xBF}), 2},        // U+07FF
      {Bytes({0xE0, 0x80, 0x80}), 0},  // overlong
      {Bytes({0xE0, 0x9F, 0xBF}), 0},  // overlong U+07FF
      {Bytes({0xE0, 0xA0, 0x80}), 3},  // U+0800
      {Bytes({0xE1, 0x80, 0x80}), 3},  // U+1000
      {Bytes({0xEC, 0xBF, 0xBF}), 3},  // U+CFFF
      {Bytes({0xED, 0x80, 0x80}), 3},  // U+D000
      {Bytes({0xED, 0x9F, 0xBF}), 3},  // U+D7FF
      {Bytes({0xED, 0xA0, 0x80}), 0},  // U+D800, a surrogate
      {Bytes({0xED, 0xBF, 0xBF}), 0},  // U+DFFF
      {Bytes({0xEE, 0x80, 0x80}), 3},  // U+E000
      {Bytes({0xEF, 0xBF, 0xBF}), 3},  // U+FFFF
      {Bytes({0xEF, 0xBF, 0xC0}), 0},
      {Bytes({0xF0, 0x80, 0x80, 0x80}), 0},  // overlong
      {Bytes({0xF0, 0x8F, 0xBF, 0xBF}), 0},  // overlong U+FFFF
      {Bytes({0xF0, 0x90, 0x80, 0x80}), 4},  // U+10000
      {Bytes({0xF1, 0x80, 0x80, 0x80}), 4},  // U+40000
      {Bytes({0xF3, 0xBF, 0xBF, 0xBF}), 4},  // U+FFFFF
      {Bytes({0xF4, 0x80, 0x80, 0x80}), 4},  // U+100000
      {Bytes({0xF4, 0x8F, 0xBF, 0xBF}), 4},  // U+10FFFF
      {Bytes({0xF4, 0x90, 0x80, 0x80}), 0},  // U+110000
      {Bytes({0xF5, 0x80, 0x80, 0x80}), 0},
      {Bytes({0xF8, 0x88, 0x80, 0x80, 0x80}), 0},
      {Bytes({0xFF}), 0},
      // Cut short, by the end or by a byte that is no continuation.
      {Bytes({0xC2}), 0},
      {Bytes({0xE0, 0xA0}), 0},
      {Bytes({0xE1, 0x80, 0x41}), 0},
      {Bytes({0xF0, 0x90, 0x80}), 0},
      {Bytes({0xF4, 0x80, 0x80, 0x7F}), 0},
      // Only the first sequence counts.
      {Bytes({0xC2, 0x80, 0xC2, 0x80}), 2},
      {Bytes({0x41, 0xFF}), 1},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(Hex(c.bytes));
    EXPECT_EQ(Table37Length(c.bytes), c.length);  // the oracle agrees with the cases
    EXPECT_EQ(Utf8SequenceLength(c.bytes, 0), c.length);
    if (c.length == 0) {
      EXPECT_FALSE(IsValidUtf8(c.bytes));
    } else if (c.length == c.bytes.size()) {
      EXPECT_TRUE(IsValidUtf8(c.bytes));
    }
  }
}

// Every string of one, two and three bytes (all 16.8 million), and every four-byte string whose
// later bytes sit at the edges of the continuation range: the length agrees with Table 3-7.
TEST(Utf8SequenceLength, AgreesWithTable37OnEveryShortString) {
  int disagreements = 0;
  auto check = [&](const std::string& s) {
    const size_t got = Utf8SequenceLength(s, 0);
    const size_t want = Table37Length(s);
    if (got != want && ++disagreements <= 10) {
      ADD_FAILURE() << Hex(s) << ": Utf8SequenceLength=" << got << " Table 3-7=" << want;
    }
  };
  std::string s;
  for (int a = 0; a < 256; ++a) {
    check(Bytes({a}));
    for (int b = 0; b < 256; ++b) {
      check(Bytes({a, b}));
      s = Bytes({a, b, 0});
      for (int c = 0; c < 256; ++c) {
        s[2] = static_cast<char>(c);
        check(s);
      }
    }
  }
  const std::vector<int> edges = {0x00, 0x7F, 0x80, 0x8F, 0x90, 0x9F, 0xA0, 0xBF, 0xC0, 0xFF};
  for (int a = 0xC0; a < 256; ++a) {
    for (int b = 0; b < 256; ++b) {
      for (int c : edges) {
        for (int d : edges) check(Bytes({a, b, c, d}));
      }
    }
  }
  EXPECT_EQ(disagreements, 0);
}

TEST(Utf8SequenceLength, StartsAtTheOffsetAndStopsAtTheViewsEnd) {
  const std::string buf = "a\xC3\xA9\xE2\x82\xAC\xF0\x9F\x98\x80";
  const std::string_view view(buf);
  EXPECT_EQ(Utf8SequenceLength(view, 0), 1u);
  EXPECT_EQ(Utf8SequenceLength(view, 1), 2u);
  EXPECT_EQ(Utf8SequenceLength(view, 2), 0u);  // inside a sequence
  EXPECT_EQ(Utf8SequenceLength(view, 3), 3u);
  EXPECT_EQ(Utf8SequenceLength(view, 6), 4u);
  // The bytes completing a sequence lie past the view's end: not read, not counted.
  EXPECT_EQ(Utf8SequenceLength(view.substr(0, 2), 1), 0u);
  EXPECT_EQ(Utf8SequenceLength(view.substr(0, 5), 3), 0u);
  EXPECT_EQ(Utf8SequenceLength(view.substr(0, 9), 6), 0u);
}

// ---- AppendUtf8 ----

TEST(AppendUtf8, EncodesEveryScalarValueAsTheStandardDoes) {
  for (uint32_t cp = 0; cp <= 0x10FFFF; ++cp) {
    if (cp >= 0xD800 && cp <= 0xDFFF) continue;
    std::string out = "x";
    AppendUtf8(out, static_cast<char32_t>(cp));
    const std::string want = "x" + Encode(cp);
    if (out != want || Table37Length(std::string_view(out).substr(1)) != out.size() - 1) {
      ADD_FAILURE() << "U+" << std::hex << cp << ": " << Hex(out);
      return;
    }
  }
}

// nlohmann::json decodes \u escapes (surrogate pairs for the supplementary planes) to UTF-8.
TEST(AppendUtf8, AgreesWithNlohmannDecodingEscapes) {
  auto escape = [](uint32_t unit) {
    static constexpr char kHex[] = "0123456789abcdef";
    std::string e = "\\u";
    for (int shift = 12; shift >= 0; shift -= 4) e += kHex[(unit >> shift) & 0xF];
    return e;
  };
  std::vector<uint32_t> cps = {0x0,    0x7F,   0x80,    0x7FF,   0x800,   0xD7FF,   0xE000,
                               0xFFFD, 0xFFFF, 0x10000, 0x1F600, 0xFFFFF, 0x100000, 0x10FFFF};
  for (uint32_t cp = 0; cp < 0x10FFFF; cp += 97) cps.push_back(cp);
  for (uint32_t cp : cps) {
    if (cp >= 0xD800 && cp <= 0xDFFF) continue;
    std::string json = "\"";
    if (cp < 0x10000) {
      json += escape(cp);
    } else {
      json += escape(0xD800 + ((cp - 0x10000) >> 10));
      json += escape(0xDC00 + ((cp - 0x10000) & 0x3FF));
    }
    json += '"';
    std::string out;
    AppendUtf8(out, static_cast<char32_t>(cp));
    ASSERT_EQ(out, nlohmann::json::parse(json).get<std::string>()) << "U+" << std::hex << cp;
  }
}
}  // namespace
}  // namespace sluice::util
