#include "client/duration.h"

#include <gtest/gtest.h>

#include <string>

namespace fencepost::client {
namespace {

using std::chrono::milliseconds;

TEST(DurationTest, ReadsANumberAndAUnit) {
  EXPECT_EQ(ParseDuration("500ms"), milliseconds(500));
  EXPECT_EQ(ParseDuration("10s"), milliseconds(10000));
  EXPECT_EQ(ParseDuration("2m"), milliseconds(120000));
  EXPECT_EQ(ParseDuration("1h"), milliseconds(3600000));
  EXPECT_EQ(ParseDuration("0s"), milliseconds(0));
  EXPECT_EQ(ParseDuration("007s"), milliseconds(7000));
}

TEST(DurationTest, RefusesEverythingElse) {
  for (const std::string text :
       {"", "10", "ms", "s", "-1s", "+1s", "1.5s", "10 s", " 10s", "10s ",
        "10S", "10sec", "10us", "1d", "s10", "10ms5", "0x10s",
        "9999999999999999999ms", "999999999999999999h"}) {
    EXPECT_EQ(ParseDuration(text), std::nullopt) << text;
  }
}

TEST(DurationTest, FormatsInTheLargestExactUnit) {
  EXPECT_EQ(FormatDuration(milliseconds(500)), "500ms");
  EXPECT_EQ(FormatDuration(milliseconds(10000)), "10s");
  EXPECT_EQ(FormatDuration(milliseconds(120000)), "2m");
  EXPECT_EQ(FormatDuration(milliseconds(1500)), "1500ms");
  EXPECT_EQ(FormatDuration(milliseconds(0)), "0ms");
}

}  // namespace
}  // namespace fencepost::client
