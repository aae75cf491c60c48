// AppendJsonString and IsValidUtf8, checked against nlohmann::json as an independent oracle.
#include "cli/json_text.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <string_view>
#include <vector>

namespace sluice::cli {
namespace {

using namespace std::string_literals;

std::string Quoted(std::string_view s) {
  std::string out;
  AppendJsonString(out, s);
  return out;
}

// Parses `text` as one JSON value that must be a string, and returns it.
std::string ParseJsonString(const std::string& text) {
  const nlohmann::json j = nlohmann::json::parse(text);  // throws on invalid JSON
  EXPECT_TRUE(j.is_string()) << text;
  return j.get<std::string>();
}

void ExpectRoundTrip(std::string_view s) {
  const std::string text = Quoted(s);
  ASSERT_GE(text.size(), 2u);
  EXPECT_EQ(text.front(), '"');
  EXPECT_EQ(text.back(), '"');
  std::string back;
  ASSERT_NO_THROW(back = ParseJsonString(text)) << "not valid JSON: " << text;
  EXPECT_EQ(back, std::string(s)) << text;
}

// UTF-8 encoding of one code point (no validation; callers pass scalar values).
std::string Encode(uint32_t cp) {
  std::string out;
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xc0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3f));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xe0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3f));
    out += static_cast<char>(0x80 | (cp & 0x3f));
  } else {
    out += static_cast<char>(0xf0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3f));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3f));
    out += static_cast<char>(0x80 | (cp & 0x3f));
  }
  return out;
}

// The oracle for UTF-8 validity: nlohmann's lexer rejects ill-formed UTF-8 inside strings
// (Unicode Table 3-7). Only meaningful for bytes that need no JSON escaping.
bool OracleValidUtf8(const std::string& s) {
  for (unsigned char c : s) {
    if (c < 0x20 || c == '"' || c == '\\') ADD_FAILURE() << "oracle given a byte needing escaping";
  }
  return nlohmann::json::accept("\"" + s + "\"");
}

std::string Hex(std::string_view s) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out;
  for (unsigned char c : s) {
    if (!out.empty()) out += ' ';
    out += kHex[c >> 4];
    out += kHex[c & 0xf];
  }
  return out;
}

// ---- AppendJsonString ----

TEST(JsonTextTest, PlainAsciiIsQuotedVerbatim) {
  EXPECT_EQ(Quoted(""), "\"\"");
  EXPECT_EQ(Quoted("abc"), "\"abc\"");
  EXPECT_EQ(Quoted("user:42 /api/v1?x=1"), "\"user:42 /api/v1?x=1\"");
  ExpectRoundTrip("");
  ExpectRoundTrip("abc");
}

TEST(JsonTextTest, AppendsWithoutClobberingExistingContent) {
  std::string out = "{\"key\":";
  AppendJsonString(out, "a\"b");
  out += "}";
  EXPECT_EQ(out, "{\"key\":\"a\\\"b\"}");
  EXPECT_EQ(nlohmann::json::parse(out).at("key").get<std::string>(), "a\"b");
}

TEST(JsonTextTest, QuotesAndBackslashes) {
  EXPECT_EQ(Quoted("\""), R"("\"")");
  EXPECT_EQ(Quoted("\\"), R"("\\")");
  ExpectRoundTrip("\"");
  ExpectRoundTrip("\\");
  ExpectRoundTrip("\"\"\"");
  ExpectRoundTrip("\\\\\\");
  ExpectRoundTrip("a\\\"b");
  ExpectRoundTrip("\\u0041");  // must stay six literal characters, not become "A"
  ExpectRoundTrip("ends with backslash\\");
  ExpectRoundTrip("\"starts and ends with quotes\"");
}

TEST(JsonTextTest, EveryControlCharacterRoundTrips) {
  for (int c = 0x00; c <= 0x1f; ++c) {
    SCOPED_TRACE(c);
    const std::string alone(1, static_cast<char>(c));
    ExpectRoundTrip(alone);
    ExpectRoundTrip("x" + alone + "y");
    ExpectRoundTrip(alone + alone);
    // No raw control byte may survive into the JSON text.
    for (unsigned char b : Quoted("x" + alone + "y")) EXPECT_GE(b, 0x20);
  }
}

TEST(JsonTextTest, ShortEscapesAreUsedWhereJsonHasThem) {
  EXPECT_EQ(Quoted("\n"), R"("\n")");
  EXPECT_EQ(Quoted("\r"), R"("\r")");
  EXPECT_EQ(Quoted("\t"), R"("\t")");
  EXPECT_EQ(Quoted("\b"), R"("\b")");
  EXPECT_EQ(Quoted("\f"), R"("\f")");
  EXPECT_EQ(Quoted("\x01"s), R"("\u0001")");
  EXPECT_EQ(Quoted("\x1f"s), R"("\u001f")");
  EXPECT_EQ(Quoted("\0"s), R"("\u0000")");
}

TEST(JsonTextTest, EmbeddedNulIsNotATerminator) {
  const std::string s = "a\0b\0"s;
  ASSERT_EQ(s.size(), 4u);
  ExpectRoundTrip(s);
}

TEST(JsonTextTest, AllAsciiInOneString) {
  std::string s;
  for (int c = 0; c < 0x80; ++c) s += static_cast<char>(c);
  ExpectRoundTrip(s);
}

TEST(JsonTextTest, MultiByteUtf8PassesThrough) {
  const std::vector<std::string> samples = {
      "\xc3\xa9",                  // U+00E9
      "\xc2\x80",                  // U+0080, smallest 2-byte
      "\xdf\xbf",                  // U+07FF, largest 2-byte
      "\xe0\xa0\x80",              // U+0800, smallest 3-byte
      "\xe2\x82\xac",              // U+20AC euro
      "\xed\x9f\xbf",              // U+D7FF, just below the surrogates
      "\xee\x80\x80",              // U+E000, just above the surrogates
      "\xef\xbf\xbf",              // U+FFFF
      "\xf0\x90\x80\x80",          // U+10000, smallest 4-byte
      "\xf0\x9f\x98\x80",          // U+1F600 emoji
      "\xf4\x8f\xbf\xbf",          // U+10FFFF, the last code point
      "\xe6\x97\xa5\xe6\x9c\xac",  // two CJK characters
      "caf\xc3\xa9 \"\xe2\x82\xac\" \\ \n\xf0\x9f\x98\x80",
  };
  for (const std::string& s : samples) {
    SCOPED_TRACE(Hex(s));
    ExpectRoundTrip(s);
    // Non-ASCII bytes are copied, not escaped: the text is the input plus two quotes.
    if (s.find_first_of("\"\\\n") == std::string::npos) {
      EXPECT_EQ(Quoted(s), "\"" + s + "\"");
    }
  }
}

TEST(JsonTextTest, RandomValidStringsRoundTrip) {
  std::mt19937 rng(20240611);
  std::uniform_int_distribution<int> kind(0, 5);
  for (int iter = 0; iter < 3000; ++iter) {
    std::string s;
    const int n = std::uniform_int_distribution<int>(0, 24)(rng);
    for (int i = 0; i < n; ++i) {
      uint32_t cp = 0;
      switch (kind(rng)) {
        case 0:
          cp = std::uniform_int_distribution<uint32_t>(0x00, 0x1f)(rng);
          break;
        case 1:
          cp = std::uniform_int_distribution<int>(0, 1)(rng) ? '"' : '\\';
          break;
        case 2:
          cp = std::uniform_int_distribution<uint32_t>(0x20, 0x7f)(rng);
          break;
        case 3:
          cp = std::uniform_int_distribution<uint32_t>(0x80, 0x7ff)(rng);
          break;
        case 4:
          do {
            cp = std::uniform_int_distribution<uint32_t>(0x800, 0xffff)(rng);
          } while (cp >= 0xd800 && cp <= 0xdfff);
          break;
        default:
          cp = std::uniform_int_distribution<uint32_t>(0x10000, 0x10ffff)(rng);
          break;
      }
      s += Encode(cp);
    }
    ASSERT_TRUE(IsValidUtf8(s)) << Hex(s);
    ExpectRoundTrip(s);
    if (HasFailure()) {
      ADD_FAILURE() << "first failing input: " << Hex(s);
      return;
    }
  }
}

// ---- IsValidUtf8 ----

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

}  // namespace
}  // namespace sluice::cli
