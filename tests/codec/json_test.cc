#include "codec/json.h"

#include <gtest/gtest.h>

#include <limits>
#include <string>

namespace fencepost::codec {
namespace {

constexpr std::size_t kAny = std::numeric_limits<std::size_t>::max();

// An object of `n` members "m0".."m<n-1>", then one named `last`.
std::string Object(int n, const std::string& last) {
  std::string text = "{";
  for (int i = 0; i < n; ++i) text += "\"m" + std::to_string(i) + "\":" + "1,";
  return text + "\"" + last + "\":2}";
}

// Objects larger than the server allows are read by the client library:
// names are still checked once each, whichever way they are looked up.
TEST(JsonReaderTest, ANameTwiceIsRefusedInObjectsOfAnySize) {
  const JsonLimits any{8, kAny, kAny, kAny, nullptr};
  for (int n : {1, 31, 32, 33, 100, 5000}) {
    JsonValue value;
    EXPECT_EQ(ParseJson(Object(n, "new"), &value, any), "") << n;
    EXPECT_EQ(value.members.size(), static_cast<std::size_t>(n) + 1);
    EXPECT_EQ(value.members.back().name, "new");
    for (int twice : {0, n / 2, n - 1}) {
      const std::string name = "m" + std::to_string(twice);
      EXPECT_NE(ParseJson(Object(n, name), &value, any).find("twice"),
                std::string::npos)
          << n << " " << name;
    }
  }
}

TEST(JsonReaderTest, NestingIsBoundedByTheLimitsDepth) {
  const JsonLimits limits{3, kAny, kAny, kAny, nullptr};
  JsonValue value;
  EXPECT_EQ(ParseJson("[[[1]]]", &value, limits), "");
  EXPECT_EQ(ParseJson("[[[[1]]]]", &value, limits),
            "nesting too deep at byte 3");
}

}  // namespace
}  // namespace fencepost::codec
