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

// PlanScopes: which scope changes may start, and what is recorded.
TEST(ScopePlanTest, EachRuleOfAScopeChange) {
  struct Case {
    const char* what;
    std::vector<std::string> configured;
    std::vector<RecordedScope> recorded;
    bool refused;
    ScopeRecord record;
  };
  const std::vector<Case> cases = {
      {"nothing before, nothing now", {}, {}, false, {}},
      {"a new scope is recorded", {"orders/"}, {}, false, {{"orders/"}, {}}},
      {"the same scopes again",
       {"orders/"},
       {{"orders/", 35}},
       false,
       {{"orders/"}, {}}},
      {"a removed scope with a fence refuses",
       {},
       {{"orders/", 35}},
       true,
       {{}, {"orders/"}}},
      {"a removed scope that never had a fence goes",
       {},
       {{"orders/", std::nullopt}},
       false,
       {}},
      {"a removed scope a wider one covers is retired",
       {"orders/"},
       {{"orders/eu/", 9}},
       false,
       {{"orders/"}, {"orders/eu/"}}},
      {"a narrower scope does not cover a removed wider one",
       {"orders/eu/"},
       {{"orders/", 9}},
       true,
       {{"orders/eu/"}, {"orders/"}}},
  };
  for (const Case& c : cases) {
    const ScopePlan plan = PlanScopes(Scopes(c.configured), c.recorded);
    EXPECT_EQ(!plan.refusal.empty(), c.refused)
        << c.what << ": " << plan.refusal;
    EXPECT_EQ(plan.record.served, c.record.served) << c.what;
    EXPECT_EQ(plan.record.retired, c.record.retired) << c.what;
    if (c.refused) {
      EXPECT_NE(plan.refusal.find(c.recorded.front().name), std::string::npos)
          << plan.refusal;
    }
  }
}

TEST(ScopeRecordTest, RoundTripsAndRefusesWhatItDidNotWrite) {
  const ScopeRecord record{{"a/", "orders/"}, {"orders/eu/"}};
  EXPECT_EQ(DecodeScopeRecord(EncodeScopeRecord(record)), record);
  EXPECT_EQ(DecodeScopeRecord(""), ScopeRecord{});
  EXPECT_EQ(DecodeScopeRecord(std::string("orders/\0", 8)), std::nullopt);
  EXPECT_EQ(DecodeScopeRecord(std::string("s\0", 2)), std::nullopt);
  EXPECT_EQ(DecodeScopeRecord("sorders/"), std::nullopt);
}

// CarvedFrom: a new scope inherits the fence of the served scope that
// guarded its keys; one served before inherits nothing (its own leader
// may be below the wider scope's).
TEST(ScopeFloorTest, ANewScopeIsCarvedFromTheLongestServedPrefix) {
  const ScopeRecord last{{"o", "orders/"}, {"orders/eu/x/"}};
  EXPECT_EQ(CarvedFrom(last, "orders/eu/"), "orders/");
  EXPECT_EQ(CarvedFrom(last, "orders/"), std::nullopt);  // served
  EXPECT_EQ(CarvedFrom(last, "other/"), "o");
  EXPECT_EQ(CarvedFrom(last, "jobs/"), std::nullopt);
  EXPECT_EQ(CarvedFrom({}, "orders/eu/"), std::nullopt);
}

// ScopeFloor: a scope starts at the highest fence that guarded its keys.
TEST(ScopeFloorTest, AScopeStartsAtTheHighestFenceItGuards) {
  const Scopes scopes({"orders/", "orders/eu/"});
  const std::vector<NamedToken> under = {{"orders/", 3},
                                         {"orders/1", 35},
                                         {"orders/2", 7},
                                         {"orders/eu/", 90},
                                         {"orders/eu/1", 99}};
  // orders/eu/ and what it guards are not orders/'s.
  EXPECT_EQ(ScopeFloor(scopes, "orders/", 3, under), Token{35});
  EXPECT_EQ(ScopeFloor(scopes, "orders/", std::nullopt, under), Token{35});
  EXPECT_EQ(ScopeFloor(scopes, "orders/", 35, under), std::nullopt);
  EXPECT_EQ(ScopeFloor(scopes, "orders/", 40, under), std::nullopt);
  EXPECT_EQ(ScopeFloor(scopes, "orders/eu/", 90, under), Token{99});
  EXPECT_EQ(ScopeFloor(scopes, "orders/", std::nullopt, {}), std::nullopt);
  // The fence of the scope it was carved out of counts too.
  EXPECT_EQ(ScopeFloor(scopes, "orders/eu/", 90, under, 120), Token{120});
  EXPECT_EQ(ScopeFloor(scopes, "orders/eu/", std::nullopt, {}, 100),
            Token{100});
  // A former scope under a configured one counts like any fence it guards.
  EXPECT_EQ(ScopeFloor(Scopes({"orders/"}), "orders/", 3, under), Token{99});
}

}  // namespace
}  // namespace fencepost::fence
