// ZooKeeperLeases against a real ZooKeeper server, started for the suite by
// tests/coordination/zookeeper.sh.

#include "client/zookeeper_leases.h"

#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "tests/coordination/shell.h"
#include "tests/testing/bounds.h"
#include "tests/testing/freeze.h"

namespace fencepost::client {
namespace {

using Clock = std::chrono::steady_clock;
using Outcome = LeaseAttempt::Outcome;
using std::chrono::milliseconds;

constexpr milliseconds kTimeout{5000};

using fencepost::testing::Freeze;
using fencepost::testing::Shell;

std::string Script(const std::string& args) {
  return Shell(std::string(FENCEPOST_ZOOKEEPER_SH) + " " + args + " 2>&1");
}

std::string TestName() {
  return ::testing::UnitTest::GetInstance()->current_test_info()->name();
}

LeaseSpec Spec(const std::string& name, const std::string& holder,
               milliseconds ttl = milliseconds(4000)) {
  return LeaseSpec{name, holder, ttl};
}

std::string Describe(const LeaseAttempt& attempt) {
  std::ostringstream out;
  out << "outcome " << static_cast<int>(attempt.outcome) << ", token "
      << attempt.token << ", holder \"" << attempt.holder << "\", detail \""
      << attempt.detail << "\"";
  return out.str();
}

class ZooKeeperLeasesTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    const char* tmp = std::getenv("TMPDIR");
    std::string pattern =
        std::string(tmp != nullptr && *tmp != '\0' ? tmp : "/tmp") +
        "/fencepost-zk-XXXXXX";
    if (mkdtemp(pattern.data()) == nullptr) {
      start_output_ = "mkdtemp failed";
      return;
    }
    dir_ = pattern;
    start_output_ = Script("start " + dir_);
    if (start_output_.starts_with("zk://") && start_output_.ends_with('\n')) {
      url_ = start_output_.substr(0, start_output_.size() - 1);
    }
  }

  static void TearDownTestSuite() {
    if (dir_.empty()) return;
    Script("stop " + dir_);
    std::error_code ignored;
    std::filesystem::remove_all(dir_, ignored);
  }

  void SetUp() override {
    ASSERT_FALSE(url_.empty()) << "ZooKeeper did not start: " << start_output_;
  }

  static pid_t ServerPid() {
    std::string pid = Shell("cat '" + dir_ + "/server.pid'");
    return static_cast<pid_t>(std::atoi(pid.c_str()));
  }

  static std::string dir_;
  static std::string url_;
  static std::string start_output_;
};

std::string ZooKeeperLeasesTest::dir_;
std::string ZooKeeperLeasesTest::url_;
std::string ZooKeeperLeasesTest::start_output_;

TEST(ZooKeeperLeasesUrlTest, RefusesBadUrlsNamesAndTtls) {
  const LeaseSpec ok = Spec("jobs/nightly", "a");
  for (const char* url : {
           "http://127.0.0.1:2181",
           "zk://",
           "zk:///fencepost",
           "zk://127.0.0.1",
           "zk://127.0.0.1:",
           "zk://127.0.0.1:0",
           "zk://127.0.0.1:65536",
           "zk://127.0.0.1:21x",
           "zk://:2181",
           "zk://127.0.0.1:2181,",
           "zk://user@127.0.0.1:2181",
           "zk://127.0.0.1:2181?x=1",
           "zk://127.0.0.1:2181#x",
           "zk://[::1:2181",
           "zk://127.0.0.1:2181/",
           "zk://127.0.0.1:2181/a/",
           "zk://127.0.0.1:2181/a//b",
           "zk://127.0.0.1:2181/a/../b",
           "zk://127.0.0.1:2181/./b",
           "zk://127.0.0.1:2181/zookeeper/quota",
           "zk://127.0.0.1:2181/a\nb",
       }) {
    EXPECT_THROW(ZooKeeperLeases(url, ok), std::invalid_argument) << url;
  }
  try {
    ZooKeeperLeases("zk://127.0.0.1", ok);
    ADD_FAILURE() << "no exception";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("port"), std::string::npos)
        << e.what();
  }
  EXPECT_THROW(ZooKeeperLeases("zk://127.0.0.1:2181", Spec("", "a")),
               std::invalid_argument);
  EXPECT_THROW(
      ZooKeeperLeases("zk://127.0.0.1:2181", Spec("x", "a", milliseconds(0))),
      std::invalid_argument);
  EXPECT_THROW(
      ZooKeeperLeases("zk://127.0.0.1:2181", Spec("x", "a", milliseconds(-1))),
      std::invalid_argument);
}

TEST(ZooKeeperLeasesUrlTest, AcceptsHostListsAndPaths) {
  const LeaseSpec spec = Spec("x", "a");
  EXPECT_EQ(ZooKeeperLeases("zk://127.0.0.1:2181", spec).Describe(),
            "zookeeper 127.0.0.1:2181/fencepost/leases");
  EXPECT_EQ(
      ZooKeeperLeases("zk://zk-1:2181,zk-2.example:2182,[::1]:2183/a/b", spec)
          .Describe(),
      "zookeeper zk-1:2181,zk-2.example:2182,[::1]:2183/a/b");
  EXPECT_EQ(ZooKeeperLeases("zk://127.0.0.1:2181/a", spec).election_path(),
            "/a/x");
}

TEST(ZooKeeperLeasesUrlTest, NamesBecomeOneEscapedStepBelowThePath) {
  auto path = [](const std::string& name) {
    return ZooKeeperLeases("zk://127.0.0.1:2181", Spec(name, "a"))
        .election_path();
  };
  EXPECT_EQ(path("demo/race"), "/fencepost/leases/demo%2Frace");
  EXPECT_EQ(path("demo%2Frace"), "/fencepost/leases/demo%252Frace");
  EXPECT_EQ(path("."), "/fencepost/leases/%2E");
  EXPECT_EQ(path(".."), "/fencepost/leases/%2E%2E");
  EXPECT_EQ(path("..."), "/fencepost/leases/...");
  EXPECT_EQ(path("../../zookeeper"), "/fencepost/leases/..%2F..%2Fzookeeper");
  EXPECT_EQ(path("a b\n\xc3\xa9"), "/fencepost/leases/a%20b%0A%C3%A9");
  EXPECT_EQ(path("Az09-._~"), "/fencepost/leases/Az09-._~");
}

TEST_F(ZooKeeperLeasesTest, OneCandidateHoldsTheOthersAreToldTheHolder) {
  ZooKeeperLeases a(url_, Spec(TestName(), "a"));
  ZooKeeperLeases b(url_, Spec(TestName(), "b"));
  ZooKeeperLeases c(url_, Spec(TestName(), "c"));

  const auto before = Clock::now();
  const LeaseAttempt held = a.Acquire(kTimeout);
  ASSERT_EQ(held.outcome, Outcome::kHeld) << Describe(held);
  EXPECT_GT(held.token, 0u);
  EXPECT_GE(held.sent_at, before);
  EXPECT_LE(held.sent_at, Clock::now());
  EXPECT_EQ(held.ttl, milliseconds(4000));

  for (ZooKeeperLeases* other : {&b, &c, &b}) {
    const LeaseAttempt refused = other->Acquire(kTimeout);
    EXPECT_EQ(refused.outcome, Outcome::kRefused) << Describe(refused);
    EXPECT_EQ(refused.holder, "a");
  }

  const LeaseAttempt again = a.Acquire(kTimeout);
  ASSERT_EQ(again.outcome, Outcome::kHeld) << Describe(again);
  EXPECT_EQ(again.token, held.token) << "the same node, the same token";

  const LeaseAttempt renewed = a.Renew(held.token, kTimeout);
  ASSERT_EQ(renewed.outcome, Outcome::kHeld) << Describe(renewed);
  EXPECT_EQ(renewed.token, held.token);
  EXPECT_GT(renewed.sent_at, held.sent_at);
  EXPECT_EQ(renewed.ttl, milliseconds(4000));

  EXPECT_EQ(a.Renew(held.token + 1, kTimeout).outcome, Outcome::kRefused);
  EXPECT_EQ(b.Renew(held.token, kTimeout).outcome, Outcome::kRefused)
      << "b holds a node, but not the lease";
  EXPECT_NE(b.Release(held.token, kTimeout), "");
  EXPECT_EQ(a.Renew(held.token, kTimeout).outcome, Outcome::kHeld);
}

TEST_F(ZooKeeperLeasesTest, ReleaseHandsTheLeaseToTheNextCandidate) {
  ZooKeeperLeases a(url_, Spec(TestName(), "a"));
  ZooKeeperLeases b(url_, Spec(TestName(), "b"));
  ZooKeeperLeases c(url_, Spec(TestName(), "c"));

  const LeaseAttempt first = a.Acquire(kTimeout);
  ASSERT_EQ(first.outcome, Outcome::kHeld) << Describe(first);
  ASSERT_EQ(b.Acquire(kTimeout).outcome, Outcome::kRefused);
  ASSERT_EQ(c.Acquire(kTimeout).outcome, Outcome::kRefused);

  EXPECT_NE(a.Release(first.token + 1, kTimeout), "") << "another token";
  EXPECT_EQ(a.Renew(first.token, kTimeout).outcome, Outcome::kHeld);
  EXPECT_EQ(a.Release(first.token, kTimeout), "");
  EXPECT_EQ(a.Renew(first.token, kTimeout).outcome, Outcome::kRefused);
  EXPECT_NE(a.Release(first.token, kTimeout), "") << "released already";

  // b's node was made before c's: b is next.
  const LeaseAttempt second = b.Acquire(kTimeout);
  ASSERT_EQ(second.outcome, Outcome::kHeld) << Describe(second);
  EXPECT_GT(second.token, first.token);
  const LeaseAttempt refused = c.Acquire(kTimeout);
  EXPECT_EQ(refused.outcome, Outcome::kRefused) << Describe(refused);
  EXPECT_EQ(refused.holder, "b");

  // After Release the object campaigns again, behind c.
  const LeaseAttempt back = a.Acquire(kTimeout);
  EXPECT_EQ(back.outcome, Outcome::kRefused) << Describe(back);
  EXPECT_EQ(back.holder, "b");
  EXPECT_EQ(b.Release(second.token, kTimeout), "");
  const LeaseAttempt third = c.Acquire(kTimeout);
  ASSERT_EQ(third.outcome, Outcome::kHeld) << Describe(third);
  EXPECT_GT(third.token, second.token);
  EXPECT_EQ(a.Acquire(kTimeout).holder, "c");
}

// A child process acquires, is frozen with SIGSTOP until its session
// expired, and is asked to renew once it runs again.
class FrozenLeader {
 public:
  FrozenLeader(const std::string& url, const std::string& name) {
    int to_child[2];
    int from_child[2];
    if (pipe(to_child) != 0 || pipe(from_child) != 0) {
      throw std::runtime_error("pipe failed");
    }
    pid_ = fork();
    if (pid_ < 0) throw std::runtime_error("fork failed");
    if (pid_ == 0) {
      close(to_child[1]);
      close(from_child[0]);
      RunChild(url, name, to_child[0], from_child[1]);
    }
    close(to_child[0]);
    close(from_child[1]);
    to_child_ = to_child[1];
    from_child_ = from_child[0];
  }
  // Lets the child close its session (so its node does not outlive the
  // test) for up to 5 s, then kills it.
  ~FrozenLeader() {
    close(to_child_);  // a child still waiting for "r" exits
    kill(pid_, SIGCONT);
    for (int i = 0; i < 100; ++i) {
      if (waitpid(pid_, nullptr, WNOHANG) != 0) break;
      if (i == 99) {
        kill(pid_, SIGKILL);
        waitpid(pid_, nullptr, 0);
      }
      std::this_thread::sleep_for(milliseconds(50));
    }
    close(from_child_);
  }

  // The child's next line, "" when none came within 15 s.
  std::string Read() {
    std::string line;
    char c;
    while (true) {
      pollfd fd{from_child_, POLLIN, 0};
      if (poll(&fd, 1, 15000) != 1 || read(from_child_, &c, 1) != 1) return "";
      if (c == '\n') return line;
      line += c;
    }
  }
  void Stop() { ASSERT_TRUE(Freeze(pid_)); }
  void ContinueAndRenew() {
    kill(pid_, SIGCONT);
    if (write(to_child_, "r", 1) != 1) throw std::runtime_error("write failed");
  }

 private:
  // Writes "<outcome> <token> <sent_at + ttl>" after Acquire (steady_clock
  // is CLOCK_MONOTONIC, the same in every process); after "r", renews until the
  // answer is not kFailed (the client may first see the old connection
  // broken) and writes "<outcome> <detail>"; then acquires again and writes
  // "<outcome> <holder>".
  [[noreturn]] static void RunChild(const std::string& url,
                                    const std::string& name, int in, int out) {
    auto say = [out](const std::string& line) {
      const std::string text = line + "\n";
      if (write(out, text.data(), text.size()) !=
          static_cast<ssize_t>(text.size())) {
        _exit(2);
      }
    };
    {
      ZooKeeperLeases leader(url, Spec(name, "frozen", milliseconds(1000)));
      const LeaseAttempt held = leader.Acquire(kTimeout);
      say(std::to_string(static_cast<int>(held.outcome)) + " " +
          std::to_string(held.token) + " " +
          std::to_string((held.sent_at + held.ttl).time_since_epoch().count()));
      char command;
      if (read(in, &command, 1) != 1) _exit(2);
      LeaseAttempt renewed;
      for (int i = 0; i < 20; ++i) {
        renewed = leader.Renew(held.token, milliseconds(500));
        if (renewed.outcome != Outcome::kFailed) break;
      }
      say(std::to_string(static_cast<int>(renewed.outcome)) + " " +
          renewed.detail);
      const LeaseAttempt again = leader.Acquire(kTimeout);
      say(std::to_string(static_cast<int>(again.outcome)) + " " + again.holder);
    }
    _exit(0);
  }

  pid_t pid_ = -1;
  int to_child_ = -1;
  int from_child_ = -1;
};

std::string Code(Outcome outcome) {
  return std::to_string(static_cast<int>(outcome));
}

TEST_F(ZooKeeperLeasesTest, AnExpiredSessionLosesTheLeaseToTheNextCandidate) {
  // Fork before this process has a ZooKeeper client (and its threads).
  FrozenLeader leader(url_, TestName());
  const std::string acquired = leader.Read();
  ASSERT_TRUE(acquired.starts_with(Code(Outcome::kHeld) + " ")) << acquired;
  std::istringstream fields(acquired.substr(2));
  std::uint64_t token = 0;
  Clock::rep held_until = 0;
  fields >> token >> held_until;

  ZooKeeperLeases next(url_, Spec(TestName(), "next"));
  const LeaseAttempt refused = next.Acquire(kTimeout);
  ASSERT_EQ(refused.outcome, Outcome::kRefused) << Describe(refused);
  EXPECT_EQ(refused.holder, "frozen");

  leader.Stop();
  const auto stopped = Clock::now();
  LeaseAttempt held;
  while (Clock::now() - stopped < std::chrono::seconds(10)) {
    held = next.Acquire(kTimeout);
    if (held.outcome == Outcome::kHeld) break;
    std::this_thread::sleep_for(milliseconds(50));
  }
  ASSERT_EQ(held.outcome, Outcome::kHeld) << Describe(held);
  EXPECT_GE(Clock::now(), Clock::time_point(Clock::duration(held_until)))
      << "the leader's session lasts at least until its sent_at + ttl";
  EXPECT_GT(held.token, token);

  leader.ContinueAndRenew();
  const std::string renewed = leader.Read();
  EXPECT_TRUE(renewed.starts_with(Code(Outcome::kRefused) + " ")) << renewed;
  EXPECT_EQ(leader.Read(), Code(Outcome::kRefused) + " next")
      << "a new session, refused";
  EXPECT_EQ(next.Renew(held.token, kTimeout).outcome, Outcome::kHeld);
}

TEST_F(ZooKeeperLeasesTest, NamesWithSlashesAndOddCharactersStayUnderThePath) {
  const std::string url = url_ + "/fencepost-test/odd";
  const std::vector<std::string> names = {
      "demo/race", "demo%2Frace", ".",       "..", "../../zookeeper/quota",
      "/",         "x y\n",       "\xc3\xa9"};
  std::vector<std::unique_ptr<ZooKeeperLeases>> candidates;
  for (std::size_t i = 0; i < names.size(); ++i) {
    candidates.push_back(std::make_unique<ZooKeeperLeases>(
        url, Spec(names[i], "h" + std::to_string(i))));
    const LeaseAttempt held = candidates.back()->Acquire(kTimeout);
    EXPECT_EQ(held.outcome, Outcome::kHeld)
        << "each name is a lease of its own: " << names[i] << ": "
        << Describe(held);
  }

  // The server's own list of ephemeral nodes: one per name, each right
  // below its election node, which is right below the path.
  const std::string dump = Script("word " + dir_ + " dump");
  std::istringstream lines(dump);
  std::size_t nodes = 0;
  for (std::string line; std::getline(lines, line);) {
    if (!line.starts_with("\t/")) continue;  // "\t" + an ephemeral's path
    const std::string path = line.substr(1);
    ++nodes;
    ASSERT_TRUE(path.starts_with("/fencepost-test/odd/")) << path << dump;
    const std::string rest =
        path.substr(std::string("/fencepost-test/odd/").size());
    const auto step_end = rest.find('/');
    ASSERT_NE(step_end, std::string::npos) << path;
    EXPECT_TRUE(rest.substr(step_end + 1).starts_with("n_")) << path;
    EXPECT_EQ(rest.find('/', step_end + 1), std::string::npos) << path;
  }
  EXPECT_EQ(nodes, names.size()) << dump;
}

TEST_F(ZooKeeperLeasesTest, ReportsTheSessionTimeoutTheServerGranted) {
  // The server allows 400 ms (two ticks) to 60 s.
  ZooKeeperLeases short_ttl(
      url_, Spec(TestName() + "-short", "a", milliseconds(100)));
  const LeaseAttempt a = short_ttl.Acquire(kTimeout);
  ASSERT_EQ(a.outcome, Outcome::kHeld) << Describe(a);
  EXPECT_EQ(a.ttl, milliseconds(400));

  ZooKeeperLeases long_ttl(
      url_, Spec(TestName() + "-long", "b", milliseconds(600000)));
  const LeaseAttempt b = long_ttl.Acquire(kTimeout);
  ASSERT_EQ(b.outcome, Outcome::kHeld) << Describe(b);
  EXPECT_EQ(b.ttl, milliseconds(60000));
  const LeaseAttempt renewed = long_ttl.Renew(b.token, kTimeout);
  EXPECT_EQ(renewed.ttl, milliseconds(60000));
}

TEST_F(ZooKeeperLeasesTest, AFrozenServerFailsRenewalsWithinTheTimeout) {
  ZooKeeperLeases a(url_, Spec(TestName(), "a", milliseconds(5000)));
  const LeaseAttempt held = a.Acquire(kTimeout);
  ASSERT_EQ(held.outcome, Outcome::kHeld) << Describe(held);

  const pid_t server = ServerPid();
  ASSERT_GT(server, 0);
  struct Thaw {
    pid_t pid;
    ~Thaw() { kill(pid, SIGCONT); }
  } thaw{server};
  ASSERT_TRUE(Freeze(server));

  auto start = Clock::now();
  const LeaseAttempt renewed = a.Renew(held.token, milliseconds(300));
  EXPECT_EQ(renewed.outcome, Outcome::kFailed) << Describe(renewed);
  EXPECT_LT(Clock::now() - start,
            milliseconds(300) + fencepost::testing::kNoHang);

  ZooKeeperLeases b(url_, Spec(TestName(), "b"));
  start = Clock::now();
  const LeaseAttempt unanswered = b.Acquire(milliseconds(300));
  EXPECT_EQ(unanswered.outcome, Outcome::kFailed) << Describe(unanswered);
  EXPECT_LT(Clock::now() - start,
            milliseconds(300) + fencepost::testing::kNoHang);

  kill(server, SIGCONT);
  const LeaseAttempt later = a.Renew(held.token, kTimeout);
  EXPECT_EQ(later.outcome, Outcome::kHeld)
      << "the session outlived a short freeze: " << Describe(later);
  EXPECT_EQ(b.Acquire(kTimeout).holder, "a");

  ASSERT_TRUE(Freeze(server));
  start = Clock::now();
  EXPECT_NE(a.Release(held.token, milliseconds(300)), "");
  EXPECT_LT(Clock::now() - start,
            milliseconds(300) + fencepost::testing::kNoHang);
  kill(server, SIGCONT);
  // The session closes all the same, and with it a's node.
  LeaseAttempt next;
  for (int i = 0; i < 50; ++i) {
    next = b.Acquire(kTimeout);
    if (next.outcome == Outcome::kHeld) break;
    std::this_thread::sleep_for(milliseconds(100));
  }
  EXPECT_EQ(next.outcome, Outcome::kHeld) << Describe(next);
}

TEST(ZooKeeperLeasesUnreachableTest, FailsWithinTheTimeout) {
  // Nothing listens on port 1; the other port accepts connections (the
  // kernel does) but never answers.
  const int silent = socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(silent, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(
      bind(silent, reinterpret_cast<sockaddr*>(&address), sizeof(address)), 0);
  ASSERT_EQ(listen(silent, 16), 0);
  socklen_t length = sizeof(address);
  ASSERT_EQ(getsockname(silent, reinterpret_cast<sockaddr*>(&address), &length),
            0);
  const std::string silent_url =
      "zk://127.0.0.1:" + std::to_string(ntohs(address.sin_port));

  for (const std::string& url : {std::string("zk://127.0.0.1:1"), silent_url}) {
    ZooKeeperLeases a(url, Spec("x", "a"));
    for (int i = 0; i < 2; ++i) {
      const auto start = Clock::now();
      const LeaseAttempt failed = a.Acquire(milliseconds(300));
      const auto took = Clock::now() - start;
      EXPECT_EQ(failed.outcome, Outcome::kFailed) << url;
      EXPECT_FALSE(failed.detail.empty());
      EXPECT_GE(took, milliseconds(300)) << url;
      EXPECT_LT(took, milliseconds(300) + fencepost::testing::kNoHang) << url;
    }
    EXPECT_EQ(a.Renew(1, milliseconds(300)).outcome, Outcome::kRefused)
        << "never held";
    const auto start = Clock::now();
    EXPECT_NE(a.Release(1, milliseconds(300)), "");
    EXPECT_LT(Clock::now() - start,
              milliseconds(300) + fencepost::testing::kNoHang);
  }
  close(silent);
}

}  // namespace
}  // namespace fencepost::client
