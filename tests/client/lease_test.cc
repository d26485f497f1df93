// Client lease calls against the real binary (SPEC "Leases").

#include <gtest/gtest.h>

#include <chrono>

#include "client/client.h"
#include "client/documents.h"
#include "tests/client/helpers.h"
#include "tests/testing/server_process.h"
#include "tests/testing/temp_dir.h"

namespace fencepost::client {
namespace {

using fencepost::testing::ServerProcess;
using fencepost::testing::TempDir;
using std::chrono::milliseconds;

std::optional<Lease> LeaseOf(const Result& result) {
  if (!result.ok() || result.response.status != 200) return std::nullopt;
  return ParseLease(result.response.body);
}

TEST(LeaseTest, AcquireRenewReleaseAndTakeOver) {
  TempDir dir;
  ServerProcess server(dir / "data");
  Client admin(testing::AdminOptions(server));

  EXPECT_EQ(admin.GetLease("jobs/nightly").response.status, 404);

  const auto a =
      LeaseOf(admin.AcquireLease("jobs/nightly", "a", milliseconds(5000)));
  ASSERT_TRUE(a);
  EXPECT_EQ(a->name, "jobs/nightly");
  EXPECT_EQ(a->holder, "a");
  EXPECT_GE(a->token, 1u);
  EXPECT_EQ(a->ttl_ms, 5000);
  EXPECT_GT(a->expires_in_ms, 0);
  EXPECT_LE(a->expires_in_ms, 5000);

  const auto renewed =
      LeaseOf(admin.AcquireLease("jobs/nightly", "a", milliseconds(5000)));
  ASSERT_TRUE(renewed);
  EXPECT_EQ(renewed->token, a->token) << "a renewal keeps the token";

  const Result refused =
      admin.AcquireLease("jobs/nightly", "b", milliseconds(5000));
  ASSERT_TRUE(refused.ok()) << refused.detail;
  EXPECT_EQ(refused.response.status, 409);
  const auto held = ParseProblem(refused.response.body);
  ASSERT_TRUE(held) << refused.response.body;
  EXPECT_EQ(held->slug(), "lease-held");
  EXPECT_EQ(held->holder, "a");
  ASSERT_TRUE(held->expires_in_ms);
  EXPECT_GT(*held->expires_in_ms, 0);

  const Result wrong_token =
      admin.ReleaseLease("jobs/nightly", "a", a->token + 1);
  EXPECT_EQ(wrong_token.response.status, 409);
  const auto not_held = ParseProblem(wrong_token.response.body);
  ASSERT_TRUE(not_held);
  EXPECT_EQ(not_held->slug(), "lease-not-held");
  EXPECT_EQ(admin.ReleaseLease("jobs/nightly", "b", a->token).response.status,
            409);
  EXPECT_EQ(admin.ReleaseLease("jobs/nightly", "a", a->token).response.status,
            204);

  const auto released = LeaseOf(admin.GetLease("jobs/nightly"));
  ASSERT_TRUE(released);
  EXPECT_FALSE(released->holder);

  const auto b =
      LeaseOf(admin.AcquireLease("jobs/nightly", "b", milliseconds(5000)));
  ASSERT_TRUE(b);
  EXPECT_GT(b->token, a->token) << "a grant to a new holder raises the token";
  EXPECT_GT(b->transitions, a->transitions);

  // The grant raised the lease's fence: the old holder's writes are refused.
  const auto fence = ParseFence(admin.GetFence("jobs/nightly").response.body);
  ASSERT_TRUE(fence);
  EXPECT_EQ(fence->token, b->token);
  Client data(testing::Options(testing::DataUrl(server)));
  EXPECT_EQ(data.Put("jobs/nightly", a->token, "stale").response.status, 409);
  EXPECT_EQ(data.Put("jobs/nightly", b->token, "fresh").response.status, 201);
}

TEST(LeaseTest, AGrantStartsAboveTheFence) {
  TempDir dir;
  ServerProcess server(dir / "data");
  Client admin(testing::AdminOptions(server));
  ASSERT_EQ(admin.Bump("locks/x", 41).response.status / 100, 2);
  const auto lease =
      LeaseOf(admin.AcquireLease("locks/x", "h", milliseconds(1000)));
  ASSERT_TRUE(lease);
  EXPECT_EQ(lease->token, 42u);
}

TEST(LeaseTest, AnExpiredLeaseGoesToTheNextHolder) {
  TempDir dir;
  ServerProcess server(dir / "data");
  Client admin(testing::AdminOptions(server));
  // Long enough that the next request still finds it on a loaded machine.
  const auto a = LeaseOf(admin.AcquireLease("l", "a", milliseconds(1000)));
  ASSERT_TRUE(a);
  EXPECT_EQ(admin.AcquireLease("l", "b", milliseconds(200)).response.status,
            409);
  std::optional<Lease> b;
  EXPECT_TRUE(testing::Eventually(
      [&] {
        b = LeaseOf(admin.AcquireLease("l", "b", milliseconds(200)));
        return b.has_value();
      },
      milliseconds(5000)));
  ASSERT_TRUE(b);
  EXPECT_GT(b->token, a->token);
}

TEST(LeaseTest, BadRequestsAre400) {
  TempDir dir;
  ServerProcess server(dir / "data");
  Client admin(testing::AdminOptions(server));
  EXPECT_EQ(admin.AcquireLease("l", "", milliseconds(1000)).response.status,
            400);
  EXPECT_EQ(admin.AcquireLease("l", "h", milliseconds(99)).response.status,
            400);
  EXPECT_EQ(admin.AcquireLease("l", "h", milliseconds(3600001)).response.status,
            400);
  EXPECT_EQ(admin.AcquireLease("a//b", "h", milliseconds(1000)).response.status,
            400);
  EXPECT_EQ(admin.Send("PUT", "/v1/leases/l", {}, "not json").response.status,
            400);
}

// SIGKILL right after each grant's answer: every acknowledged grant
// survives with its holder and token, tokens never repeat or go down, and a
// long lease keeps its holder across every restart.
TEST(LeaseTest, GrantsSurviveSigkillBetweenThem) {
  TempDir dir;
  std::uint64_t last = 0, keeper_token = 0;
  std::string last_holder;
  for (int round = 0; round < 6; ++round) {
    ServerProcess server(dir / "data");
    Client admin(testing::AdminOptions(server));
    if (round == 0) {
      const auto keeper =
          LeaseOf(admin.AcquireLease("keeper", "k", milliseconds(600000)));
      ASSERT_TRUE(keeper);
      keeper_token = keeper->token;
    } else {
      // What the last round was told before the kill is still so.
      const auto churn = LeaseOf(admin.GetLease("churn"));
      ASSERT_TRUE(churn) << "round " << round;
      EXPECT_EQ(churn->token, last);
      EXPECT_EQ(churn->holder, last_holder) << "held, renewed at start";
      const auto fence = ParseFence(admin.GetFence("churn").response.body);
      ASSERT_TRUE(fence);
      EXPECT_EQ(fence->token, last) << "the grant's fence survived with it";
      ASSERT_EQ(admin.ReleaseLease("churn", last_holder, last).response.status,
                204);
    }
    const auto keeper = LeaseOf(admin.GetLease("keeper"));
    ASSERT_TRUE(keeper);
    EXPECT_EQ(keeper->holder, "k");
    EXPECT_EQ(keeper->token, keeper_token);
    EXPECT_EQ(admin.AcquireLease("keeper", "thief", milliseconds(1000))
                  .response.status,
              409);
    const std::string holder = "h" + std::to_string(round);
    const auto granted =
        LeaseOf(admin.AcquireLease("churn", holder, milliseconds(60000)));
    ASSERT_TRUE(granted);
    EXPECT_GT(granted->token, last) << "round " << round;
    last = granted->token;
    last_holder = holder;
    server.Kill();
  }
}

}  // namespace
}  // namespace fencepost::client
