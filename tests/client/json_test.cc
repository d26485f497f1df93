#include "client/json.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <string>

namespace fencepost::client {
namespace {

TEST(JsonTest, ReadsTokensExactlyUpToUint64Max) {
  const auto json = Json::Parse(R"({"token": 18446744073709551615})");
  ASSERT_TRUE(json);
  ASSERT_NE(json->Find("token"), nullptr);
  EXPECT_EQ(json->Find("token")->AsUint64(), UINT64_MAX);
  EXPECT_EQ(json->Find("token")->number_text(), "18446744073709551615");
  // 2^53 + 1 is where a double would round.
  EXPECT_EQ(Json::Parse("9007199254740993")->AsUint64(), 9007199254740993ull);
}

TEST(JsonTest, NumbersThatAreNotTheTypeAreRefusedByTheAccessor) {
  EXPECT_EQ(Json::Parse("18446744073709551616")->AsUint64(), std::nullopt);
  EXPECT_EQ(Json::Parse("-1")->AsUint64(), std::nullopt);
  EXPECT_EQ(Json::Parse("-1")->AsInt64(), -1);
  EXPECT_EQ(Json::Parse("-9223372036854775808")->AsInt64(), INT64_MIN);
  EXPECT_EQ(Json::Parse("9223372036854775808")->AsInt64(), std::nullopt);
  EXPECT_EQ(Json::Parse("1.5")->AsUint64(), std::nullopt);
  EXPECT_EQ(Json::Parse("1e3")->AsUint64(), std::nullopt);
  EXPECT_EQ(Json::Parse("0")->AsUint64(), 0u);
  EXPECT_EQ(Json::Parse("\"5\"")->AsUint64(), std::nullopt);
  EXPECT_EQ(Json::Parse("1.5e-3")->number_text(), "1.5e-3");
}

TEST(JsonTest, DecodesEscapes) {
  const auto json = Json::Parse(R"("q\" b\\ s\/ \b\f\n\r\t")");
  ASSERT_TRUE(json);
  EXPECT_EQ(*json->AsString(), "q\" b\\ s/ \b\f\n\r\t");
  EXPECT_EQ(*Json::Parse(R"("caf\u00e9 \u20AC")")->AsString(),
            "caf\xc3\xa9 \xe2\x82\xac");
  EXPECT_EQ(*Json::Parse(R"("\ud83d\ude00")")->AsString(), "\xf0\x9f\x98\x80");
  EXPECT_EQ(*Json::Parse(R"("\u0000")")->AsString(), std::string(1, '\0'));
  EXPECT_EQ(*Json::Parse("\"raw caf\xc3\xa9\"")->AsString(), "raw caf\xc3\xa9");
}

TEST(JsonTest, ReadsNullsBooleansArraysAndObjects) {
  const auto json = Json::Parse(
      R"( {"holder": null, "yes": true, "no": false, "list": [1, [2, []], {}]} )");
  ASSERT_TRUE(json);
  EXPECT_EQ(json->kind(), Json::Kind::kObject);
  EXPECT_TRUE(json->Find("holder")->is_null());
  EXPECT_EQ(json->Find("yes")->AsBool(), true);
  EXPECT_EQ(json->Find("no")->AsBool(), false);
  EXPECT_EQ(json->Find("holder")->AsBool(), std::nullopt);
  EXPECT_EQ(json->Find("absent"), nullptr);
  const auto& list = json->Find("list")->items();
  ASSERT_EQ(list.size(), 3u);
  EXPECT_EQ(list[0].AsUint64(), 1u);
  EXPECT_EQ(list[1].items().size(), 2u);
  EXPECT_EQ(list[2].kind(), Json::Kind::kObject);
  EXPECT_EQ(json->names(),
            (std::vector<std::string>{"holder", "yes", "no", "list"}));
  EXPECT_EQ(json->Find("yes")->Find("x"), nullptr) << "not an object";
}

TEST(JsonTest, RefusesMalformedInput) {
  for (const std::string text : {"",
                                 " ",
                                 "{",
                                 "}",
                                 "[",
                                 "[1,]",
                                 "[,1]",
                                 "{\"a\":}",
                                 "{\"a\" 1}",
                                 "{\"a\":1,}",
                                 "{a:1}",
                                 "{'a':1}",
                                 "01",
                                 "-",
                                 "+1",
                                 "1.",
                                 ".5",
                                 "1e",
                                 "1 2",
                                 "nul",
                                 "tru",
                                 "True",
                                 "NaN",
                                 "Infinity",
                                 "\"open",
                                 "\"bad \\x escape\"",
                                 "\"\\u12\"",
                                 "\"\\u12G4\"",
                                 "\"tab\there\"",
                                 "\"new\nline\"",
                                 "[1] x",
                                 "{\"a\":1}}",
                                 "\"\\ud83d\"",
                                 "\"\\ude00\"",
                                 "\"\\ud83d\\u0041\"",
                                 "{\"a\":1,\"a\":2}"}) {
    EXPECT_FALSE(Json::Parse(text)) << text;
  }
}

TEST(JsonTest, RefusesInvalidUtf8InStrings) {
  for (const std::string text :
       {"\"\xff\"", "\"\xc0\xaf\"", "\"\xe0\x80\xaf\"", "\"\xed\xa0\x80\"",
        "\"\xf4\x90\x80\x80\"", "\"\xc3\"", "\"\xe2\x82\""}) {
    EXPECT_FALSE(Json::Parse(text)) << "invalid UTF-8 accepted";
  }
}

TEST(JsonTest, BoundsNesting) {
  std::string ok(Json::kMaxDepth, '[');
  ok += std::string(Json::kMaxDepth, ']');
  EXPECT_TRUE(Json::Parse(ok));
  std::string deep(Json::kMaxDepth + 1, '[');
  deep += std::string(Json::kMaxDepth + 1, ']');
  EXPECT_FALSE(Json::Parse(deep));
  // Far past the stack: refused, not a crash.
  EXPECT_FALSE(Json::Parse(std::string(1'000'000, '[')));
}

TEST(JsonTest, QuotesWhatItWrites) {
  EXPECT_EQ(JsonQuote("plain"), "\"plain\"");
  EXPECT_EQ(JsonQuote("a\"b\\c\n\x01"), R"("a\"b\\c\n\u0001")");
  const std::string odd = "h\"o\\l\td\xc3\xa9r\x7f";
  EXPECT_EQ(*Json::Parse(JsonQuote(odd))->AsString(), odd);
}

}  // namespace
}  // namespace fencepost::client
