// ParseTraceLine and TraceReader: the accepted trace syntax and every way a line can be wrong.
#include "cli/trace_reader.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cstdio>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include "cli/cli_test_util.h"

namespace sluice::cli {
namespace {

using namespace std::string_literals;
using test::FilePtr;
using test::TmpFileWith;

struct OwnedLine {
  int64_t t_ms;
  std::string key;
  int64_t cost;
  bool operator==(const OwnedLine&) const = default;
};

std::ostream& operator<<(std::ostream& os, const OwnedLine& l) {
  return os << "{" << l.t_ms << ", \"" << l.key << "\", " << l.cost << "}";
}

struct ReadOutcome {
  std::vector<OwnedLine> lines;
  std::optional<std::string> error;  // the reader's error, if it stopped on one
  size_t line_number = 0;
};

ReadOutcome ReadAll(std::FILE* in) {
  TraceReader reader(in);
  ReadOutcome out;
  while (true) {
    auto next = reader.Next();
    if (!next) {
      out.error = next.error().message;
      break;
    }
    if (!next->has_value()) break;
    const TraceLine& l = **next;
    out.lines.push_back({l.t_ms, std::string(l.key), l.cost});
  }
  out.line_number = reader.line_number();
  return out;
}

ReadOutcome ReadAll(std::string_view content) {
  FilePtr f = TmpFileWith(content);
  if (!f) return {};
  return ReadAll(f.get());
}

// ---- ParseTraceLine ----

OwnedLine ParseOk(std::string_view text) {
  auto r = ParseTraceLine(text);
  EXPECT_TRUE(r.has_value()) << "'" << text << "': " << (r ? "" : r.error().message);
  if (!r) return {-1, "", -1};
  EXPECT_TRUE(r->has_value()) << "'" << text << "' was taken as blank/comment";
  if (!r->has_value()) return {-1, "", -1};
  return {(*r)->t_ms, std::string((*r)->key), (*r)->cost};
}

std::string ParseError(std::string_view text) {
  auto r = ParseTraceLine(text);
  EXPECT_FALSE(r.has_value()) << "'" << text << "' was accepted";
  return r ? "" : r.error().message;
}

bool IsBlankOrComment(std::string_view text) {
  auto r = ParseTraceLine(text);
  return r.has_value() && !r->has_value();
}

TEST(TraceParseTest, TimeAndKeyWithDefaultCost) {
  EXPECT_EQ(ParseOk("100,a"), (OwnedLine{100, "a", 1}));
  EXPECT_EQ(ParseOk("0,user:42"), (OwnedLine{0, "user:42", 1}));
  EXPECT_EQ(ParseOk("1700000000000,api_key=k1"), (OwnedLine{1700000000000, "api_key=k1", 1}));
}

TEST(TraceParseTest, ExplicitCost) {
  EXPECT_EQ(ParseOk("100,a,5"), (OwnedLine{100, "a", 5}));
  EXPECT_EQ(ParseOk("100,a,1"), (OwnedLine{100, "a", 1}));
  EXPECT_EQ(ParseOk("100,a,1000000000"), (OwnedLine{100, "a", kMaxTraceCost}));
}

TEST(TraceParseTest, SpacesTabsAndCarriageReturnAreTrimmed) {
  EXPECT_EQ(ParseOk(" 100 , a , 5 "), (OwnedLine{100, "a", 5}));
  EXPECT_EQ(ParseOk("\t100\t,\ta\t"), (OwnedLine{100, "a", 1}));
  EXPECT_EQ(ParseOk("100,a\r"), (OwnedLine{100, "a", 1}));
  EXPECT_EQ(ParseOk("100,a,3\r"), (OwnedLine{100, "a", 3}));
  EXPECT_EQ(ParseOk("  100,a  \r"), (OwnedLine{100, "a", 1}));
  // Inner spaces belong to the key.
  EXPECT_EQ(ParseOk("100, a b ,2"), (OwnedLine{100, "a b", 2}));
}

TEST(TraceParseTest, TimeBounds) {
  EXPECT_EQ(ParseOk("8000000000000,a").t_ms, kMaxTraceTimeMs);
  EXPECT_EQ(ParseOk("0000000000000000010,a").t_ms, 10);  // 19 digits, leading zeros
}

TEST(TraceParseTest, KeyMayBeUtf8AndUpTo4096Bytes) {
  EXPECT_EQ(ParseOk("1,caf\xc3\xa9-\xf0\x9f\x98\x80").key, "caf\xc3\xa9-\xf0\x9f\x98\x80");
  EXPECT_EQ(ParseOk("1,a\"b\\c").key, "a\"b\\c");
  const std::string key(kMaxTraceKeyBytes, 'k');
  EXPECT_EQ(ParseOk("1," + key + ",2"), (OwnedLine{1, key, 2}));
}

TEST(TraceParseTest, BlankAndCommentLinesAreSkipped) {
  EXPECT_TRUE(IsBlankOrComment(""));
  EXPECT_TRUE(IsBlankOrComment("   "));
  EXPECT_TRUE(IsBlankOrComment("\t \t"));
  EXPECT_TRUE(IsBlankOrComment("\r"));
  EXPECT_TRUE(IsBlankOrComment("#"));
  EXPECT_TRUE(IsBlankOrComment("# t_ms,key,cost"));
  EXPECT_TRUE(IsBlankOrComment("   # indented comment\r"));
  EXPECT_TRUE(IsBlankOrComment("#not,a,line,at,all"));
  EXPECT_FALSE(IsBlankOrComment("1,a"));
}

TEST(TraceParseTest, NonNumericTime) {
  for (const char* line : {"abc,a", "1.5,a", "1e3,a", "+5,a", "0x10,a", "10ms,a", "1 0,a", ",a"}) {
    SCOPED_TRACE(line);
    const std::string e = ParseError(line);
    EXPECT_CONTAINS(e, "time '");
    EXPECT_CONTAINS(e, "whole number of milliseconds");
  }
  EXPECT_CONTAINS(ParseError("abc,a"), "'abc'");
}

TEST(TraceParseTest, NegativeTime) {
  const std::string e = ParseError("-5,a");
  EXPECT_CONTAINS(e, "time '-5'");
  EXPECT_CONTAINS(e, "between 0 and");
}

TEST(TraceParseTest, TimeOverflow) {
  // One past the maximum, past int64, and more digits than int64 has.
  for (const char* line : {"8000000000001,a", "9223372036854775807,a", "9223372036854775808,a",
                           "99999999999999999999,a", "123456789012345678901234567890,a"}) {
    SCOPED_TRACE(line);
    const std::string e = ParseError(line);
    EXPECT_CONTAINS(e, "time '");
    EXPECT_CONTAINS(e, std::to_string(kMaxTraceTimeMs));
  }
}

TEST(TraceParseTest, LongBadFieldIsShortenedInTheMessage) {
  const std::string junk(500, 'x');
  const std::string e = ParseError(junk + ",a");
  EXPECT_CONTAINS(e, "time '");
  EXPECT_CONTAINS(e, "...");
  EXPECT_LT(e.size(), 200u) << e;
}

TEST(TraceParseTest, EmptyKey) {
  for (const char* line : {"1,", "1, ", "1,,2", "1, \t ,2", "1,\r"}) {
    SCOPED_TRACE(line);
    EXPECT_CONTAINS(ParseError(line), "empty key");
  }
}

TEST(TraceParseTest, KeyTooLong) {
  const std::string key(kMaxTraceKeyBytes + 1, 'k');
  const std::string e = ParseError("1," + key);
  EXPECT_CONTAINS(e, "key is 4097 bytes");
  EXPECT_CONTAINS(e, "maximum is 4096");
  // Bytes, not characters: 2049 two-byte characters are 4098 bytes.
  std::string wide;
  for (int i = 0; i < 2049; ++i) wide += "\xc3\xa9";
  EXPECT_CONTAINS(ParseError("1," + wide), "key is 4098 bytes");
}

TEST(TraceParseTest, InvalidUtf8Key) {
  for (const std::string& key :
       {"\xff"s, "ab\xc3"s, "\xc0\x80"s, "\xed\xa0\x80"s, "\xf4\x90\x80\x80"s, "a\x80z"s}) {
    SCOPED_TRACE(key);
    EXPECT_CONTAINS(ParseError("1," + key + ",1"), "not valid UTF-8");
  }
}

TEST(TraceParseTest, CostZero) {
  const std::string e = ParseError("1,a,0");
  EXPECT_CONTAINS(e, "cost '0'");
  EXPECT_CONTAINS(e, "between 1 and 1000000000");
  EXPECT_CONTAINS(ParseError("1,a,000"), "cost '000'");
}

TEST(TraceParseTest, NonNumericOrOutOfRangeCost) {
  for (const char* line : {"1,a,x", "1,a,-1", "1,a,1.5", "1,a,", "1,a, ", "1,a,2x",
                           "1,a,1000000001", "1,a,99999999999999999999"}) {
    SCOPED_TRACE(line);
    const std::string e = ParseError(line);
    EXPECT_CONTAINS(e, "cost '");
    EXPECT_CONTAINS(e, "whole number between 1 and");
  }
  EXPECT_CONTAINS(ParseError("1,a,x"), "cost 'x'");
}

TEST(TraceParseTest, TooManyFields) {
  for (const char* line : {"1,a,2,3", "1,a,2,", "1,a,,", "1,a,2,3,4,5", ",,,"}) {
    SCOPED_TRACE(line);
    EXPECT_CONTAINS(ParseError(line), "more than 3 fields");
  }
}

TEST(TraceParseTest, MissingComma) {
  for (const char* line : {"100", "100 a", "100;a", "abc", "100\ta"}) {
    SCOPED_TRACE(line);
    EXPECT_CONTAINS(ParseError(line), "no ','");
  }
}

TEST(TraceParseTest, ErrorsHaveNoLinePrefix) {
  EXPECT_EQ(ParseError("1,a,0").rfind("line ", 0), std::string::npos);
}

// ---- TraceReader ----

TEST(TraceReaderTest, EmptyInput) {
  const ReadOutcome r = ReadAll("");
  EXPECT_FALSE(r.error);
  EXPECT_TRUE(r.lines.empty());
  EXPECT_EQ(r.line_number, 0u);
}

TEST(TraceReaderTest, OnlyCommentsAndBlankLines) {
  const ReadOutcome r = ReadAll("# header\n\n   \n#another\r\n\n");
  EXPECT_FALSE(r.error) << *r.error;
  EXPECT_TRUE(r.lines.empty());
  EXPECT_EQ(r.line_number, 5u);
}

TEST(TraceReaderTest, ReadsEveryForm) {
  const ReadOutcome r = ReadAll(
      "# t_ms,key,cost\n"
      "10,a\n"
      "\n"
      "10 , b , 3\n"
      "20,a\r\n"
      "   # comment\n"
      "\t30\t,\tc d\t,\t2\t\r\n"
      "30,\xc3\xa9\n"
      "40,last");  // no final newline
  ASSERT_FALSE(r.error) << *r.error;
  const std::vector<OwnedLine> want = {
      {10, "a", 1},   {10, "b", 3},        {20, "a", 1},
      {30, "c d", 2}, {30, "\xc3\xa9", 1}, {40, "last", 1},
  };
  EXPECT_EQ(r.lines, want);
  EXPECT_EQ(r.line_number, 9u);
}

TEST(TraceReaderTest, WorksOnFmemopenStream) {
  std::string content = "1,a\n2,b,2\n# c\n3,c";
  std::unique_ptr<std::FILE, int (*)(std::FILE*)> f(fmemopen(content.data(), content.size(), "r"),
                                                    &std::fclose);
  ASSERT_NE(f, nullptr);
  const ReadOutcome r = ReadAll(f.get());
  ASSERT_FALSE(r.error) << *r.error;
  EXPECT_EQ(r.lines, (std::vector<OwnedLine>{{1, "a", 1}, {2, "b", 2}, {3, "c", 1}}));
}

TEST(TraceReaderTest, EndOfInputIsSticky) {
  FilePtr f = TmpFileWith("5,a\n");
  ASSERT_NE(f, nullptr);
  TraceReader reader(f.get());
  auto first = reader.Next();
  ASSERT_TRUE(first && first->has_value());
  EXPECT_EQ((*first)->t_ms, 5);
  for (int i = 0; i < 3; ++i) {
    auto again = reader.Next();
    ASSERT_TRUE(again.has_value());
    EXPECT_FALSE(again->has_value());
  }
}

TEST(TraceReaderTest, EqualTimesAreAllowed) {
  const ReadOutcome r = ReadAll("7,a\n7,b\n7,a\n8,a\n8,a\n");
  ASSERT_FALSE(r.error) << *r.error;
  EXPECT_EQ(r.lines.size(), 5u);
}

TEST(TraceReaderTest, FinalLineWithoutNewlineOnlyCrIsRead) {
  const ReadOutcome r = ReadAll("1,a\n2,b\r");
  ASSERT_FALSE(r.error) << *r.error;
  EXPECT_EQ(r.lines, (std::vector<OwnedLine>{{1, "a", 1}, {2, "b", 1}}));
}

struct BadCase {
  const char* name;
  std::string line;
  std::vector<std::string> message_parts;
};

// Each bad line, placed after a prefix of good, blank and comment lines, must be reported with
// its own line number.
TEST(TraceReaderTest, ErrorsNameTheLineAndTheProblem) {
  const std::vector<BadCase> cases = {
      {"non-numeric time", "abc,a", {"time 'abc'", "whole number of milliseconds"}},
      {"negative time", "-1,a", {"time '-1'", "between 0 and"}},
      {"time overflow", "8000000000001,a", {"time '8000000000001'", "8000000000000"}},
      {"time overflow int64", "18446744073709551616,a", {"time '"}},
      {"empty key", "100,,1", {"empty key"}},
      {"key too long", "100," + std::string(4097, 'k'), {"key is 4097 bytes", "maximum is 4096"}},
      {"invalid utf-8 key", "100,\xc3\x28", {"not valid UTF-8"}},
      {"cost 0", "100,a,0", {"cost '0'", "between 1 and"}},
      {"non-numeric cost", "100,a,abc", {"cost 'abc'"}},
      {"4 fields", "100,a,1,1", {"more than 3 fields"}},
      {"missing comma", "100 a", {"no ','"}},
      {"decreasing time",
       "49,a",
       {"time 49", "before the previous line's 50", "must not decrease"}},
  };
  const std::string prefix =
      "# comment\n"   // line 1
      "10,a\n"        // 2
      "\n"            // 3
      "50,b,2\r\n"    // 4
      "  # again\n";  // 5
  for (const BadCase& c : cases) {
    SCOPED_TRACE(c.name);
    for (const char* suffix : {"\n100,z\n", "", "\r\n"}) {
      const ReadOutcome r = ReadAll(prefix + c.line + suffix);
      ASSERT_TRUE(r.error) << "accepted";
      EXPECT_EQ(r.error->rfind("line 6: ", 0), 0u) << *r.error;
      for (const std::string& part : c.message_parts) EXPECT_CONTAINS(*r.error, part);
      EXPECT_EQ(r.lines, (std::vector<OwnedLine>{{10, "a", 1}, {50, "b", 2}}));
      EXPECT_EQ(r.line_number, 6u);
    }
    // And as the very first line (where a time cannot decrease).
    if (std::string_view(c.name) != "decreasing time") {
      const ReadOutcome first = ReadAll(c.line + "\n");
      ASSERT_TRUE(first.error) << "accepted as the first line";
      EXPECT_EQ(first.error->rfind("line 1: ", 0), 0u) << *first.error;
      EXPECT_TRUE(first.lines.empty());
    }
  }
}

TEST(TraceReaderTest, DecreasingTimeComparesWithTheLastDataLineAcrossKeys) {
  const ReadOutcome r = ReadAll("100,a\n200,b\n# 5,c\n\n150,a\n");
  ASSERT_TRUE(r.error);
  EXPECT_EQ(*r.error,
            "line 5: time 150 is before the previous line's 200 (times must not decrease)");
  EXPECT_EQ(r.lines.size(), 2u);
}

TEST(TraceReaderTest, DecreasingToZeroIsCaught) {
  const ReadOutcome r = ReadAll("1,a\n0,a\n");
  ASSERT_TRUE(r.error);
  EXPECT_CONTAINS(*r.error, "line 2: time 0 is before the previous line's 1");
}

// A line of exactly kMaxTraceLineBytes is fine (spaces around fields are legal); one more byte
// is an error naming that line.
TEST(TraceReaderTest, LineLengthLimit) {
  const std::string at_limit = "5,a" + std::string(kMaxTraceLineBytes - 3, ' ');
  ASSERT_EQ(at_limit.size(), kMaxTraceLineBytes);
  const std::string over = at_limit + " ";
  {
    const ReadOutcome r = ReadAll("1,x\n" + at_limit + "\n9,y\n");
    ASSERT_FALSE(r.error) << *r.error;
    EXPECT_EQ(r.lines, (std::vector<OwnedLine>{{1, "x", 1}, {5, "a", 1}, {9, "y", 1}}));
  }
  for (const char* suffix : {"\n9,y\n", "\n", ""}) {
    SCOPED_TRACE(std::string("suffix '") + suffix + "'");
    const ReadOutcome r = ReadAll("1,x\n# c\n" + over + suffix);
    ASSERT_TRUE(r.error) << "accepted a " << over.size() << "-byte line";
    EXPECT_EQ(r.error->rfind("line 3: ", 0), 0u) << *r.error;
    EXPECT_CONTAINS(*r.error, "longer than 65536 bytes");
    EXPECT_EQ(r.lines, (std::vector<OwnedLine>{{1, "x", 1}}));
  }
}

TEST(TraceReaderTest, HugeLineIsAnErrorNotAnAllocation) {
  // Bigger than the reader's whole buffer, with no newline anywhere.
  const std::string content = "1,a\n2,b\n" + std::string(3 << 20, 'x');
  const ReadOutcome r = ReadAll(content);
  ASSERT_TRUE(r.error);
  EXPECT_EQ(r.error->rfind("line 3: ", 0), 0u) << *r.error;
  EXPECT_CONTAINS(*r.error, "longer than 65536 bytes");
  EXPECT_EQ(r.lines.size(), 2u);
}

TEST(TraceReaderTest, LongLinesAcrossBufferRefills) {
  // Short lines push a long (but legal) line across the reader's 1 MiB refill boundary, then an
  // over-long one follows; the line numbers must still be right.
  std::string content;
  std::vector<OwnedLine> want;
  int64_t t = 0;
  size_t line = 0;
  while (content.size() < (1u << 20) - 30000) {
    content += fmt::format("{},k{}\n", t, line % 7);
    want.push_back({t, fmt::format("k{}", line % 7), 1});
    ++line;
    t += line % 3;
  }
  const std::string padded_key = std::string(60000, ' ') + std::string(kMaxTraceKeyBytes, 'q');
  content += fmt::format("{},{},4\n", t, padded_key);
  want.push_back({t, std::string(kMaxTraceKeyBytes, 'q'), 4});
  ++line;
  content += fmt::format("{},after\n", t);
  want.push_back({t, "after", 1});
  ++line;
  content += std::string(70000, '9') + "\n";  // line `line + 1`
  ++line;
  const ReadOutcome r = ReadAll(content);
  ASSERT_TRUE(r.error);
  EXPECT_EQ(*r.error, fmt::format("line {}: longer than 65536 bytes", line));
  ASSERT_EQ(r.lines.size(), want.size());
  EXPECT_EQ(r.lines, want);
}

TEST(TraceReaderTest, ManyLinesOverSeveralRefills) {
  std::mt19937 rng(42);
  std::string content;
  std::vector<OwnedLine> want;
  int64_t t = 1'700'000'000'000;
  size_t physical_lines = 0;
  while (content.size() < (5u << 20)) {
    ++physical_lines;
    const int kind = static_cast<int>(rng() % 20);
    if (kind == 0) {
      content += fmt::format("# comment {}\n", rng());
      continue;
    }
    if (kind == 1) {
      content += "\n";
      continue;
    }
    t += rng() % 4;
    std::string key = fmt::format("key-{}", rng() % 1000);
    if (kind == 2) key += std::string(rng() % 300, 'z');
    const int64_t cost = kind == 3 ? static_cast<int64_t>(1 + rng() % 100) : 1;
    content += fmt::format("{},{}", t, key);
    if (cost != 1 || kind == 4) content += fmt::format(",{}", cost);
    content += kind == 5 ? "\r\n" : "\n";
    want.push_back({t, key, cost});
  }
  const ReadOutcome r = ReadAll(content);
  ASSERT_FALSE(r.error) << *r.error;
  EXPECT_EQ(r.line_number, physical_lines);
  ASSERT_EQ(r.lines.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    if (r.lines[i] != want[i]) {
      FAIL() << "line " << i << ": got " << r.lines[i] << " want " << want[i];
    }
  }
}

}  // namespace
}  // namespace sluice::cli
