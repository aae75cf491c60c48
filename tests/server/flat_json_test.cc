// FlatJson against nlohmann::json itself: the same documents valid, the same number kinds, the
// same member kept when a name repeats.
#include "server/flat_json.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>

namespace sluice::server {
namespace {

TEST(FlatJson, AcceptsExactlyWhatNlohmannAccepts) {
  for (const std::string text : {"",
                                 " ",
                                 "{",
                                 "{}",
                                 "[]",
                                 "[1,]",
                                 "{\"a\":1,}",
                                 "{\"a\" 1}",
                                 "1",
                                 "\"s\"",
                                 "nul",
                                 "null",
                                 "{\"a\":1} x",
                                 "{\"a\":1}  \n",
                                 "{\"a\":\"\\u00e9\\ud83d\\ude00\"}",
                                 "{\"a\":\"\\ud83d\"}",
                                 "{\"a\":\"\xff\"}",
                                 "{\"a\":\"tab\there\"}",
                                 "[1e400]",
                                 "[-0, 01]",
                                 "[1.5e3, -2, 3]",
                                 "{\"a\":[{\"b\":[[]]}]}",
                                 "/* c */ {}"}) {
    FlatJson doc;
    const bool ours = doc.Parse(text);
    const bool theirs =
        !nlohmann::json::parse(text.begin(), text.end(), nullptr, false).is_discarded();
    EXPECT_EQ(ours, theirs) << text;
  }
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

}  // namespace
}  // namespace sluice::server
