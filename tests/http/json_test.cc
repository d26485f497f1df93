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

}  // namespace
}  // namespace fencepost::http
