// FlatJson against nlohmann::json itself: the same documents valid, the same number kinds, the
// same member kept when a name repeats -- on chosen cases and on many random mutations of
// check bodies.
#include "http/flat_json.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <future>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

namespace sluice::server {
namespace {

// A canonical text of a document: members sorted by name, floats by kind only.
std::string Canonical(const nlohmann::json& j) {
  switch (j.type()) {
    case nlohmann::json::value_t::object: {
      std::string out = "{";
      for (const auto& [k, v] : j.items()) out += k + ":" + Canonical(v) + ",";
      return out + "}";
    }
    case nlohmann::json::value_t::array: {
      std::string out = "[";
      for (const auto& v : j) out += Canonical(v) + ",";
      return out + "]";
    }
    case nlohmann::json::value_t::string:
      return "s" + j.get<std::string>();
    case nlohmann::json::value_t::number_integer:
      return "i" + std::to_string(j.get<int64_t>());
    case nlohmann::json::value_t::number_unsigned:
      return "u" + std::to_string(j.get<uint64_t>());
    case nlohmann::json::value_t::number_float:
      return "f";
    case nlohmann::json::value_t::boolean:
      return "b";
    default:
      return "n";
  }
}

std::string Canonical(const FlatJson& doc, const FlatJson::Node& n) {
  using Kind = FlatJson::Kind;
  switch (n.kind) {
    case Kind::kObject: {
      std::vector<const FlatJson::Node*> members;
      for (const auto* c = doc.First(n); c != nullptr; c = doc.Next(*c)) members.push_back(c);
      std::sort(members.begin(), members.end(),
                [](const auto* a, const auto* b) { return a->name < b->name; });
      std::string out = "{";
      for (const auto* c : members) out += c->name + ":" + Canonical(doc, *c) + ",";
      return out + "}";
    }
    case Kind::kArray: {
      std::string out = "[";
      for (const auto* c = doc.First(n); c != nullptr; c = doc.Next(*c)) {
        out += Canonical(doc, *c) + ",";
      }
      return out + "]";
    }
    case Kind::kString:
      return "s" + n.text;
    case Kind::kInteger:
      return "i" + std::to_string(n.integer);
    case Kind::kUnsigned:
      return "u" + std::to_string(n.unsigned_integer);
    case Kind::kFloat:
      return "f";
    case Kind::kBool:
      return "b";
    default:
      return "n";
  }
}

// Both parsers on `text`: "" when both refuse, else the canonical document (or "<refused>").
std::pair<std::string, std::string> Both(const std::string& text) {
  FlatJson doc;
  const bool ours = doc.Parse(text);
  const auto j = nlohmann::json::parse(text.begin(), text.end(), nullptr, false);
  return {ours ? Canonical(doc, doc.root()) : "<refused>",
          j.is_discarded() ? "<refused>" : Canonical(j)};
}

TEST(FlatJson, AcceptsExactlyWhatNlohmannAccepts) {
  const std::vector<std::string> cases = {
      "",
      " ",
      "{",
      "{}",
      "[]",
      "[1,]",
      R"({"a":1,})",
      R"({"a" 1})",
      "1",
      R"("s")",
      "nul",
      "null",
      R"({"a":1} x)",
      "{\"a\":1}  \n",
      R"({"a":"\u00e9\ud83d\ude00"})",
      R"({"a":"\ud83d"})",
      "{\"a\":\"\xff\"}",
      "{\"a\":\"tab\there\"}",
      "[1e400]",
      "[-1e400]",
      "[1e-400]",
      "[-0, 01]",
      "[1.5e3, -2, 3]",
      R"({"a":[{"b":[[]]}]})",
      "/* c */ {}",
      "\xEF\xBB\xBF[1]",
      "\xEF[1]",
      "[-9223372036854775808, -9223372036854775809, 18446744073709551616]",
      "[1E+2, 0.0e0]",
      R"(["\ud800\udc00", "x"])",
      R"(["\udc00"])",
      "[\"\xed\xa0\x80\"]",
      "[\"\xf4\x90\x80\x80\"]",
      "[\"\xc0\xaf\"]",
      R"(["\/\b\f\n\r\t\"\\"])",
      R"(["\x"])",
      "[-]",
      "[1.]",
      "[.5]",
      "[+1]",
      "[1e]",
      "[01]",
      "[\"a\x7f\"]",
      "[true,false,null]",
      "[tru]",
      R"({"a":1 "b":2})",
      "{1:2}",
      R"({"a"})",
      R"({"a":1,"a":[2]})",
      std::string(64, '[') + std::string(64, ']'),
      std::string("[\"a\0b\"]", 7),
      "[179769313486231570000000000000000000000000000000000000000000000000000000000000000000000000"
      "000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000"
      "000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000"
      "0000000000000000000000000000000000000000000000000000000000000000000]",
      "[0."
      "00000000000000000000000000000000000000000000000000000000000000000000000000000000000000001e-"
      "300]"};
  for (const std::string& text : cases) {
    const auto [ours, theirs] = Both(text);
    EXPECT_EQ(ours, theirs) << text;
  }
  // Deep nesting costs the reader no stack.
  FlatJson deep;
  EXPECT_TRUE(deep.Parse(std::string(100000, '[') + std::string(100000, ']')));
  EXPECT_FALSE(deep.Parse(std::string(100000, '[') + std::string(99999, ']')));
}

TEST(FlatJson, AgreesWithNlohmannOnRandomMutationsOfCheckBodies) {
  const std::vector<std::string> seeds = {
      R"({"domain":"api","descriptors":[{"entries":[{"key":"api_key","value":"k1"}],"hits":1}],"hits":1})",
      R"({"domain":"d","descriptors":[{"entries":[{"key":"k","value":"v\u00e9"}],"limit":{"requests_per_unit":5,"unit":"minute"}}]})",
      R"([1.5e3,-2,0,"x",true,false,null,{"a":{"a":[]}},18446744073709551615])"};
  const std::string alphabet = "{}[]\":,.-+eE0123456789 \t\n\\u\"tfnlrsa\x80\xc3\xa9\xff\x01";
  std::mt19937_64 rng(12345);
  int compared = 0;
  for (int round = 0; round < 20000; ++round) {
    std::string text = seeds[rng() % seeds.size()];
    const int edits = 1 + static_cast<int>(rng() % 3);
    for (int e = 0; e < edits && !text.empty(); ++e) {
      const size_t at = rng() % text.size();
      const char c = alphabet[rng() % alphabet.size()];
      switch (rng() % 3) {
        case 0:
          text[at] = c;
          break;
        case 1:
          text.insert(text.begin() + static_cast<std::ptrdiff_t>(at), c);
          break;
        default:
          text.erase(at, 1 + rng() % 3);
          break;
      }
    }
    const auto [ours, theirs] = Both(text);
    ASSERT_EQ(ours, theirs) << text;
    compared += ours != "<refused>";
  }
  EXPECT_GT(compared, 1000) << "enough mutations stay valid to compare documents";
}

// Past 16 members an object finds repeated names through a map: the same documents as
// nlohmann, with names repeated near and far, in objects nested in big ones.
TEST(FlatJson, BigObjectsKeepTheLastOfARepeatedNameAsNlohmannDoes) {
  std::mt19937_64 rng(11);
  for (int round = 0; round < 50; ++round) {
    const int members = 1 + static_cast<int>(rng() % 300);
    std::string text = "{";
    for (int m = 0; m < members; ++m) {
      if (m > 0) text += ',';
      text += "\"k" + std::to_string(rng() % (1 + rng() % 120)) + "\":";
      text += rng() % 5 == 0 ? "{\"a\":1,\"a\":" + std::to_string(m) + "}" : std::to_string(m);
    }
    text += '}';
    FlatJson doc;
    ASSERT_TRUE(doc.Parse(text)) << text;
    EXPECT_EQ(Canonical(doc, doc.root()), Canonical(nlohmann::json::parse(text))) << text;
  }
}

// A 1 MiB body of 100k+ members must not cost an I/O thread a scan per member (it took 20-37 s
// before names were indexed; now milliseconds). The bound is generous: only quadratic misses it.
TEST(FlatJson, ManyMembersParseInLinearTime) {
  std::string dup = "{";
  std::string distinct = "{";
  for (int m = 0; m < 160'000; ++m) {
    dup += (m > 0 ? ",\"a\":" : "\"a\":") + std::to_string(m);
    if (m < 100'000) distinct += (m > 0 ? ",\"" : "\"") + std::to_string(m) + "\":0";
  }
  dup += '}';
  distinct += '}';
  auto parse = std::async(std::launch::async, [&] {
    FlatJson doc;
    EXPECT_TRUE(doc.Parse(dup));
    EXPECT_EQ(doc.root().size, 1u);
    EXPECT_EQ(doc.Find(doc.root(), "a")->unsigned_integer, 159'999u);
    EXPECT_TRUE(doc.Parse(distinct));
    EXPECT_EQ(doc.root().size, 100'000u);
    EXPECT_NE(doc.Find(doc.root(), "99999"), nullptr);
  });
  ASSERT_EQ(parse.wait_for(std::chrono::seconds(20)), std::future_status::ready);
}

TEST(FlatJson, ClassifiesNumbersAndKeepsTheLastOfARepeatedName) {
  FlatJson doc;
  ASSERT_TRUE(doc.Parse(R"({"i":-3,"u":18446744073709551615,"f":1.0,"big":1e30,"i":7,
                            "s":"x\"y","a":[true,null,"z"]})"));
  const auto& root = doc.root();
  EXPECT_EQ(root.size, 6u);
  const auto* i = doc.Find(root, "i");
  ASSERT_NE(i, nullptr);
  EXPECT_EQ(i->kind, FlatJson::Kind::kUnsigned) << "7 replaced -3";
  EXPECT_EQ(i->unsigned_integer, 7u);
  EXPECT_EQ(doc.Find(root, "u")->kind, FlatJson::Kind::kUnsigned);
  EXPECT_EQ(doc.Find(root, "f")->kind, FlatJson::Kind::kFloat);
  EXPECT_EQ(doc.Find(root, "big")->kind, FlatJson::Kind::kFloat);
  EXPECT_EQ(doc.Find(root, "s")->text, "x\"y");
  const auto* a = doc.Find(root, "a");
  ASSERT_EQ(a->kind, FlatJson::Kind::kArray);
  EXPECT_EQ(a->size, 3u);
  std::string kinds;
  for (const auto* c = doc.First(*a); c != nullptr; c = doc.Next(*c)) {
    kinds += std::to_string(static_cast<int>(c->kind));
  }
  EXPECT_EQ(kinds, "105");  // bool, null, string
  EXPECT_EQ(doc.Find(root, "missing"), nullptr);
  ASSERT_TRUE(doc.Parse("[-5]"));
  EXPECT_EQ(doc.First(doc.root())->integer, -5);
}

// The one place FlatJson and nlohmann::json differ (found by tests/fuzz/fuzz_check_json.cc):
// nlohmann::json ends the input at a NUL byte, so it accepts a document followed by a NUL and
// anything; FlatJson refuses, as RFC 8259 does.
TEST(FlatJson, RefusesBytesAfterTheDocumentEvenAfterANul) {
  using namespace std::string_view_literals;
  FlatJson doc;
  for (const std::string_view text : {"{}\0junk"sv, "2\0\x01\xfd"sv, "[1]\0"sv}) {
    EXPECT_FALSE(doc.Parse(text)) << text.size();
    EXPECT_FALSE(nlohmann::json::parse(text.begin(), text.end(), nullptr, false).is_discarded())
        << "nlohmann::json stops at the NUL";
  }
}

}  // namespace
}  // namespace sluice::server
