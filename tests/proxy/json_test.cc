#include "proxy/json.h"

#include <gtest/gtest.h>

namespace fencepost::proxy {
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

}  // namespace
}  // namespace fencepost::proxy
