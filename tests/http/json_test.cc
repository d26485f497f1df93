#include "http/json.h"

#include <gtest/gtest.h>

namespace fencepost::http {
namespace {

std::string Quote(std::string_view s) {
  std::string out;
  AppendJsonString(&out, s);
  return out;
}

TEST(JsonTest, EscapesQuotesControlsAndInvalidUtf8) {
  EXPECT_EQ(Quote("a\"b\\c"), R"("a\"b\\c")");
  EXPECT_EQ(Quote("\n\x01"), R"("\n\u0001")");
  EXPECT_EQ(Quote("café"), "\"café\"");
  EXPECT_EQ(Quote("a\xff"), R"("a\u00ff")");
}

TEST(JsonTest, FormatsRfc3339Utc) {
  EXPECT_EQ(FormatRfc3339(0), "1970-01-01T00:00:00.000000Z");
  EXPECT_EQ(FormatRfc3339(1'796'000'000'123'456'789),
            "2026-11-30T00:53:20.123456Z");
}

TEST(JsonTest, ParsesFlatObjects) {
  std::map<std::string, JsonScalar> m;
  ASSERT_EQ(ParseFlatObject(
                R"( {"s":"a\"\\\/\n\u00e9\ud83d\ude00","n":-12.5e3,"z":null,)"
                R"("t":true,"big":18446744073709551615} )",
                &m),
            "");
  EXPECT_EQ(m["s"].text, "a\"\\/\n\xc3\xa9\xf0\x9f\x98\x80");
  EXPECT_EQ(m["n"].kind, JsonScalar::Kind::kNumber);
  EXPECT_EQ(m["n"].text, "-12.5e3");
  EXPECT_EQ(m["z"].kind, JsonScalar::Kind::kNull);
  EXPECT_EQ(m["t"].text, "true");
  EXPECT_EQ(m["big"].text, "18446744073709551615");
  EXPECT_EQ(ParseFlatObject("{}", &m), "");
  EXPECT_TRUE(m.empty());
}

TEST(JsonTest, RefusesWhatIsNotAFlatObject) {
  std::map<std::string, JsonScalar> m;
  for (const char* bad :
       {"", "[]", "{", "{\"a\"}", "{\"a\":}", "{\"a\":1,}", "{\"a\":01}",
        "{\"a\":1}x", "{\"a\":[1]}", "{\"a\":{}}", "{\"a\":1,\"a\":2}",
        "{\"a\":\"\\ud800\"}", "{\"a\":\"\\x\"}", "{\"a\":\"\x01\"}",
        "{\"a\":\"\xff\"}", "{\"a\":tru}", "{a:1}", "{\"a\":1.}",
        "{\"a\":-}"}) {
    EXPECT_NE(ParseFlatObject(bad, &m), "") << bad;
  }
  EXPECT_NE(ParseFlatObject(R"({"a":1,"b":2,"c":3})", &m, 2), "");
}

// The batch document's shape: an object of arrays of objects of strings.
constexpr JsonShape kStrings{JsonShape::Bit(JsonValue::Kind::kString)};
constexpr JsonShape kObjects{JsonShape::Bit(JsonValue::Kind::kObject), nullptr,
                             &kStrings};
constexpr JsonShape kArrays{JsonShape::Bit(JsonValue::Kind::kArray), &kObjects};
constexpr JsonShape kDocument{JsonShape::Bit(JsonValue::Kind::kObject), nullptr,
                              &kArrays};

// {"ops":[[[0,0,...],...],...]} of about `bytes`, within depth 4 and 1000
// items per array: unchecked, each "0," built a value of some 90 bytes.
std::string NestedArrays(std::size_t bytes) {
  std::string inner = "[";
  for (int i = 0; i < 999; ++i) inner += "0,";
  inner += "0]";
  std::string middle = "[";
  for (int i = 0; i < 999 && middle.size() < bytes; ++i) middle += inner + ",";
  middle += inner + "]";
  std::string doc = "{\"ops\":[";
  while (doc.size() + middle.size() < bytes) doc += middle + ",";
  return doc + middle + "]}";
}

TEST(JsonTest, AShapeStopsTheParseAtTheFirstWrongValue) {
  const std::string body = NestedArrays(4u << 20);
  ASSERT_GT(body.size(), 4000000u);
  JsonValue doc;
  JsonStats stats;
  const std::string error =
      ParseJson(body, &doc, {4, 1000, 8, 65536, &kDocument}, &stats);
  EXPECT_EQ(error, "an array where an object belongs at byte 8");
  EXPECT_EQ(stats.bytes, 8u) << "it read no further than the first wrong value";
  EXPECT_EQ(stats.values, 3u) << "the document, ops, and the refused item";
  EXPECT_EQ(doc.kind, JsonValue::Kind::kNull) << "nothing is kept";

  EXPECT_NE(ParseJson(R"({"ops":[{"op":"put","key":7}]})", &doc,
                      {4, 1000, 8, 65536, &kDocument})
                .find("a number where a string belongs"),
            std::string::npos);
  EXPECT_NE(
      ParseJson(R"([{"op":"put"}])", &doc, {4, 1000, 8, 65536, &kDocument})
          .find("an array where an object belongs at byte 0"),
      std::string::npos);
  ASSERT_EQ(ParseJson(R"({"ops":[{"op":"put","key":"k","value":""}]})", &doc,
                      {4, 1000, 8, 65536, &kDocument}, &stats),
            "");
  EXPECT_EQ(stats.values, 6u);
  EXPECT_EQ(doc.Find("ops")->items[0].Find("key")->text, "k");
}

TEST(JsonTest, TheValueBudgetBoundsWhatIsBuiltWhateverTheShape) {
  const std::string body = NestedArrays(1u << 20);
  JsonValue doc;
  JsonStats stats;
  EXPECT_EQ(ParseJson(body, &doc, {4, 1000, 8, 5000}, &stats)
                .rfind("more than 5000 values", 0),
            0u);
  EXPECT_EQ(stats.values, 5000u);
  EXPECT_LT(stats.bytes, 5000u * 2 + 64) << "it stopped at the budget";
  EXPECT_EQ(ParseJson("[1,[2,3],{\"a\":4}]", &doc, {4, 1000, 8, 7}), "");
  EXPECT_NE(ParseJson("[1,[2,3],{\"a\":4}]", &doc, {4, 1000, 8, 6}), "");
}

}  // namespace
}  // namespace fencepost::http
