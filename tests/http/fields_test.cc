#include "http/fields.h"

#include <gtest/gtest.h>

namespace fencepost::http {
namespace {

// StripHopByHop has its own tests (hop_by_hop_test.cc).

TEST(TrimOwsTest, StripsSpacesAndTabsAtBothEndsOnly) {
  EXPECT_EQ(TrimOws(" \t a b \t"), "a b");
  EXPECT_EQ(TrimOws(" \t "), "");
  EXPECT_EQ(TrimOws("x"), "x");
  static_assert(TrimOws(" y ") == "y", "usable in constant expressions");
}

}  // namespace
}  // namespace fencepost::http
