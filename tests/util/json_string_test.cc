// AppendJsonStringOfUtf8 (the CLI's writer: nlohmann::json's dump() of valid UTF-8) and
// AppendJsonStringOfBytes (the HTTP API's and the JSON log's: any bytes), checked against
// nlohmann::json as an independent oracle, and with fixed strings where the old writers' output
// differs from it.
#include "util/json_string.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <limits>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include "utf8_test_util.h"
#include "util/utf8.h"

namespace sluice::util {
namespace {

using namespace std::string_literals;
using test_support::Encode;
using test_support::Hex;

std::string Quoted(std::string_view s) {
  std::string out;
  AppendJsonStringOfUtf8(out, s);
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

// A random string of valid UTF-8 (up to 24 code points), weighted towards what JSON escapes.
std::string RandomUtf8(std::mt19937& rng) {
  std::uniform_int_distribution<int> kind(0, 5);
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
  return s;
}

// ---- AppendJsonStringOfUtf8: the CLI's tests, from tests/cli/json_text_test.cc ----

TEST(JsonTextTest, PlainAsciiIsQuotedVerbatim) {
  EXPECT_EQ(Quoted(""), "\"\"");
  EXPECT_EQ(Quoted("abc"), "\"abc\"");
  EXPECT_EQ(Quoted("user:42 /api/v1?x=1"), "\"user:42 /api/v1?x=1\"");
  ExpectRoundTrip("");
  ExpectRoundTrip("abc");
}

TEST(JsonTextTest, AppendsWithoutClobberingExistingContent) {
  std::string out = "{\"key\":";
  AppendJsonStringOfUtf8(out, "a\"b");
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
  for (int iter = 0; iter < 3000; ++iter) {
    const std::string s = RandomUtf8(rng);
    ASSERT_TRUE(IsValidUtf8(s)) << Hex(s);
    ExpectRoundTrip(s);
    if (HasFailure()) {
      ADD_FAILURE() << "first failing input: " << Hex(s);
      return;
    }
  }
}

// ---- Against nlohmann::json's dump() ----

std::string Dump(const std::string& s) { return nlohmann::json(s).dump(); }

std::string OfBytes(std::string_view s) {
  std::string out;
  AppendJsonStringOfBytes(out, s);
  return out;
}

TEST(JsonStringOfUtf8, IsNlohmannDumpForEveryAsciiByte) {
  for (int c = 0; c < 0x80; ++c) {
    const std::string s(1, static_cast<char>(c));
    EXPECT_EQ(Quoted(s), Dump(s)) << c;
  }
}

TEST(JsonStringOfUtf8, IsNlohmannDumpForValidUtf8) {
  std::mt19937 rng(11);
  for (int iter = 0; iter < 5000; ++iter) {
    const std::string s = RandomUtf8(rng);
    ASSERT_EQ(Quoted(s), Dump(s)) << Hex(s);
  }
}

TEST(JsonStringOfBytes, IsNlohmannDumpForValidUtf8ButBackspaceAndFormFeed) {
  for (int c = 0; c < 0x80; ++c) {
    const std::string s(1, static_cast<char>(c));
    if (c == '\b' || c == '\f') continue;
    EXPECT_EQ(OfBytes(s), Dump(s)) << c;
  }
  // nlohmann::json writes "\b" and "\f"; this writer has always written these.
  EXPECT_EQ(OfBytes("\b"), R"("\u0008")");
  EXPECT_EQ(OfBytes("\f"), R"("\u000c")");
  EXPECT_EQ(OfBytes("a\bb\fc\n"), R"("a\u0008b\u000cc\n")");
  std::mt19937 rng(12);
  for (int iter = 0; iter < 5000; ++iter) {
    const std::string s = RandomUtf8(rng);
    if (s.find_first_of("\b\f") != std::string::npos) continue;
    ASSERT_EQ(OfBytes(s), Dump(s)) << Hex(s);
  }
}

// ---- AppendJsonStringOfBytes on bytes that are not UTF-8 ----

// One U+FFFD per byte, where nlohmann::json's error_handler_t::replace would write one per
// ill-formed sequence ("\xE2\x82" is one for it, two here): the API's bytes stay what they were.
TEST(JsonStringOfBytes, ReplacesEachInvalidByte) {
  const std::string r = "\xEF\xBF\xBD";
  EXPECT_EQ(OfBytes("\xFF"), "\"" + r + "\"");
  EXPECT_EQ(OfBytes("a\x80z"), "\"a" + r + "z\"");
  EXPECT_EQ(OfBytes("\xE2\x82z"), "\"" + r + r + "z\"");                // truncated, then ASCII
  EXPECT_EQ(OfBytes("z\xF0\x9F\x98"), "\"z" + r + r + r + "\"");        // truncated at the end
  EXPECT_EQ(OfBytes("\xC0\x80"), "\"" + r + r + "\"");                  // overlong
  EXPECT_EQ(OfBytes("\xE0\x9F\xBF"), "\"" + r + r + r + "\"");          // overlong
  EXPECT_EQ(OfBytes("\xED\xA0\x80"), "\"" + r + r + r + "\"");          // surrogate
  EXPECT_EQ(OfBytes("\xF4\x90\x80\x80"), "\"" + r + r + r + r + "\"");  // above U+10FFFF
  EXPECT_EQ(OfBytes("\xF8\x88\x80\x80\x80"), "\"" + r + r + r + r + r + "\"");
  // A valid sequence after an invalid byte is kept, and so is U+FFFD itself.
  EXPECT_EQ(OfBytes("\xC3\xC3\xA9"), "\"" + r + "\xC3\xA9\"");
  EXPECT_EQ(OfBytes("\x01\xC3\xA9\xFF\""), "\"\\u0001\xC3\xA9" + r + "\\\"\"");
  EXPECT_EQ(OfBytes(r), "\"" + r + "\"");
}

// Whatever the bytes, the output is JSON, and it reads back as the input with each byte that
// does not start a well-formed sequence (Table 3-7) replaced by U+FFFD.
TEST(JsonStringOfBytes, AnyBytesGiveJsonThatReadsBackWithReplacements) {
  const std::vector<unsigned char> interesting = {
      0x00, 0x08, 0x0c, '\n', 0x1f, '"',  '\\', '/',  'a',  0x7f, 0x80, 0x8f, 0x90, 0x9f, 0xa0,
      0xbf, 0xc0, 0xc1, 0xc2, 0xdf, 0xe0, 0xe1, 0xed, 0xef, 0xf0, 0xf3, 0xf4, 0xf5, 0xfe, 0xff};
  std::mt19937 rng(13);
  std::uniform_int_distribution<size_t> pick(0, interesting.size() - 1);
  std::uniform_int_distribution<int> len(0, 12);
  for (int iter = 0; iter < 100000; ++iter) {
    std::string s;
    const int n = len(rng);
    for (int i = 0; i < n; ++i) s += static_cast<char>(interesting[pick(rng)]);
    const std::string text = OfBytes(s);
    std::string back;
    ASSERT_NO_THROW(back = ParseJsonString(text)) << Hex(s) << " gave " << text;
    ASSERT_EQ(back, test_support::ReplaceEachInvalidByte(s)) << Hex(s);
  }
}

// Moved from tests/http/check_json_test.cc with the writer it tests.
TEST(JsonText, EscapesControlsAndReplacesInvalidUtf8) {
  std::string out;
  AppendJsonStringOfBytes(out, std::string("a\"b\\c\n\x01\xC3\xA9\xFF", 10));
  EXPECT_EQ(out, "\"a\\\"b\\\\c\\n\\u0001\xC3\xA9\xEF\xBF\xBD\"");
}

// ---- AppendJsonInt ----

TEST(JsonInt, IsNlohmannDump) {
  for (int64_t v : {int64_t{0}, int64_t{1}, int64_t{-1}, int64_t{42}, int64_t{-1500},
                    std::numeric_limits<int64_t>::max(), std::numeric_limits<int64_t>::min()}) {
    std::string out = "x";
    AppendJsonInt(out, v);
    EXPECT_EQ(out, "x" + nlohmann::json(v).dump());
  }
}
}  // namespace
}  // namespace sluice::util
