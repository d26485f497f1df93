// EtcdLeases against a real etcd (Debian's etcd-server), started for the
// suite by tests/coordination/etcd.sh on free ports of 127.0.0.1.
#include "client/etcd_leases.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <chrono>
#include <cstdio>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "tests/client/helpers.h"
#include "tests/coordination/shell.h"
#include "tests/testing/bounds.h"

namespace fencepost::client {
namespace {

using std::chrono::milliseconds;
using Outcome = LeaseAttempt::Outcome;

using fencepost::testing::ShellLine;

class EtcdLeasesTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    char pattern[] = "/tmp/fencepost-etcd-XXXXXX";
    dir_ = ::mkdtemp(pattern);
    url_ =
        ShellLine(std::string(FENCEPOST_ETCD_SH) + " start " + dir_ + "/etcd");
  }
  static void TearDownTestSuite() {
    ShellLine(std::string(FENCEPOST_ETCD_SH) + " stop " + dir_ + "/etcd");
    ShellLine("rm -rf " + dir_);
  }
  void SetUp() override { ASSERT_FALSE(url_.empty()) << "etcd did not start"; }

  // "127.0.0.1:PORT" of the running etcd.
  static std::string HostPort() { return url_.substr(7); }
  static std::uint16_t Port() {
    return static_cast<std::uint16_t>(
        std::stoi(url_.substr(url_.rfind(':') + 1)));
  }

  static std::unique_ptr<EtcdLeases> Candidate(
      const std::string& name, const std::string& holder,
      milliseconds ttl = milliseconds(5000), const std::string& url = url_) {
    return std::make_unique<EtcdLeases>(url, LeaseSpec{name, holder, ttl});
  }

  static std::string dir_;
  static std::string url_;
};

std::string EtcdLeasesTest::dir_;
std::string EtcdLeasesTest::url_;

constexpr milliseconds kTimeout{3000};

TEST_F(EtcdLeasesTest, OneOfSeveralCandidatesHoldsTheOthersAreToldWho) {
  std::vector<std::unique_ptr<EtcdLeases>> candidates;
  for (int i = 0; i < 6; ++i) {
    candidates.push_back(Candidate("race", "c" + std::to_string(i)));
  }
  std::vector<LeaseAttempt> answers(candidates.size());
  std::vector<std::thread> threads;
  for (std::size_t i = 0; i < candidates.size(); ++i) {
    threads.emplace_back(
        [&, i] { answers[i] = candidates[i]->Acquire(kTimeout); });
  }
  for (std::thread& t : threads) t.join();
  std::string winner;
  for (std::size_t i = 0; i < answers.size(); ++i) {
    if (answers[i].outcome == Outcome::kHeld) {
      EXPECT_TRUE(winner.empty()) << "two holders: " << winner << ", c" << i;
      winner = "c" + std::to_string(i);
      EXPECT_GT(answers[i].token, 0u);
    }
  }
  ASSERT_FALSE(winner.empty());
  for (const LeaseAttempt& answer : answers) {
    if (answer.outcome == Outcome::kHeld) continue;
    EXPECT_EQ(answer.outcome, Outcome::kRefused) << answer.detail;
    EXPECT_EQ(answer.holder, winner);
  }
}

TEST_F(EtcdLeasesTest, RenewalsAndAcquiresByTheHolderKeepTheToken) {
  const auto a = Candidate("keep", "a");
  const LeaseAttempt held = a->Acquire(kTimeout);
  ASSERT_EQ(held.outcome, Outcome::kHeld) << held.detail;
  EXPECT_EQ(held.ttl, milliseconds(5000));
  for (int i = 0; i < 3; ++i) {
    const LeaseAttempt renewed = a->Renew(held.token, kTimeout);
    ASSERT_EQ(renewed.outcome, Outcome::kHeld) << renewed.detail;
    EXPECT_EQ(renewed.token, held.token);
    EXPECT_GE(renewed.sent_at, held.sent_at);
  }
  const LeaseAttempt again = a->Acquire(kTimeout);
  ASSERT_EQ(again.outcome, Outcome::kHeld) << again.detail;
  EXPECT_EQ(again.token, held.token);
  EXPECT_EQ(a->Release(held.token, kTimeout), "");
}

TEST_F(EtcdLeasesTest, ReleaseHandsTheLeaseOnWithAHigherToken) {
  const auto a = Candidate("handover", "a");
  const auto b = Candidate("handover", "b");
  const LeaseAttempt first = a->Acquire(kTimeout);
  ASSERT_EQ(first.outcome, Outcome::kHeld) << first.detail;
  EXPECT_EQ(b->Acquire(kTimeout).outcome, Outcome::kRefused);
  EXPECT_EQ(a->Release(first.token, kTimeout), "");
  const LeaseAttempt second = b->Acquire(kTimeout);
  ASSERT_EQ(second.outcome, Outcome::kHeld) << second.detail;
  EXPECT_GT(second.token, first.token);
  EXPECT_EQ(a->Renew(first.token, kTimeout).outcome, Outcome::kRefused);
  EXPECT_NE(a->Release(first.token, kTimeout), "");
  EXPECT_EQ(b->Release(second.token, kTimeout), "");
}

// A's first endpoint is a relay that freezes, as a partition would: its
// renewal gets no answer within the timeout, the lease runs out in etcd,
// B gets it with a higher token, and A's next renewal (on the next
// endpoint) learns it is lost.
TEST_F(EtcdLeasesTest, AnExpiredLeaseGoesToTheNextWithAHigherToken) {
  testing::Relay relay(Port());
  const std::string a_url =
      "etcd://127.0.0.1:" + std::to_string(relay.port()) + "," + HostPort();
  const auto a = Candidate("expiry", "a", milliseconds(1000), a_url);
  const auto b = Candidate("expiry", "b", milliseconds(1000));
  const LeaseAttempt first = a->Acquire(kTimeout);
  ASSERT_EQ(first.outcome, Outcome::kHeld) << first.detail;
  relay.Freeze();
  const auto before = std::chrono::steady_clock::now();
  const LeaseAttempt unanswered = a->Renew(first.token, milliseconds(300));
  EXPECT_EQ(unanswered.outcome, Outcome::kFailed);
  EXPECT_LT(std::chrono::steady_clock::now() - before,
            milliseconds(300) + fencepost::testing::kNoHang);
  LeaseAttempt second;
  EXPECT_TRUE(testing::Eventually(
      [&] {
        second = b->Acquire(kTimeout);
        return second.outcome == Outcome::kHeld;
      },
      std::chrono::seconds(10)));
  EXPECT_GT(second.token, first.token);
  const LeaseAttempt late = a->Renew(first.token, kTimeout);
  EXPECT_EQ(late.outcome, Outcome::kRefused) << late.detail;
  EXPECT_EQ(b->Release(second.token, kTimeout), "");
}

TEST_F(EtcdLeasesTest, UnreachableEndpointsFailInTimeAndTheNextIsTried) {
  testing::SilentListener silent;
  const auto mute =
      Candidate("mute", "a", milliseconds(5000),
                "etcd://127.0.0.1:" + std::to_string(silent.port()));
  const auto before = std::chrono::steady_clock::now();
  const LeaseAttempt answer = mute->Acquire(milliseconds(300));
  EXPECT_EQ(answer.outcome, Outcome::kFailed);
  EXPECT_TRUE(answer.retryable);
  EXPECT_LT(std::chrono::steady_clock::now() - before,
            milliseconds(300) + fencepost::testing::kNoHang);

  const testing::RefusingPort refusing;
  const auto failover = Candidate(
      "failover", "a", milliseconds(5000),
      "etcd://127.0.0.1:" + std::to_string(refusing.port()) + "," + HostPort());
  const LeaseAttempt held = failover->Acquire(kTimeout);
  ASSERT_EQ(held.outcome, Outcome::kHeld) << held.detail;
  EXPECT_EQ(failover->Release(held.token, kTimeout), "");
}

TEST_F(EtcdLeasesTest, TheKeyIsThePrefixAndTheNameAsTheyAre) {
  EXPECT_EQ(Candidate("jobs/a", "x")->key(), "fencepost/leases/jobs/a");
  EXPECT_EQ(
      Candidate("../b", "x", milliseconds(1000), "etcd://127.0.0.1:1/teams/x/")
          ->key(),
      "teams/x/../b");
  EXPECT_EQ(
      Candidate("a", "x", milliseconds(1000), "etcds://h:2,h:3")->Describe(),
      "etcd h:2,h:3");
}

TEST(EtcdLeasesUrlTest, RefusesBadUrlsAndSpecs) {
  for (const std::string url :
       {"http://127.0.0.1:2379", "etcd://", "etcd://127.0.0.1",
        "etcd://127.0.0.1:2379,", "etcd://127.0.0.1:99999",
        "etcd://user@127.0.0.1:2379"}) {
    EXPECT_THROW(EtcdLeases(url, LeaseSpec{"n", "h", milliseconds(1000)}),
                 std::invalid_argument)
        << url;
  }
  EXPECT_THROW(EtcdLeases("etcd://127.0.0.1:2379",
                          LeaseSpec{"", "h", milliseconds(1000)}),
               std::invalid_argument);
  EXPECT_THROW(
      EtcdLeases("etcd://127.0.0.1:2379", LeaseSpec{"n", "h", milliseconds(0)}),
      std::invalid_argument);
}

}  // namespace
}  // namespace fencepost::client
