// PostgresLeases against a real PostgreSQL server, started once for the
// suite by tests/coordination/postgres.sh.

#include "client/postgres_leases.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <latch>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "tests/coordination/shell.h"
#include "tests/testing/bounds.h"
#include "tests/testing/refusing_port.h"

namespace fencepost::client {
namespace {

using Clock = std::chrono::steady_clock;
using Outcome = LeaseAttempt::Outcome;
using std::chrono::milliseconds;

constexpr milliseconds kTimeout{5000};

// Runs postgres.sh with `args`; its stdout without the last newline, or
// nullopt when it failed.
std::optional<std::string> Script(const std::string& args) {
  int status = 0;
  std::string out =
      testing::Shell(std::string(FENCEPOST_POSTGRES_SH) + " " + args, &status);
  if (status != 0) return std::nullopt;
  if (!out.empty() && out.back() == '\n') out.pop_back();
  return out;
}

LeaseSpec Spec(std::string name, std::string holder,
               milliseconds ttl = milliseconds(10000)) {
  LeaseSpec spec;
  spec.name = std::move(name);
  spec.holder = std::move(holder);
  spec.ttl = ttl;
  return spec;
}

class PostgresLeasesTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    const char* tmp = std::getenv("TMPDIR");
    std::string pattern =
        std::string(tmp && *tmp ? tmp : "/tmp") + "/fencepost-pg.XXXXXX";
    if (mkdtemp(pattern.data()) == nullptr) return;
    dir_ = new std::string(pattern);
    const auto url = Script("start " + *dir_);
    url_ = new std::string(url.value_or(""));
  }
  static void TearDownTestSuite() {
    if (dir_ != nullptr) Script("stop " + *dir_);
    delete dir_;
    delete url_;
    dir_ = url_ = nullptr;
  }
  void SetUp() override {
    ASSERT_TRUE(url_ != nullptr && !url_->empty())
        << "postgres.sh could not start a server";
  }

  static std::string Url(const std::string& database = "postgres") {
    const std::string& url = *url_;
    return url.substr(0, url.rfind('/') + 1) + database;
  }
  static bool Sql(const std::string& statement) {
    return Script("sql " + *dir_ + " \"" + statement + "\"").has_value();
  }

  static inline std::string* dir_ = nullptr;
  static inline std::string* url_ = nullptr;
};

// Thaws the server even when an assertion returned early.
class Frozen {
 public:
  explicit Frozen(const std::string& dir) : dir_(dir) {
    frozen_ = Script("freeze " + dir_).has_value();
  }
  ~Frozen() { Script("thaw " + dir_); }
  bool ok() const { return frozen_; }

 private:
  std::string dir_;
  bool frozen_ = false;
};

TEST_F(PostgresLeasesTest, OneOfRacingCandidatesHoldsAndTheOthersAreTold) {
  // A fresh database: the candidates also race to create the table.
  ASSERT_TRUE(Sql("DROP DATABASE IF EXISTS race WITH (FORCE)"));
  ASSERT_TRUE(Sql("CREATE DATABASE race"));
  constexpr int kCandidates = 8;
  std::vector<std::unique_ptr<PostgresLeases>> candidates;
  for (int i = 0; i < kCandidates; ++i) {
    candidates.push_back(std::make_unique<PostgresLeases>(
        Url("race"), Spec("jobs/nightly", "c" + std::to_string(i))));
  }
  std::vector<LeaseAttempt> attempts(kCandidates);
  std::latch start(kCandidates);
  std::vector<std::thread> threads;
  for (int i = 0; i < kCandidates; ++i) {
    threads.emplace_back([&, i] {
      start.arrive_and_wait();
      attempts[i] = candidates[i]->Acquire(kTimeout);
    });
  }
  for (std::thread& thread : threads) thread.join();

  int held = -1;
  for (int i = 0; i < kCandidates; ++i) {
    ASSERT_NE(attempts[i].outcome, Outcome::kFailed) << attempts[i].detail;
    if (attempts[i].outcome == Outcome::kHeld) {
      EXPECT_EQ(held, -1) << "two holders";
      held = i;
    }
  }
  ASSERT_NE(held, -1);
  EXPECT_EQ(attempts[held].token, 1u);
  for (int i = 0; i < kCandidates; ++i) {
    if (i == held) continue;
    EXPECT_EQ(attempts[i].holder, "c" + std::to_string(held));
    EXPECT_NE(attempts[i].detail.find("c" + std::to_string(held)),
              std::string::npos)
        << attempts[i].detail;
  }
}

TEST_F(PostgresLeasesTest, RenewAndReacquireKeepTheToken) {
  PostgresLeases a(Url(), Spec("renew", "a"));
  const Clock::time_point before = Clock::now();
  const LeaseAttempt held = a.Acquire(kTimeout);
  ASSERT_EQ(held.outcome, Outcome::kHeld) << held.detail;
  EXPECT_GE(held.sent_at, before);
  EXPECT_LE(held.sent_at, Clock::now());
  EXPECT_EQ(held.ttl, milliseconds(10000));

  const LeaseAttempt renewed = a.Renew(held.token, kTimeout);
  ASSERT_EQ(renewed.outcome, Outcome::kHeld) << renewed.detail;
  EXPECT_EQ(renewed.token, held.token);
  EXPECT_GE(renewed.sent_at, held.sent_at);
  const LeaseAttempt again = a.Acquire(kTimeout);
  ASSERT_EQ(again.outcome, Outcome::kHeld) << again.detail;
  EXPECT_EQ(again.token, held.token);

  const LeaseAttempt wrong = a.Renew(held.token + 1, kTimeout);
  EXPECT_EQ(wrong.outcome, Outcome::kRefused);
  EXPECT_EQ(wrong.detail,
            "token " + std::to_string(held.token + 1) + " was never granted");

  PostgresLeases b(Url(), Spec("renew", "b"));
  const LeaseAttempt refused = b.Acquire(kTimeout);
  EXPECT_EQ(refused.outcome, Outcome::kRefused);
  EXPECT_EQ(refused.holder, "a");
}

TEST_F(PostgresLeasesTest, AfterAReleaseTheNextHolderGetsAHigherToken) {
  PostgresLeases a(Url(), Spec("release", "a"));
  PostgresLeases b(Url(), Spec("release", "b"));
  const LeaseAttempt first = a.Acquire(kTimeout);
  ASSERT_EQ(first.outcome, Outcome::kHeld) << first.detail;

  EXPECT_EQ(a.Release(first.token, kTimeout), "");
  EXPECT_EQ(a.Release(first.token, kTimeout), "released");
  const LeaseAttempt lost = a.Renew(first.token, kTimeout);
  EXPECT_EQ(lost.outcome, Outcome::kRefused);
  EXPECT_EQ(lost.detail, "released");

  const LeaseAttempt next = b.Acquire(kTimeout);
  ASSERT_EQ(next.outcome, Outcome::kHeld) << next.detail;
  EXPECT_GT(next.token, first.token);
  EXPECT_NE(b.Release(first.token, kTimeout), "") << "not b's token";
}

TEST_F(PostgresLeasesTest, AfterExpiryTheNextHolderGetsAHigherToken) {
  const milliseconds ttl(300);
  PostgresLeases a(Url(), Spec("expiry", "a", ttl));
  PostgresLeases b(Url(), Spec("expiry", "b", ttl));
  const LeaseAttempt first = a.Acquire(kTimeout);
  ASSERT_EQ(first.outcome, Outcome::kHeld) << first.detail;
  EXPECT_EQ(b.Acquire(kTimeout).outcome, Outcome::kRefused);

  std::this_thread::sleep_until(first.sent_at + ttl + milliseconds(100));
  const LeaseAttempt next = b.Acquire(kTimeout);
  ASSERT_EQ(next.outcome, Outcome::kHeld) << next.detail;
  EXPECT_GT(next.token, first.token);

  const LeaseAttempt lost = a.Renew(first.token, kTimeout);
  EXPECT_EQ(lost.outcome, Outcome::kRefused);
  EXPECT_EQ(lost.detail,
            "taken over: token " + std::to_string(next.token) + " held by 'b'");
  EXPECT_NE(a.Release(first.token, kTimeout), "");
  EXPECT_EQ(b.Renew(next.token, kTimeout).outcome, Outcome::kHeld);
}

TEST_F(PostgresLeasesTest, TheSameHolderAfterExpiryGetsAHigherToken) {
  const milliseconds ttl(300);
  PostgresLeases a(Url(), Spec("same-holder", "a", ttl));
  const LeaseAttempt first = a.Acquire(kTimeout);
  ASSERT_EQ(first.outcome, Outcome::kHeld) << first.detail;

  std::this_thread::sleep_until(first.sent_at + ttl + milliseconds(100));
  const LeaseAttempt expired = a.Renew(first.token, kTimeout);
  EXPECT_EQ(expired.outcome, Outcome::kRefused);
  EXPECT_EQ(expired.detail, "expired");

  const LeaseAttempt next = a.Acquire(kTimeout);
  ASSERT_EQ(next.outcome, Outcome::kHeld) << next.detail;
  EXPECT_GT(next.token, first.token);
  EXPECT_EQ(a.Renew(first.token, kTimeout).outcome, Outcome::kRefused);
}

TEST_F(PostgresLeasesTest, AFrozenServerFailsWithinTheTimeoutThenRecovers) {
  const milliseconds timeout(500);
  const auto slack = fencepost::testing::kNoHang;
  PostgresLeases a(Url(), Spec("frozen", "a"));
  const LeaseAttempt held = a.Acquire(kTimeout);
  ASSERT_EQ(held.outcome, Outcome::kHeld) << held.detail;
  {
    Frozen frozen(*dir_);
    ASSERT_TRUE(frozen.ok());
    Clock::time_point start = Clock::now();
    const LeaseAttempt renewed = a.Renew(held.token, timeout);
    EXPECT_EQ(renewed.outcome, Outcome::kFailed);
    EXPECT_LT(Clock::now() - start, timeout + slack);
    EXPECT_NE(renewed.detail.find("timed out"), std::string::npos)
        << renewed.detail;

    start = Clock::now();
    PostgresLeases fresh(Url(), Spec("frozen", "b"));
    const LeaseAttempt connecting = fresh.Acquire(timeout);
    EXPECT_EQ(connecting.outcome, Outcome::kFailed);
    EXPECT_LT(Clock::now() - start, timeout + slack);

    start = Clock::now();
    EXPECT_NE(a.Release(held.token, timeout), "");
    EXPECT_LT(Clock::now() - start, timeout + slack);
  }
  const LeaseAttempt after = a.Renew(held.token, kTimeout);
  ASSERT_EQ(after.outcome, Outcome::kHeld) << after.detail;
  EXPECT_EQ(after.token, held.token);
}

TEST_F(PostgresLeasesTest, AClosedConnectionIsReopened) {
  PostgresLeases a(Url(), Spec("reconnect", "a"));
  const LeaseAttempt held = a.Acquire(kTimeout);
  ASSERT_EQ(held.outcome, Outcome::kHeld) << held.detail;
  ASSERT_TRUE(
      Sql("SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
          " WHERE application_name = 'fencepost'"));
  // The call that finds the connection closed may fail; the next reconnects.
  LeaseAttempt renewed = a.Renew(held.token, kTimeout);
  if (renewed.outcome == Outcome::kFailed) {
    renewed = a.Renew(held.token, kTimeout);
  }
  ASSERT_EQ(renewed.outcome, Outcome::kHeld) << renewed.detail;
  EXPECT_EQ(renewed.token, held.token);
}

TEST_F(PostgresLeasesTest, SqlSpecialCharactersAreHarmless) {
  const std::string name = "x'); DROP TABLE fencepost_leases; -- $1 \\ %";
  const std::string holder = "o'Brien \"; SELECT 1; -- é";
  PostgresLeases a(Url(), Spec(name, holder));
  PostgresLeases b(Url(), Spec(name, "b' OR '1'='1"));
  const LeaseAttempt held = a.Acquire(kTimeout);
  ASSERT_EQ(held.outcome, Outcome::kHeld) << held.detail;
  const LeaseAttempt refused = b.Acquire(kTimeout);
  EXPECT_EQ(refused.outcome, Outcome::kRefused);
  EXPECT_EQ(refused.holder, holder);
  EXPECT_EQ(a.Renew(held.token, kTimeout).outcome, Outcome::kHeld);
  EXPECT_EQ(a.Release(held.token, kTimeout), "");
  const LeaseAttempt next = b.Acquire(kTimeout);
  ASSERT_EQ(next.outcome, Outcome::kHeld) << next.detail;
  EXPECT_GT(next.token, held.token);
}

TEST(PostgresLeasesOfflineTest, AnUnreachableServerFailsWithinTheTimeout) {
  const milliseconds timeout(500);
  const fencepost::testing::RefusingPort refusing;
  const std::string url =
      "postgres://postgres@127.0.0.1:" + std::to_string(refusing.port()) +
      "/postgres";
  PostgresLeases nobody(url, Spec("unreachable", "a"));
  Clock::time_point start = Clock::now();
  const LeaseAttempt refused = nobody.Acquire(timeout);
  EXPECT_EQ(refused.outcome, Outcome::kFailed);
  EXPECT_LT(Clock::now() - start, timeout + fencepost::testing::kNoHang);
  EXPECT_FALSE(refused.detail.empty());

  // An address nothing answers from (TEST-NET-1): silent or unreachable.
  PostgresLeases silent("postgres://postgres@192.0.2.1:5432/postgres",
                        Spec("unreachable", "a"));
  start = Clock::now();
  EXPECT_EQ(silent.Acquire(timeout).outcome, Outcome::kFailed);
  EXPECT_LT(Clock::now() - start, timeout + fencepost::testing::kNoHang);
}

TEST(PostgresLeasesOfflineTest, DescribeNamesTheServerWithoutThePassword) {
  const PostgresLeases a(
      "postgresql://fencepost:secret@db.example:6543/leases?sslmode=require",
      Spec("n", "a"));
  EXPECT_EQ(a.Describe(), "postgres db.example:6543/leases");
  EXPECT_EQ(a.spec().name, "n");
}

TEST(PostgresLeasesOfflineTest, BadArgumentsThrow) {
  const std::string url = "postgres://postgres@127.0.0.1:5432/postgres";
  EXPECT_THROW(PostgresLeases("http://127.0.0.1:5432/x", Spec("n", "a")),
               std::invalid_argument);
  EXPECT_THROW(PostgresLeases("127.0.0.1:5432", Spec("n", "a")),
               std::invalid_argument);
  EXPECT_THROW(PostgresLeases(url + "?no_such_option=1", Spec("n", "a")),
               std::invalid_argument);
  EXPECT_THROW(PostgresLeases(url, Spec("", "a")), std::invalid_argument);
  EXPECT_THROW(PostgresLeases(url, Spec("n", "")), std::invalid_argument);
  EXPECT_THROW(PostgresLeases(url, Spec(std::string("n\0m", 3), "a")),
               std::invalid_argument);
  EXPECT_THROW(PostgresLeases(url, Spec("n", "a", milliseconds(0))),
               std::invalid_argument);
  EXPECT_THROW(PostgresLeases(url, Spec("n", "a", milliseconds(-1))),
               std::invalid_argument);
  EXPECT_NO_THROW(PostgresLeases("postgresql://h/db", Spec("n", "a")));
}

}  // namespace
}  // namespace fencepost::client
