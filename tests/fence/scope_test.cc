#include "fence/scope.h"

#include <gtest/gtest.h>

namespace fencepost::fence {
namespace {

TEST(ScopesTest, KeyIsItsOwnFenceByDefault) {
  Scopes scopes({});
  EXPECT_EQ(scopes.FenceFor("orders/1"), "orders/1");
}

TEST(ScopesTest, LongestMatchingPrefixWins) {
  Scopes scopes({"tenants/", "tenants/acme/", "t"});
  EXPECT_EQ(scopes.FenceFor("tenants/acme/x"), "tenants/acme/");
  EXPECT_EQ(scopes.FenceFor("tenants/other/x"), "tenants/");
  EXPECT_EQ(scopes.FenceFor("top"), "t");
  EXPECT_EQ(scopes.FenceFor("orders/1"), "orders/1");
}

}  // namespace
}  // namespace fencepost::fence
