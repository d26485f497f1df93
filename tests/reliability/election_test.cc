// Elections watched at their source (SPEC "Elections watched at their
// source"): the real fencepost with --election SCOPE=SOURCE in front of a
// real etcd (Debian's etcd-server, tests/coordination/etcd.sh) elected with
// the real `etcdctl elect` and with `fencepost lease run --via etcd://`, and
// a real ZooKeeper (tests/coordination/zookeeper.sh) elected with kazoo's
// Election recipe (Debian's python3-kazoo) and with `lease run --via zk://`.
// Everything on 127.0.0.1.
//
// What each case holds: a new holder raises the fence without a write of
// its own; the old holder is refused (also for reads); a token nobody was
// elected with is refused without moving the fence; with the source down
// the fence's own token goes on and a higher one waits, then is 503; a
// restarted fencepost catches up before any write; etcd restarted, compacted
// or restored from nothing never makes a raise missed or a fence lower;
// replicas raise once; eight `lease run` processes racing are fenced; an
// etcds:// source is read with --election-ca/-cert/-key and is down without
// a client certificate; a ZooKeeper election behind a digest ACL is read
// with --election-digest-file and is down without it or with a wrong
// password; an etcd key without a lease and a ZooKeeper child that is not
// ephemeral, the oldest of the election, are passed over (nobody's
// candidacy), and an etcd election whose oldest keys all lack a lease is
// down.
//
// Times are measured and printed (the election to the raise), never
// asserted. The suite is one process (fencepost_suite): one ZooKeeper for
// all of it, one etcd per case (cases stop, freeze and restore theirs).

#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "tests/coordination/shell.h"
#include "tests/testing/bounds.h"
#include "tests/testing/event_stream.h"
#include "tests/testing/exposition.h"
#include "tests/testing/freeze.h"
#include "tests/testing/http_client.h"
#include "tests/testing/server_process.h"
#include "tests/testing/temp_dir.h"

namespace fencepost::reliability {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;
using testing::Fetch;
using testing::HttpResponse;
using testing::ReadFile;
using testing::ServerProcess;
using testing::Shell;
using testing::ShellLine;
using testing::TempDir;
using testing::Watcher;

const std::string kEtcdSh = FENCEPOST_ETCD_SH;
const std::string kZooKeeperSh = FENCEPOST_ZOOKEEPER_SH;
// Debian's python3, which has kazoo: a python3 earlier on PATH may not.
const std::string kPython = "/usr/bin/python3";
constexpr std::uint64_t kMaxToken = 18446744073709551615u;

double SecondsSince(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// Measured times, printed as they come and again at the suite's end.
std::vector<std::string>& Timings() {
  static std::vector<std::string> timings;
  return timings;
}
void Timing(const std::string& what, double seconds) {
  char line[256];
  std::snprintf(line, sizeof line, "%-68s %7.3f s", what.c_str(), seconds);
  Timings().push_back(line);
  std::printf("[  TIMING  ] %s\n", line);
  std::fflush(stdout);
}

// Polls `done` every 10 ms until it holds or `seconds` pass; whether it
// held.
bool Await(const std::function<bool()>& done, double seconds = 15) {
  const auto until = Clock::now() + milliseconds(int(seconds * 1000));
  while (!done()) {
    if (Clock::now() >= until) return false;
    std::this_thread::sleep_for(milliseconds(10));
  }
  return true;
}

// A process of the test's own (etcdctl, python3, `fencepost lease run`,
// sh): in a process group of its own, its output appended to a file, and
// stopped when the test is done with it (SIGTERM, which each of them takes
// as "resign" or "give the lease back", then SIGKILL to its group).
class Child {
 public:
  Child(std::vector<std::string> argv, std::string output)
      : output_(std::move(output)) {
    const std::vector<std::string> unset = testing::FencepostVariables();
    std::vector<char*> args;
    for (std::string& a : argv) args.push_back(a.data());
    args.push_back(nullptr);
    pid_ = ::fork();
    if (pid_ == 0) {
      ::setpgid(0, 0);
      const int fd =
          ::open(output_.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
      ::dup2(fd, 1);
      ::dup2(fd, 2);
      const int null = ::open("/dev/null", O_RDONLY);
      ::dup2(null, 0);
      for (const std::string& name : unset) ::unsetenv(name.c_str());
      ::setenv("ETCDCTL_API", "3", 1);
      ::execvp(args[0], args.data());
      ::_exit(127);
    }
  }
  ~Child() { Stop(); }
  Child(const Child&) = delete;
  Child& operator=(const Child&) = delete;

  void Signal(int signal) {
    if (pid_ > 0 && status_ < 0) ::kill(pid_, signal);
  }
  // Waits at most `seconds` for it to exit: its exit status (128 + signal
  // when killed), or -1.
  int Wait(double seconds) {
    if (pid_ <= 0) return -1;
    Await(
        [this] {
          int status = 0;
          if (status_ < 0 && ::waitpid(pid_, &status, WNOHANG) == pid_) {
            status_ = WIFEXITED(status) ? WEXITSTATUS(status)
                                        : 128 + WTERMSIG(status);
          }
          return status_ >= 0;
        },
        seconds);
    return status_;
  }
  // SIGTERM, then SIGKILL to its whole group after `grace` seconds.
  void Stop(double grace = 6) {
    if (pid_ <= 0) return;
    ::kill(pid_, SIGCONT);
    Signal(SIGTERM);
    if (Wait(grace) < 0) {
      ::kill(-pid_, SIGKILL);
      ::kill(pid_, SIGKILL);
      Wait(testing::kNoHang.count());
    }
    ::kill(-pid_, SIGKILL);  // what it left in its group
  }
  std::string Output() const { return ReadFile(output_); }
  // Waits (at most `seconds`) until its output holds `text`.
  bool AwaitOutput(const std::string& text, double seconds = 15) const {
    return Await([&] { return Output().find(text) != std::string::npos; },
                 seconds);
  }

 private:
  std::string output_;
  pid_t pid_ = -1;
  int status_ = -1;
};

// A candidate of an election as its source holds it.
struct Candidate {
  std::string name;        // etcd: the key; ZooKeeper: the child's name
  std::uint64_t token;     // etcd: create_revision; ZooKeeper: czxid
  std::string value;       // etcd: the value (the proposal)
  std::int64_t lease = 0;  // etcd: the key's lease
};

std::string Hex(std::int64_t lease) {
  char hex[32];
  std::snprintf(hex, sizeof hex, "%llx",
                static_cast<unsigned long long>(lease));
  return hex;
}

// The value of `"NAME" : VALUE` lines of etcdctl's `-w fields` output.
std::string FieldValue(const std::string& line, const std::string& name) {
  const std::string head = "\"" + name + "\" : ";
  if (line.rfind(head, 0) != 0) return "";
  std::string value = line.substr(head.size());
  if (value.size() >= 2 && value.front() == '"') {
    value = value.substr(1, value.size() - 2);
  }
  return value;
}

// One etcd of one case (etcd.sh), which the case may freeze, kill, start
// again with the same data or with none. With `tls_dir` (etcd.sh's
// ETCD_TLS_DIR: ca.pem, server.pem/.key, client.pem/.key) it serves TLS
// only and asks for client certificates; etcdctl is given the client's.
class Etcd {
 public:
  explicit Etcd(const std::string& tls_dir = "")
      : tls_dir_(tls_dir),
        url_(
            ShellLine((tls_dir.empty() ? "" : "ETCD_TLS_DIR=" + tls_dir + " ") +
                      kEtcdSh + " start " + dir_ / "etcd")) {}
  ~Etcd() {
    Thaw();
    Shell(kEtcdSh + " stop " + dir_ / "etcd");
  }
  Etcd(const Etcd&) = delete;
  Etcd& operator=(const Etcd&) = delete;

  // etcd://127.0.0.1:PORT (etcds:// with TLS)
  const std::string& url() const { return url_; }
  std::string endpoint() const { return url_.substr(url_.find("//") + 2); }
  // etcdctl's flags that reach it: the endpoint, and the TLS files.
  std::vector<std::string> CtlArgs() const {
    if (tls_dir_.empty()) return {"--endpoints=" + endpoint()};
    return {"--endpoints=https://" + endpoint(),
            "--cacert=" + tls_dir_ + "/ca.pem",
            "--cert=" + tls_dir_ + "/client.pem",
            "--key=" + tls_dir_ + "/client.key"};
  }
  // Its process ID; 0 when it has none (never -1, which kill() takes for
  // every process).
  pid_t pid() const {
    const std::string pid = ReadFile(dir_ / "etcd/pid");
    return pid.empty() ? 0 : std::max(std::stoi(pid), 0);
  }

  // `etcdctl ARGS` against it: its output, stderr included.
  std::string Ctl(const std::string& args, int* status = nullptr) const {
    std::string flags;
    for (const std::string& a : CtlArgs()) flags += a + " ";
    return Shell(
        "ETCDCTL_API=3 etcdctl --command-timeout=5s " + flags + args + " 2>&1",
        status);
  }
  // The election's candidates: the keys under `prefix`/, lowest
  // create_revision first.
  std::vector<Candidate> Candidates(const std::string& prefix) const {
    return Keys("--prefix " + prefix + "/");
  }
  // The keys `etcdctl get RANGE` names (a key, or `--prefix KEY`), with
  // their create_revision, value and lease; lowest create_revision first.
  std::vector<Candidate> Keys(const std::string& range) const {
    std::istringstream in(Ctl("get " + range + " -w fields"));
    std::vector<Candidate> out;
    for (std::string line; std::getline(in, line);) {
      if (std::string key = FieldValue(line, "Key"); !key.empty()) {
        out.push_back({key, 0, "", 0});
      } else if (out.empty()) {
        continue;
      } else if (std::string v = FieldValue(line, "CreateRevision");
                 !v.empty()) {
        out.back().token = std::stoull(v);
      } else if (std::string v = FieldValue(line, "Value"); !v.empty()) {
        out.back().value = v;
      } else if (std::string v = FieldValue(line, "Lease"); !v.empty()) {
        out.back().lease = std::stoll(v);
      }
    }
    std::sort(out.begin(), out.end(),
              [](const Candidate& a, const Candidate& b) {
                return a.token < b.token;
              });
    return out;
  }
  // Waits until `prefix` has `n` candidates; them (fewer on timeout).
  std::vector<Candidate> AwaitCandidates(const std::string& prefix,
                                         std::size_t n) const {
    std::vector<Candidate> c;
    Await([&] { return (c = Candidates(prefix)).size() == n; });
    return c;
  }
  // A candidate as concurrency.Election makes one, without a process: a
  // lease of 60 s and the key `prefix`/NAME on it.
  Candidate PutCandidate(const std::string& prefix, const std::string& name) {
    const std::string granted = Ctl("lease grant 60");
    std::string lease;
    std::istringstream(granted) >> lease >> lease;  // "lease ID granted..."
    Ctl("put --lease=" + lease + " " + prefix + "/" + name + " " + name);
    for (const Candidate& c : Candidates(prefix)) {
      if (c.name == prefix + "/" + name) return c;
    }
    ADD_FAILURE() << "no candidate " << name << ": " << granted;
    return {};
  }
  // Ends a candidate's lease (as its expiry would): its key goes.
  void Revoke(const Candidate& c) const { Ctl("lease revoke " + Hex(c.lease)); }
  std::uint64_t Revision() const {
    std::istringstream in(Ctl("get fencepost-test-nothing -w fields"));
    for (std::string line; std::getline(in, line);) {
      if (std::string v = FieldValue(line, "Revision"); !v.empty()) {
        return std::stoull(v);
      }
    }
    return 0;
  }

  bool Freeze() const { return pid() > 0 && testing::Freeze(pid()); }
  void Thaw() const {
    if (pid() > 0) ::kill(pid(), SIGCONT);
  }
  // SIGKILL; waits until it is gone.
  void Kill() {
    const pid_t p = pid();
    if (p <= 0) return;
    std::ifstream in("/proc/" + std::to_string(p) + "/cmdline");
    std::string arg;
    command_.clear();
    while (std::getline(in, arg, '\0')) command_.push_back(arg);
    ::kill(p, SIGCONT);
    ::kill(p, SIGKILL);
    Await([p] {
      return ::kill(p, 0) != 0 ||
             testing::ThreadState("/proc/" + std::to_string(p) + "/stat") ==
                 'Z';
    });
  }
  // Starts it again after Kill, with the command line it had (the same
  // ports), on its data or (`wipe`) on none: a new cluster whose revisions
  // start again from 1. Waits until it is healthy.
  bool Restart(bool wipe) {
    if (command_.empty()) return false;
    if (wipe) {
      for (std::size_t i = 0; i + 1 < command_.size(); ++i) {
        if (command_[i] == "--data-dir") Shell("rm -rf " + command_[i + 1]);
      }
    }
    // Twice forked, so that it is nobody's child here (etcd.sh stops it).
    int pipe_fds[2];
    if (::pipe(pipe_fds) != 0) return false;
    std::vector<char*> args;
    for (std::string& a : command_) args.push_back(a.data());
    args.push_back(nullptr);
    const std::string log = dir_ / "etcd/etcd.log";
    const pid_t child = ::fork();
    if (child == 0) {
      ::setsid();
      const pid_t etcd = ::fork();
      if (etcd == 0) {
        const int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
        ::dup2(fd, 1);
        ::dup2(fd, 2);
        ::close(pipe_fds[0]);
        ::close(pipe_fds[1]);
        ::execvp(args[0], args.data());
        ::_exit(127);
      }
      (void)!::write(pipe_fds[1], &etcd, sizeof etcd);
      ::_exit(0);
    }
    ::close(pipe_fds[1]);
    pid_t etcd = 0;
    (void)!::read(pipe_fds[0], &etcd, sizeof etcd);
    ::close(pipe_fds[0]);
    ::waitpid(child, nullptr, 0);
    if (etcd <= 0) return false;
    std::ofstream(dir_ / "etcd/pid") << etcd << "\n";
    return Await([this] {
      return Shell("curl -sf --max-time 1 http://" + endpoint() + "/health")
                 .find("\"true\"") != std::string::npos;
    });
  }

 private:
  TempDir dir_;
  std::string tls_dir_;
  std::string url_;
  std::vector<std::string> command_;
};

// The token of the fence that guards `key`; 0 when there is none.
std::uint64_t FenceOf(const ServerProcess& server, const std::string& key) {
  try {
    const HttpResponse fence =
        Fetch(server.admin_port(), "GET", "/v1/fences/" + key);
    const auto at = fence.body.find("\"token\":");
    if (fence.status != 200 || at == std::string::npos) return 0;
    return std::stoull(fence.body.substr(at + 8));
  } catch (const std::exception&) {
    return 0;
  }
}

// Polls until the fence of `key` is at `token` (true) or above it, or
// `seconds` pass. How long it took, or nullopt when it did not come.
std::optional<double> AwaitFence(const ServerProcess& server,
                                 const std::string& key, std::uint64_t token,
                                 double seconds = 15) {
  const auto start = Clock::now();
  if (!Await([&] { return FenceOf(server, key) >= token; }, seconds)) {
    return std::nullopt;
  }
  return SecondsSince(start);
}

// One request on a fresh connection; status 0 (and the error as its body)
// when none came within the client's 10 s.
HttpResponse Request(std::uint16_t port, const std::string& method,
                     const std::string& target,
                     const testing::Headers& headers = {},
                     const std::string& body = "") {
  try {
    return Fetch(port, method, target, headers, body);
  } catch (const std::exception& e) {
    HttpResponse none;
    none.body = e.what();
    return none;
  }
}
HttpResponse Put(const ServerProcess& s, const std::string& key,
                 std::uint64_t token, const std::string& body = "v") {
  return Request(s.data_port(), "PUT", "/" + key,
                 {{"Fencing-Token", std::to_string(token)}}, body);
}
HttpResponse Bump(const ServerProcess& s, const std::string& key,
                  std::uint64_t token) {
  return Request(s.admin_port(), "PUT", "/v1/fences/" + key,
                 {{"Fencing-Token", std::to_string(token)}});
}

// The last segment of a problem's "type" ("" when there is none).
std::string ProblemType(const HttpResponse& r) {
  const auto at = r.body.find("\"type\":\"");
  if (at == std::string::npos) return "";
  const auto end = r.body.find('"', at + 8);
  const std::string type = r.body.substr(at + 8, end - at - 8);
  return type.substr(type.find_last_of("/:") + 1);  // a URI's last segment
}

// "STATUS TYPE" of an answer, for comparing in one expectation.
std::string Verdict(const HttpResponse& r) {
  const std::string type = ProblemType(r);
  return std::to_string(r.status) + (type.empty() ? "" : " " + type);
}
bool Accepted(const HttpResponse& r) { return r.status / 100 == 2; }

double Metric(const ServerProcess& s, const std::string& series) {
  return testing::MetricValue(Request(s.admin_port(), "GET", "/metrics").body,
                              series);
}
std::string Up(const std::string& scope) {
  return "fencepost_election_up{scope=\"" + scope + "\"}";
}
std::string HolderChanges(const std::string& scope) {
  return "fencepost_election_holder_changes_total{scope=\"" + scope + "\"}";
}

bool AwaitReady(const ServerProcess& s, double seconds = 15) {
  return Await(
      [&] { return Request(s.admin_port(), "GET", "/readyz").status == 200; },
      seconds);
}

bool HasToken(const std::string& json, std::uint64_t token) {
  const std::string t = "\"token\":" + std::to_string(token);
  for (auto at = json.find(t); at != std::string::npos;
       at = json.find(t, at + 1)) {
    const char next = at + t.size() < json.size() ? json[at + t.size()] : '}';
    if (next == ',' || next == '}') return true;
  }
  return false;
}

// Reads the stream (at most 10 s) until a fence event of `token` with the
// cause "election" has come.
bool SawElectionRaise(Watcher& watcher, std::uint64_t token) {
  const auto until = Clock::now() + std::chrono::seconds(10);
  do {
    for (const testing::Event& e : watcher.EventsFor(100)) {
      if (e.type == "fence" && HasToken(e.data, token) &&
          e.data.find("\"cause\":\"election\"") != std::string::npos) {
        return true;
      }
    }
  } while (Clock::now() < until);
  return false;
}

// The tokens of the stream's fence events so far, in their order.
std::vector<std::uint64_t> FenceTokens(Watcher& watcher) {
  std::vector<std::uint64_t> tokens;
  for (const testing::Event& e : watcher.EventsFor(300)) {
    const auto at = e.data.find("\"token\":");
    if (e.type == "fence" && at != std::string::npos) {
      tokens.push_back(std::stoull(e.data.substr(at + 8)));
    }
  }
  return tokens;
}

// Stops `server` with SIGTERM: it exits 0 (SPEC "Processes and flags"),
// within kNoHang.
void ExpectCleanStop(std::unique_ptr<ServerProcess>& server) {
  server->Signal(SIGTERM);
  const auto asked = Clock::now();
  EXPECT_EQ(server->Wait(testing::kNoHang.count()), 0)
      << "SIGTERM did not stop fencepost\n"
      << server->Log();
  Timing("fencepost stopped (SIGTERM) after", SecondsSince(asked));
  server.reset();
}

// The server's log lines of level error or critical.
std::string ErrorLines(const ServerProcess& s) {
  std::istringstream in(s.Log());
  std::string out;
  for (std::string line; std::getline(in, line);) {
    std::istringstream fields(line);
    std::string time, level;
    fields >> time >> level;
    if (level == "error" || level == "critical") out += line + "\n";
  }
  return out;
}

// After a change of holder: the fence of `key` is at `holder`, the
// replaced holder's token is stale, the holder writes, and nothing went
// wrong in the server.
void ExpectHandedOver(const ServerProcess& s, const std::string& key,
                      std::uint64_t replaced, std::uint64_t holder) {
  EXPECT_EQ(FenceOf(s, key), holder);
  EXPECT_EQ(Verdict(Put(s, key, replaced)), "409 stale-token");
  EXPECT_TRUE(Accepted(Put(s, key, holder)));
  EXPECT_EQ(ErrorLines(s), "");
}

// After an election with a stray (a key or node that is no candidate) went
// from A to B: A's token and the stray's are stale, B writes, the fence
// was made at A's token and raised to B's by the election, never to the
// stray's, and nothing went wrong in the server.
void ExpectStrayPassedOver(const ServerProcess& s, Watcher& watcher,
                           std::uint64_t ta, std::uint64_t tb,
                           std::uint64_t stray) {
  EXPECT_EQ(Verdict(Put(s, "orders/1", ta, "A again")), "409 stale-token");
  EXPECT_EQ(Verdict(Put(s, "orders/1", stray, "stray")), "409 stale-token");
  const HttpResponse from_b = Put(s, "orders/1", tb, "from B");
  EXPECT_TRUE(Accepted(from_b)) << Verdict(from_b) << " " << from_b.body;
  EXPECT_EQ(FenceTokens(watcher), (std::vector<std::uint64_t>{ta, tb}))
      << watcher.raw();
  EXPECT_TRUE(SawElectionRaise(watcher, ta)) << watcher.raw();
  EXPECT_TRUE(SawElectionRaise(watcher, tb)) << watcher.raw();
  EXPECT_EQ(s.Log().find("stray"), std::string::npos)
      << "a stray named as a holder\n"
      << s.Log();
  EXPECT_EQ(ErrorLines(s), "");
}

// kazoo's Election (the Lock recipe: children GUID__lock__SEQUENCE):
//   candidate.py run HOSTS PATH ID   campaigns; once elected prints
//                                    "elected NODE CZXID" and leads until
//                                    SIGTERM (which closes its session)
//   candidate.py list HOSTS PATH     prints "NODE CZXID" per candidate,
//                                    lowest sequence first
//   candidate.py persist HOSTS PATH CHILD
//                                    makes PATH (when missing) and the
//                                    PERSISTENT child PATH/CHILD (data
//                                    "stray"); prints its czxid
// Its session times out 2 s after it was killed.
constexpr const char* kKazooCandidate = R"py(import signal, sys, threading
from kazoo.client import KazooClient

mode, hosts, path = sys.argv[1:4]
zk = KazooClient(hosts=hosts, timeout=2.0)
zk.start(timeout=10)
try:
    if mode == "persist":
        node = path + "/" + sys.argv[4]
        zk.create(node, b"stray", makepath=True)
        print(zk.exists(node).czxid)
        sys.exit(0)
    if mode == "list":
        for child in sorted(zk.get_children(path), key=lambda c: c[-10:]):
            print(child, zk.exists(path + "/" + child).czxid)
        sys.exit(0)

    def stop(*_):
        raise SystemExit(0)

    signal.signal(signal.SIGTERM, stop)
    election = zk.Election(path, sys.argv[4])

    def lead():
        node = election.lock.node
        print("elected", node, zk.exists(path + "/" + node).czxid, flush=True)
        threading.Event().wait()

    election.run(lead)
finally:
    zk.stop()
    zk.close()
)py";

// kazoo's Election behind ZooKeeper digest authentication:
//   digest_candidate.py run HOSTS PATH ID USER PASSWORD
//       authenticated as USER (auth_data), every node it makes with the
//       ACL digest USER:PASSWORD, all permissions, and nothing else
//       (default_acl, which kazoo's Lock gives its children too): makes
//       PATH, sets that ACL on it, campaigns; once elected prints
//       "elected NODE CZXID", then "path-acls SCHEMES" and "node-acls
//       SCHEMES" (the schemes of PATH's and of its node's ACLs), and leads
//       until SIGTERM (which closes its session)
//   digest_candidate.py check HOSTS PATH
//       prints "noauth" when a client without authentication is refused
//       PATH's children, "readable" when it is not
constexpr const char* kKazooDigestCandidate = R"py(import signal, sys, threading
from kazoo.client import KazooClient
from kazoo.exceptions import NoAuthError
from kazoo.security import make_digest_acl

mode, hosts, path = sys.argv[1:4]
if mode == "check":
    zk = KazooClient(hosts=hosts, timeout=2.0)
    zk.start(timeout=10)
    try:
        try:
            zk.get_children(path)
            print("readable", flush=True)
        except NoAuthError:
            print("noauth", flush=True)
    finally:
        zk.stop()
        zk.close()
    sys.exit(0)

identity, user, password = sys.argv[4:7]
acl = make_digest_acl(user, password, all=True)
zk = KazooClient(hosts=hosts, timeout=2.0,
                 auth_data=[("digest", user + ":" + password)],
                 default_acl=[acl])
zk.start(timeout=10)
try:
    zk.ensure_path(path)
    zk.set_acls(path, [acl])

    def stop(*_):
        raise SystemExit(0)

    signal.signal(signal.SIGTERM, stop)
    election = zk.Election(path, identity)

    def schemes(node):
        return ",".join(a.id.scheme for a in zk.get_acls(node)[0])

    def lead():
        node = election.lock.node
        print("elected", node, zk.exists(path + "/" + node).czxid, flush=True)
        print("path-acls", schemes(path), flush=True)
        print("node-acls", schemes(path + "/" + node), flush=True)
        threading.Event().wait()

    election.run(lead)
finally:
    zk.stop()
    zk.close()
)py";

// The CA and certificates etcd.sh's ETCD_TLS_DIR holds, in `dir`, made with
// the openssl command as EtcdTlsTest (replicas_test.cc) makes them: the
// server's for IP 127.0.0.1 (clientAuth too: etcd's JSON gateway dials its
// own gRPC port with it) and a client's, both signed by ca.pem. "" when
// they were made, else the command that failed.
std::string MakeEtcdCertificates(const std::string& dir) {
  if (std::system(("mkdir -p " + dir).c_str()) != 0) return "mkdir " + dir;
  std::ofstream(dir + "/server.ext")
      << "subjectAltName=IP:127.0.0.1\n"
         "extendedKeyUsage=serverAuth,clientAuth\n";
  std::ofstream(dir + "/client.ext") << "extendedKeyUsage=clientAuth\n";
  const std::string ec =
      "-newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes";
  std::vector<std::string> commands = {"openssl req -x509 " + ec + " -keyout " +
                                       dir + "/ca.key -out " + dir +
                                       "/ca.pem -days 1 -subj /CN=ca"};
  for (const std::string name : {"server", "client"}) {
    commands.push_back("openssl req " + ec + " -keyout " + dir + "/" + name +
                       ".key -out " + dir + "/" + name +
                       ".csr -subj /CN=" + name);
    commands.push_back("openssl x509 -req -in " + dir + "/" + name +
                       ".csr -CA " + dir + "/ca.pem -CAkey " + dir +
                       "/ca.key -CAcreateserial -days 1 -out " + dir + "/" +
                       name + ".pem -extfile " + dir + "/" + name + ".ext");
  }
  for (const std::string& command : commands) {
    if (std::system((command + " >/dev/null 2>&1").c_str()) != 0) {
      return command;
    }
  }
  return "";
}

// The czxid a candidate printed as "elected NODE CZXID"; 0 before.
std::uint64_t ElectedToken(const std::string& output) {
  const auto at = output.find("elected ");
  if (at == std::string::npos) return 0;
  std::istringstream line(output.substr(at));
  std::string word, node;
  std::uint64_t token = 0;
  line >> word >> node >> token;
  return token;
}

// Writes `text` to a new file `path` of mode `mode`; `path`.
std::string WriteFileWithMode(const std::string& path, const std::string& text,
                              mode_t mode) {
  std::ofstream(path) << text;
  ::chmod(path.c_str(), mode);
  return path;
}

class ElectionTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    suite_dir_ = std::make_unique<TempDir>();
    std::ofstream(*suite_dir_ / "candidate.py") << kKazooCandidate;
    std::ofstream(*suite_dir_ / "digest_candidate.py") << kKazooDigestCandidate;
    zk_url_ = ShellLine(kZooKeeperSh + " start " + *suite_dir_ / "zk");
  }
  static void TearDownTestSuite() {
    Shell(kZooKeeperSh + " stop " + *suite_dir_ / "zk");
    suite_dir_.reset();
    std::printf(
        "\nMeasured (an election to the fence raised, a refusal's "
        "wait):\n");
    for (const std::string& t : Timings()) std::printf("  %s\n", t.c_str());
  }

  void SetUp() override {
    ASSERT_EQ(::access(kPython.c_str(), X_OK), 0) << kPython << " is missing";
  }

  // HOST:PORT of the suite's ZooKeeper.
  static std::string ZooKeeperHosts() {
    return zk_url_.substr(zk_url_.find("//") + 2);
  }

  // The flags of the election SCOPE=SOURCE (SCOPE a --fence-scope when it
  // ends in "/"), with an upstream timeout of 2 s.
  static std::vector<std::string> ElectionFlags(const std::string& scope,
                                                const std::string& source) {
    std::vector<std::string> args = {"--election", scope + "=" + source,
                                     "--upstream-timeout", "2"};
    if (scope.back() == '/') {
      args.insert(args.begin(), {"--fence-scope", scope});
    }
    return args;
  }
  // `fencepost serve` with ElectionFlags on `data_dir` (a fresh one when
  // empty).
  // `extra` flags follow them.
  std::unique_ptr<ServerProcess> Serve(
      const std::string& scope, const std::string& source,
      const std::string& data_dir = "",
      const std::vector<std::string>& extra = {}) {
    const std::string dir = data_dir.empty()
                                ? dir_ / ("data" + std::to_string(servers_++))
                                : data_dir;
    std::vector<std::string> args = ElectionFlags(scope, source);
    args.insert(args.end(), extra.begin(), extra.end());
    return std::make_unique<ServerProcess>(dir, args);
  }

  // A candidate of `etcdctl elect NAME PROPOSAL`.
  std::unique_ptr<Child> Elect(const Etcd& etcd, const std::string& name,
                               const std::string& proposal) {
    std::vector<std::string> argv = {"etcdctl"};
    for (const std::string& a : etcd.CtlArgs()) argv.push_back(a);
    argv.insert(argv.end(), {"elect", name, proposal});
    return std::make_unique<Child>(argv, dir_ / ("elect-" + proposal + ".out"));
  }
  // A candidate of kazoo's Election on the suite's ZooKeeper.
  std::unique_ptr<Child> Kazoo(const std::string& path, const std::string& id) {
    return std::make_unique<Child>(
        std::vector<std::string>{kPython, *suite_dir_ / "candidate.py", "run",
                                 ZooKeeperHosts(), path, id},
        dir_ / ("kazoo-" + id + ".out"));
  }
  // A candidate of kazoo's Election on the suite's ZooKeeper, authenticated
  // as `user` and making its nodes with the digest ACL of user:password.
  std::unique_ptr<Child> DigestKazoo(const std::string& path,
                                     const std::string& id,
                                     const std::string& user,
                                     const std::string& password) {
    return std::make_unique<Child>(
        std::vector<std::string>{kPython, *suite_dir_ / "digest_candidate.py",
                                 "run", ZooKeeperHosts(), path, id, user,
                                 password},
        dir_ / ("kazoo-digest-" + id + ".out"));
  }
  std::vector<Candidate> KazooCandidates(const std::string& path) {
    std::istringstream in(Shell(kPython + " " + *suite_dir_ / "candidate.py" +
                                " list " + ZooKeeperHosts() + " " + path +
                                " 2>/dev/null"));
    std::vector<Candidate> out;
    std::string node;
    std::uint64_t czxid;
    while (in >> node >> czxid) out.push_back({node, czxid, "", 0});
    return out;
  }
  // `fencepost lease run NAME --via VIA --holder HOLDER --ttl 2s` whose job
  // writes its FENCING_TOKEN to a file and leads until told to stop.
  std::unique_ptr<Child> LeaseRun(const std::string& name,
                                  const std::string& via,
                                  const std::string& holder) {
    return std::make_unique<Child>(
        std::vector<std::string>{
            FENCEPOST_BINARY, "lease", "run", name, "--via", via, "--holder",
            holder, "--ttl", "2s", "--grace", "2s", "--", "sh", "-c",
            "echo \"$FENCING_TOKEN\" >\"$0.tmp\" && mv \"$0.tmp\" \"$0\" && "
            "exec sleep 60",
            TokenFile(holder)},
        dir_ / ("lease-run-" + holder + ".out"));
  }
  std::string TokenFile(const std::string& holder) const {
    return dir_ / ("token-" + holder);
  }
  // The token `lease run` gave HOLDER's job; 0 until it runs.
  std::uint64_t JobToken(const std::string& holder) const {
    const std::string t = ReadFile(TokenFile(holder));
    return t.empty() ? 0 : std::stoull(t);
  }

  // Checks that, the fence of `key` being at the holder's `holder` token
  // raised by the election from `old`: the old holder is refused (also its
  // reads), tokens nobody was elected with are refused and move nothing,
  // the holder's own token is taken, the stream told the raise's cause.
  void ExpectOnlyTheHolderPasses(const ServerProcess& s, const std::string& key,
                                 std::uint64_t old, std::uint64_t holder,
                                 Watcher& watcher) {
    const double unverified_before =
        Metric(s, "fencepost_unverified_tokens_total");
    const HttpResponse stale = Put(s, key, old, "old holder");
    EXPECT_EQ(Verdict(stale), "409 stale-token") << stale.body;
    EXPECT_NE(stale.body.find("\"current_token\":" + std::to_string(holder)),
              std::string::npos)
        << stale.body;
    const HttpResponse read = Request(s.data_port(), "GET", "/" + key,
                                      {{"Fencing-Token", std::to_string(old)}});
    EXPECT_EQ(Verdict(read), "409 stale-token")
        << "a fenced read by the replaced holder\n"
        << read.body;

    for (const std::uint64_t nobody : {holder + 1000, kMaxToken}) {
      const HttpResponse w = Put(s, key, nobody, "nobody's");
      EXPECT_EQ(Verdict(w), "409 unverified-token")
          << "token " << nobody << "\n"
          << w.body;
      const HttpResponse b = Bump(s, key, nobody);
      EXPECT_EQ(Verdict(b), "409 unverified-token") << "bump " << nobody << "\n"
                                                    << b.body;
    }
    const HttpResponse del =
        Request(s.data_port(), "DELETE", "/" + key,
                {{"Fencing-Token", std::to_string(kMaxToken)}});
    EXPECT_EQ(Verdict(del), "409 unverified-token") << del.body;
    EXPECT_EQ(FenceOf(s, key), holder) << "refused tokens moved the fence";
    EXPECT_GE(Metric(s, "fencepost_unverified_tokens_total"),
              unverified_before + 5);

    const HttpResponse own = Put(s, key, holder, "the holder's");
    EXPECT_TRUE(Accepted(own)) << Verdict(own) << " " << own.body;
    const HttpResponse value =
        Request(s.data_port(), "GET", "/" + key,
                {{"Fencing-Token", std::to_string(holder)}});
    EXPECT_EQ(value.status, 200);
    EXPECT_EQ(value.body, "the holder's");
    EXPECT_EQ(FenceOf(s, key), holder);
    EXPECT_TRUE(SawElectionRaise(watcher, holder))
        << "no fence event of " << holder << " with cause election\n"
        << watcher.raw();
    EXPECT_NE(s.Log().find("election_raised"), std::string::npos) << s.Log();
  }

  // Checks that `s`, started on a data directory whose fence of `key` is at
  // `fence`, cannot read the election of `scope` (the source refuses it):
  // it logs the source down, is not ready, counts the source down, refuses
  // the holder's `higher` token with 503 election-unavailable, and leaves
  // the fence where it was.
  void ExpectSourceDown(const ServerProcess& s, const std::string& scope,
                        const std::string& key, std::uint64_t fence,
                        std::uint64_t higher) {
    ASSERT_TRUE(Await([&] {
      return s.Log().find("election_source_down") != std::string::npos;
    })) << "no election_source_down\n"
        << s.Log();
    const HttpResponse ready = Request(s.admin_port(), "GET", "/readyz");
    EXPECT_EQ(ready.status, 503) << "ready without reading the election\n"
                                 << ready.body;
    EXPECT_EQ(Metric(s, Up(scope)), 0) << s.Log();
    const HttpResponse w = Put(s, key, higher, "the holder's, unverifiable");
    EXPECT_EQ(Verdict(w), "503 election-unavailable") << w.body;
    const HttpResponse b = Bump(s, key, higher);
    EXPECT_EQ(Verdict(b), "503 election-unavailable") << b.body;
    EXPECT_EQ(FenceOf(s, key), fence) << "the fence moved\n" << s.Log();
    EXPECT_EQ(Request(s.admin_port(), "GET", "/readyz").status, 503);
    EXPECT_NE(s.Log().find("election_source_down"), std::string::npos);
  }

  inline static std::unique_ptr<TempDir> suite_dir_;
  inline static std::string zk_url_;
  TempDir dir_;
  int servers_ = 0;
};

// etcdctl elect: A leads, B waits. A's token writes; B's (a candidate, not
// the holder) is unverified. A resigns: without any write of B, the fence
// is at B's token. B is killed and its lease ends: C is elected, raised.
TEST_F(ElectionTest, EtcdctlElectRaisesTheFenceWithoutAWrite) {
  Etcd etcd;
  ASSERT_FALSE(etcd.url().empty()) << "etcd did not start";
  auto a = Elect(etcd, "orders-election", "A");
  ASSERT_TRUE(a->AwaitOutput("\nA\n")) << a->Output();
  auto b = Elect(etcd, "orders-election", "B");
  const auto candidates = etcd.AwaitCandidates("orders-election", 2);
  ASSERT_EQ(candidates.size(), 2u);
  ASSERT_EQ(candidates[0].value, "A");
  const std::uint64_t ta = candidates[0].token, tb = candidates[1].token;

  auto s = Serve("orders/", etcd.url() + "/orders-election");
  ASSERT_TRUE(AwaitReady(*s)) << s->Log();
  EXPECT_EQ(Metric(*s, Up("orders/")), 1);
  ASSERT_TRUE(AwaitFence(*s, "orders/7", ta)) << s->Log();
  EXPECT_EQ(FenceOf(*s, "orders/7"), ta);
  Watcher watcher(s->admin_port(), "/v1/watch");
  ASSERT_TRUE(watcher.Opened()) << watcher.raw();

  const HttpResponse first = Put(*s, "orders/7", ta, "from A");
  EXPECT_TRUE(Accepted(first)) << Verdict(first) << " " << first.body;
  // Leases of fencepost's own on an elected fence are refused.
  const HttpResponse lease =
      Request(s->admin_port(), "PUT", "/v1/leases/orders/leader", {},
              R"({"holder":"L","ttl_ms":5000})");
  EXPECT_EQ(Verdict(lease), "409 fence-elected") << lease.body;
  // B is a candidate, not the holder.
  const HttpResponse early = Put(*s, "orders/7", tb, "B too early");
  EXPECT_EQ(Verdict(early), "409 unverified-token") << early.body;
  EXPECT_EQ(FenceOf(*s, "orders/7"), ta);
  const double changes = Metric(*s, HolderChanges("orders/"));

  a->Signal(SIGINT);  // etcdctl elect resigns on SIGINT (and SIGTERM)
  const auto raised = AwaitFence(*s, "orders/7", tb);
  ASSERT_TRUE(raised) << "the fence never reached B's token " << tb
                      << " without a write\n"
                      << s->Log();
  Timing("etcdctl elect: A resigns -> fence at B's token", *raised);
  EXPECT_TRUE(b->AwaitOutput("\nB\n")) << b->Output();
  EXPECT_EQ(FenceOf(*s, "orders/7"), tb);
  ExpectOnlyTheHolderPasses(*s, "orders/7", ta, tb, watcher);
  EXPECT_GE(Metric(*s, HolderChanges("orders/")), changes + 1);

  // B dies without resigning; its lease ends (revoked, as its expiry would).
  auto c = Elect(etcd, "orders-election", "C");
  const auto after_b = etcd.AwaitCandidates("orders-election", 2);
  ASSERT_EQ(after_b.size(), 2u);
  const std::uint64_t tc = after_b[1].token;
  b->Signal(SIGKILL);
  b->Wait(10);
  const auto revoked = Clock::now();
  etcd.Revoke(after_b[0]);
  const auto raised_c = AwaitFence(*s, "orders/7", tc);
  ASSERT_TRUE(raised_c) << s->Log();
  Timing("etcdctl elect: B killed, lease revoked -> fence at C's token",
         SecondsSince(revoked));
  ExpectHandedOver(*s, "orders/7", tb, tc);
}

// The project's own etcd elector (`lease run --via etcd://`, key
// fencepost/leases/NAME): X leads, Y waits; X gives the lease back; the
// fence is at Y's token before Y's job does anything.
TEST_F(ElectionTest, LeaseRunViaEtcdRaisesTheFence) {
  Etcd etcd;
  ASSERT_FALSE(etcd.url().empty()) << "etcd did not start";
  auto s = Serve("jobs/", etcd.url() + "/fencepost/leases/jobs");
  ASSERT_TRUE(AwaitReady(*s)) << "nobody holds it: ready once read\n"
                              << s->Log();
  EXPECT_EQ(FenceOf(*s, "jobs/1"), 0u);
  Watcher watcher(s->admin_port(), "/v1/watch");
  ASSERT_TRUE(watcher.Opened()) << watcher.raw();

  auto x = LeaseRun("jobs", etcd.url(), "X");
  ASSERT_TRUE(Await([&] { return JobToken("X") != 0; })) << x->Output();
  const std::uint64_t tx = JobToken("X");
  const auto first = AwaitFence(*s, "jobs/1", tx);
  ASSERT_TRUE(first) << "X's election never raised the fence\n" << s->Log();
  Timing("lease run --via etcd: X's job started -> fence at X's token", *first);
  EXPECT_TRUE(Accepted(Put(*s, "jobs/1", tx, "from X")));

  auto y = LeaseRun("jobs", etcd.url(), "Y");
  ASSERT_TRUE(y->AwaitOutput("waiting for jobs")) << y->Output();
  const auto released = Clock::now();
  x->Signal(SIGTERM);
  std::uint64_t ty = 0;
  ASSERT_TRUE(Await([&] {
    ty = JobToken("Y");
    return ty != 0 && FenceOf(*s, "jobs/1") >= ty;
  })) << "Y: "
      << y->Output() << "\n"
      << s->Log();
  Timing("lease run --via etcd: X gives the lease back -> fence at Y's",
         SecondsSince(released));
  EXPECT_GT(ty, tx);
  EXPECT_EQ(FenceOf(*s, "jobs/1"), ty);
  ExpectOnlyTheHolderPasses(*s, "jobs/1", tx, ty, watcher);
  s.reset();

  // A data directory holding a live lease of fencepost's own on the fence
  // is refused with --election on that fence (exit 2).
  const std::string leased = dir_ / "leased";
  {
    ServerProcess plain(leased, {"--fence-scope", "jobs/"});
    const HttpResponse granted =
        Request(plain.admin_port(), "PUT", "/v1/leases/jobs/leader", {},
                R"({"holder":"L","ttl_ms":600000})");
    ASSERT_EQ(granted.status, 200) << granted.body;
  }
  Child refused(
      {FENCEPOST_BINARY, "serve", "--listen", "127.0.0.1:0", "--admin-listen",
       "127.0.0.1:0", "--data-dir", leased, "--fence-scope", "jobs/",
       "--election", "jobs/=" + etcd.url() + "/fencepost/leases/jobs"},
      dir_ / "refused.out");
  EXPECT_EQ(refused.Wait(10), 2)
      << "a live lease on an elected fence at start\n"
      << refused.Output();
}

// kazoo's Election on ZooKeeper: A leads, B waits; A is killed and its
// session expires: the fence is at B's czxid; B closes its session: C.
TEST_F(ElectionTest, KazooElectionRaisesTheFence) {
  ASSERT_FALSE(zk_url_.empty()) << "ZooKeeper did not start";
  const std::string path = "/elect/orders";
  auto a = Kazoo(path, "A");
  ASSERT_TRUE(a->AwaitOutput("elected ")) << a->Output();
  auto b = Kazoo(path, "B");
  std::vector<Candidate> candidates;
  ASSERT_TRUE(
      Await([&] { return (candidates = KazooCandidates(path)).size() == 2; }));
  const std::uint64_t ta = candidates[0].token, tb = candidates[1].token;
  ASSERT_NE(a->Output().find(candidates[0].name), std::string::npos);

  auto s = Serve("orders/", "zookeeper://" + ZooKeeperHosts() + path);
  ASSERT_TRUE(AwaitReady(*s)) << s->Log();
  ASSERT_TRUE(AwaitFence(*s, "orders/1", ta)) << s->Log();
  EXPECT_EQ(FenceOf(*s, "orders/1"), ta);
  EXPECT_EQ(Metric(*s, Up("orders/")), 1);
  Watcher watcher(s->admin_port(), "/v1/watch");
  ASSERT_TRUE(watcher.Opened()) << watcher.raw();
  EXPECT_TRUE(Accepted(Put(*s, "orders/1", ta, "from A")));
  const HttpResponse early = Put(*s, "orders/1", tb, "B too early");
  EXPECT_EQ(Verdict(early), "409 unverified-token") << early.body;

  const auto killed = Clock::now();
  a->Signal(SIGKILL);
  Clock::time_point elected{};
  ASSERT_TRUE(Await([&] {
    if (elected == Clock::time_point{} &&
        b->Output().find("elected ") != std::string::npos) {
      elected = Clock::now();
    }
    return FenceOf(*s, "orders/1") >= tb;
  })) << b->Output()
      << s->Log();
  const auto raised = Clock::now();
  Timing("kazoo: A killed (2 s session) -> fence at B's czxid",
         SecondsSince(killed));
  if (elected != Clock::time_point{}) {
    Timing("kazoo: B saw itself elected -> fence at B's czxid (<0: before)",
           std::chrono::duration<double>(raised - elected).count());
  }
  ExpectOnlyTheHolderPasses(*s, "orders/1", ta, tb, watcher);

  auto c = Kazoo(path, "C");
  ASSERT_TRUE(
      Await([&] { return (candidates = KazooCandidates(path)).size() == 2; }));
  const std::uint64_t tc = candidates[1].token;
  const auto closed = Clock::now();
  b->Signal(SIGTERM);  // closes its session: its node goes at once
  ASSERT_TRUE(AwaitFence(*s, "orders/1", tc)) << s->Log();
  Timing("kazoo: B closes its session -> fence at C's czxid",
         SecondsSince(closed));
  ExpectHandedOver(*s, "orders/1", tb, tc);
}

// The project's own ZooKeeper elector (`lease run --via zk://`, nodes
// /fencepost/leases/NAME/n_SEQUENCE), the source spelled zk://.
TEST_F(ElectionTest, LeaseRunViaZooKeeperRaisesTheFence) {
  ASSERT_FALSE(zk_url_.empty()) << "ZooKeeper did not start";
  auto s = Serve("batch/", zk_url_ + "/fencepost/leases/batch");
  ASSERT_TRUE(AwaitReady(*s)) << s->Log();
  Watcher watcher(s->admin_port(), "/v1/watch");
  ASSERT_TRUE(watcher.Opened()) << watcher.raw();
  auto x = LeaseRun("batch", zk_url_, "X");
  ASSERT_TRUE(Await([&] { return JobToken("X") != 0; })) << x->Output();
  const std::uint64_t tx = JobToken("X");
  ASSERT_TRUE(AwaitFence(*s, "batch/1", tx)) << s->Log();
  EXPECT_TRUE(Accepted(Put(*s, "batch/1", tx, "from X")));

  auto y = LeaseRun("batch", zk_url_, "Y");
  ASSERT_TRUE(y->AwaitOutput("waiting for batch")) << y->Output();
  const auto released = Clock::now();
  x->Signal(SIGTERM);
  std::uint64_t ty = 0;
  ASSERT_TRUE(Await([&] {
    ty = JobToken("Y");
    return ty != 0 && FenceOf(*s, "batch/1") >= ty;
  })) << y->Output()
      << s->Log();
  Timing("lease run --via zk: X gives the lease back -> fence at Y's",
         SecondsSince(released));
  EXPECT_GT(ty, tx);
  ExpectOnlyTheHolderPasses(*s, "batch/1", tx, ty, watcher);
}

// fencepost stopped while the election changes hands, then started: the
// first write it answers already sees the new holder's fence. Started while
// etcd is frozen: not ready, and no write at the stale fence lands.
TEST_F(ElectionTest, ARestartCatchesUpBeforeAnyWrite) {
  Etcd etcd;
  ASSERT_FALSE(etcd.url().empty()) << "etcd did not start";
  auto a = Elect(etcd, "restart", "A");
  ASSERT_TRUE(a->AwaitOutput("\nA\n")) << a->Output();
  auto b = Elect(etcd, "restart", "B");
  ASSERT_EQ(etcd.AwaitCandidates("restart", 2).size(), 2u);
  auto c = Elect(etcd, "restart", "C");
  const auto candidates = etcd.AwaitCandidates("restart", 3);
  ASSERT_EQ(candidates.size(), 3u);
  const std::uint64_t ta = candidates[0].token, tb = candidates[1].token,
                      tc = candidates[2].token;
  const std::string data = dir_ / "data";
  const std::string source = etcd.url() + "/restart";

  auto s = Serve("orders/", source, data);
  ASSERT_TRUE(AwaitFence(*s, "orders/1", ta)) << s->Log();
  ASSERT_TRUE(Accepted(Put(*s, "orders/1", ta, "from A")));
  ExpectCleanStop(s);

  a->Signal(SIGINT);
  ASSERT_TRUE(b->AwaitOutput("\nB\n")) << b->Output();
  s = Serve("orders/", source, data);
  // No look at the fence first: A's write is the first request.
  const HttpResponse stale = Put(*s, "orders/1", ta, "A after the restart");
  EXPECT_EQ(Verdict(stale), "409 stale-token") << stale.body << "\n"
                                               << s->Log();
  EXPECT_EQ(FenceOf(*s, "orders/1"), tb);
  EXPECT_TRUE(AwaitReady(*s)) << s->Log();
  EXPECT_EQ(Request(s->data_port(), "GET", "/orders/1").body, "from A");
  ExpectCleanStop(s);

  // C is elected while fencepost is stopped; fencepost starts while etcd
  // is frozen: B's token is the fence it has on disk, but not the holder's.
  b->Signal(SIGINT);
  ASSERT_TRUE(c->AwaitOutput("\nC\n")) << c->Output();
  ASSERT_TRUE(etcd.Freeze());
  std::unique_ptr<ServerProcess> frozen_start;
  try {
    frozen_start = Serve("orders/", source, data);
  } catch (const std::exception& e) {
    etcd.Thaw();
    FAIL() << "fencepost did not start while the election's source was "
              "unreachable: "
           << e.what();
  }
  const HttpResponse not_ready =
      Request(frozen_start->admin_port(), "GET", "/readyz");
  EXPECT_EQ(not_ready.status, 503) << "ready before the election was read\n"
                                   << not_ready.body;
  const auto sent = Clock::now();
  const HttpResponse waiting = Put(*frozen_start, "orders/1", tb, "B stale");
  Timing("started with etcd frozen: B's write at the fence answered after",
         SecondsSince(sent));
  EXPECT_FALSE(Accepted(waiting))
      << "a write at the fence on disk landed before the election was read\n"
      << waiting.body;
  EXPECT_EQ(Verdict(waiting), "503 election-unavailable") << waiting.body;
  const auto thawed = Clock::now();
  etcd.Thaw();
  EXPECT_TRUE(AwaitReady(*frozen_start)) << frozen_start->Log();
  Timing("etcd thawed -> fencepost ready", SecondsSince(thawed));
  EXPECT_EQ(FenceOf(*frozen_start, "orders/1"), tc);
  EXPECT_EQ(Verdict(Put(*frozen_start, "orders/1", tb, "B stale")),
            "409 stale-token");
  EXPECT_TRUE(Accepted(Put(*frozen_start, "orders/1", tc, "from C")));
}

// etcd frozen: the fence's own token goes on, a higher one (even a
// candidate's) is 503 after about --upstream-timeout, and the fence stays.
// Thawed, elections go on.
TEST_F(ElectionTest, AFrozenSourceHoldsHigherTokensAndTheFenceStays) {
  Etcd etcd;
  ASSERT_FALSE(etcd.url().empty()) << "etcd did not start";
  auto a = Elect(etcd, "frozen", "A");
  ASSERT_TRUE(a->AwaitOutput("\nA\n")) << a->Output();
  auto b = Elect(etcd, "frozen", "B");
  const auto candidates = etcd.AwaitCandidates("frozen", 2);
  ASSERT_EQ(candidates.size(), 2u);
  const std::uint64_t ta = candidates[0].token, tb = candidates[1].token;
  auto s = Serve("orders/", etcd.url() + "/frozen");
  ASSERT_TRUE(AwaitFence(*s, "orders/1", ta)) << s->Log();
  ASSERT_TRUE(AwaitReady(*s));

  ASSERT_TRUE(etcd.Freeze());
  auto sent = Clock::now();
  const HttpResponse own = Put(*s, "orders/1", ta, "A, etcd frozen");
  Timing("etcd frozen: a write at the fence's own token answered after",
         SecondsSince(sent));
  EXPECT_TRUE(Accepted(own)) << Verdict(own) << " " << own.body;
  sent = Clock::now();
  const HttpResponse higher = Put(*s, "orders/1", tb, "B, unverifiable");
  Timing("etcd frozen: a higher token's write refused after",
         SecondsSince(sent));
  EXPECT_EQ(Verdict(higher), "503 election-unavailable") << higher.body;
  sent = Clock::now();
  const HttpResponse bump = Bump(*s, "orders/1", ta + 1);
  Timing("etcd frozen: a higher token's bump refused after",
         SecondsSince(sent));
  EXPECT_EQ(Verdict(bump), "503 election-unavailable") << bump.body;
  EXPECT_EQ(FenceOf(*s, "orders/1"), ta);
  const auto frozen = Clock::now();
  EXPECT_TRUE(Await([&] { return Metric(*s, Up("orders/")) == 0; }))
      << "fencepost_election_up stayed at " << Metric(*s, Up("orders/"));
  Timing("etcd frozen -> fencepost_election_up 0 (from the last refusal)",
         SecondsSince(frozen));
  EXPECT_EQ(Request(s->admin_port(), "GET", "/livez").status, 200);

  etcd.Thaw();
  EXPECT_TRUE(Await([&] { return Metric(*s, Up("orders/")) == 1; }));
  a->Signal(SIGINT);
  const auto raised = AwaitFence(*s, "orders/1", tb);
  ASSERT_TRUE(raised) << s->Log();
  Timing("etcd thawed, A resigns -> fence at B's token", *raised);
  EXPECT_EQ(FenceOf(*s, "orders/1"), tb);
  EXPECT_EQ(Verdict(Put(*s, "orders/1", ta)), "409 stale-token");
  EXPECT_TRUE(Accepted(Put(*s, "orders/1", tb, "from B")));
}

// etcd killed: the fence's token goes on, a higher one is 503. etcd
// started again on its data: a holder change is raised. fencepost frozen
// while etcd dies, comes back, changes hands and is compacted: the raise
// is not missed. A compaction around a holder change with the watch open:
// not missed either. etcd restored from nothing (revisions from 1 again):
// its holder is below the fence and is not obeyed.
TEST_F(ElectionTest, EtcdKilledCompactedOrRestoredMissesNoRaise) {
  Etcd etcd;
  ASSERT_FALSE(etcd.url().empty()) << "etcd did not start";
  const std::string election = "kills";
  const Candidate b = etcd.PutCandidate(election, "b");
  const Candidate c = etcd.PutCandidate(election, "c");
  auto s = Serve("orders/", etcd.url() + "/" + election);
  ASSERT_TRUE(AwaitFence(*s, "orders/1", b.token)) << s->Log();
  Watcher watcher(s->admin_port(), "/v1/watch");
  ASSERT_TRUE(watcher.Opened()) << watcher.raw();
  ASSERT_TRUE(Accepted(Put(*s, "orders/1", b.token, "from b")));

  etcd.Kill();
  EXPECT_TRUE(Accepted(Put(*s, "orders/1", b.token, "b, etcd down")));
  const HttpResponse higher = Bump(*s, "orders/1", c.token);
  EXPECT_EQ(Verdict(higher), "503 election-unavailable") << higher.body;
  EXPECT_EQ(FenceOf(*s, "orders/1"), b.token);
  ASSERT_TRUE(etcd.Restart(false)) << "etcd did not start again";
  auto changed = Clock::now();
  etcd.Revoke(b);
  auto raised = AwaitFence(*s, "orders/1", c.token);
  ASSERT_TRUE(raised) << s->Log();
  Timing("etcd restarted, holder b revoked -> fence at c's",
         SecondsSince(changed));

  // fencepost frozen across etcd's death, a holder change and a
  // compaction past every revision it has seen.
  const Candidate d = etcd.PutCandidate(election, "d");
  ASSERT_TRUE(testing::Freeze(s->pid()));
  etcd.Kill();
  ASSERT_TRUE(etcd.Restart(false)) << "etcd did not start again";
  etcd.Revoke(c);
  for (int i = 0; i < 5; ++i) etcd.Ctl("put noise " + std::to_string(i));
  const std::string compacted =
      etcd.Ctl("compact --physical " + std::to_string(etcd.Revision()));
  s->Signal(SIGCONT);
  changed = Clock::now();
  raised = AwaitFence(*s, "orders/1", d.token);
  ASSERT_TRUE(raised) << compacted << "\n" << s->Log();
  Timing("fencepost thawed after etcd restart+change+compaction -> d's",
         *raised);
  EXPECT_EQ(FenceOf(*s, "orders/1"), d.token);
  EXPECT_EQ(Verdict(Put(*s, "orders/1", c.token)), "409 stale-token");

  // A compaction on each side of a holder change, the watch open.
  const Candidate e = etcd.PutCandidate(election, "e");
  etcd.Ctl("compact --physical " + std::to_string(etcd.Revision()));
  changed = Clock::now();
  etcd.Revoke(d);
  etcd.Ctl("put noise again");
  etcd.Ctl("compact --physical " + std::to_string(etcd.Revision()));
  raised = AwaitFence(*s, "orders/1", e.token);
  ASSERT_TRUE(raised) << s->Log();
  Timing("compactions around a holder change -> fence at e's",
         SecondsSince(changed));

  // etcd restored from nothing: its revisions start again from 1, below
  // the fence. Counted, never obeyed.
  etcd.Kill();
  ASSERT_TRUE(etcd.Restart(true)) << "etcd did not start again";
  const Candidate low = etcd.PutCandidate(election, "low");
  ASSERT_LT(low.token, e.token);
  EXPECT_TRUE(Await([&] {
    return Metric(*s,
                  "fencepost_election_holder_behind_total{scope=\"orders/"
                  "\"}") >= 1;
  })) << "a holder below the fence was not counted\n"
      << s->Log();
  EXPECT_EQ(FenceOf(*s, "orders/1"), e.token);
  EXPECT_EQ(Verdict(Put(*s, "orders/1", low.token, "low")), "409 stale-token");
  EXPECT_TRUE(Accepted(Put(*s, "orders/1", e.token, "from e")));

  const std::vector<std::uint64_t> tokens = FenceTokens(watcher);
  EXPECT_TRUE(std::is_sorted(tokens.begin(), tokens.end()))
      << "a fence went down\n"
      << watcher.raw();
  for (const std::uint64_t t : {c.token, d.token, e.token}) {
    EXPECT_NE(std::find(tokens.begin(), tokens.end(), t), tokens.end())
        << "no fence event of " << t << "\n"
        << watcher.raw();
  }
}

// ZooKeeper stopped: the fence's own token goes on, a higher one is 503,
// the fence never goes down, and it is counted down.
TEST_F(ElectionTest, AStoppedZooKeeperHoldsHigherTokens) {
  TempDir zk_dir;
  const std::string url = ShellLine(kZooKeeperSh + " start " + zk_dir / "zk");
  ASSERT_FALSE(url.empty()) << "ZooKeeper did not start";
  struct StopZooKeeper {
    std::string dir;
    ~StopZooKeeper() { Shell(kZooKeeperSh + " stop " + dir); }
  } stop_zookeeper{zk_dir / "zk"};
  const std::string hosts = url.substr(url.find("//") + 2);
  auto a = std::make_unique<Child>(
      std::vector<std::string>{kPython, *suite_dir_ / "candidate.py", "run",
                               hosts, "/elect/down", "A"},
      dir_ / "kazoo-down-A.out");
  ASSERT_TRUE(a->AwaitOutput("elected ")) << a->Output();
  std::istringstream elected(a->Output());
  std::string word, node;
  std::uint64_t ta = 0;
  elected >> word >> node >> ta;
  ASSERT_GT(ta, 0u) << a->Output();

  auto s = Serve("orders/", "zk://" + hosts + "/elect/down");
  ASSERT_TRUE(AwaitFence(*s, "orders/1", ta)) << s->Log();
  Shell(kZooKeeperSh + " stop " + zk_dir / "zk");
  auto sent = Clock::now();
  EXPECT_TRUE(Accepted(Put(*s, "orders/1", ta, "A, ZooKeeper down")));
  Timing("ZooKeeper stopped: a write at the fence's token answered after",
         SecondsSince(sent));
  sent = Clock::now();
  const HttpResponse higher = Put(*s, "orders/1", ta + 1, "higher");
  Timing("ZooKeeper stopped: a higher token's write refused after",
         SecondsSince(sent));
  EXPECT_EQ(Verdict(higher), "503 election-unavailable") << higher.body;
  EXPECT_EQ(FenceOf(*s, "orders/1"), ta);
  EXPECT_TRUE(Await([&] { return Metric(*s, Up("orders/")) == 0; }))
      << s->Log();
  a->Signal(SIGKILL);  // its session cannot be closed: ZooKeeper is gone
}

// Two replicas sharing their fences in etcd (--fence-store etcd://), each
// following the same election: both raise, the fence moves once, and the
// old holder is refused on both.
TEST_F(ElectionTest, ReplicasRaiseOnce) {
  Etcd etcd;
  ASSERT_FALSE(etcd.url().empty()) << "etcd did not start";
  auto a = Elect(etcd, "replicated", "A");
  ASSERT_TRUE(a->AwaitOutput("\nA\n")) << a->Output();
  auto b = Elect(etcd, "replicated", "B");
  const auto candidates = etcd.AwaitCandidates("replicated", 2);
  ASSERT_EQ(candidates.size(), 2u);
  const std::uint64_t ta = candidates[0].token, tb = candidates[1].token;
  std::vector<std::string> args =
      ElectionFlags("orders/", etcd.url() + "/replicated");
  args.insert(args.end(),
              {"--fence-store", etcd.url() + "/replicas", "--backend", "etcd"});
  auto r1 = std::make_unique<ServerProcess>("", args);
  auto r2 = std::make_unique<ServerProcess>("", args);
  for (const auto* r : {r1.get(), r2.get()}) {
    ASSERT_TRUE(AwaitFence(*r, "orders/1", ta)) << r->Log();
  }
  Watcher w1(r1->admin_port(), "/v1/watch");
  Watcher w2(r2->admin_port(), "/v1/watch");
  ASSERT_TRUE(w1.Opened() && w2.Opened());
  std::this_thread::sleep_for(milliseconds(300));
  ASSERT_TRUE(Accepted(Put(*r1, "orders/1", ta, "from A")));

  const auto resigned = Clock::now();
  a->Signal(SIGINT);
  for (const auto* r : {r1.get(), r2.get()}) {
    ASSERT_TRUE(AwaitFence(*r, "orders/1", tb)) << r->Log();
  }
  Timing("replicas: A resigns -> fence at B's on both", SecondsSince(resigned));
  for (Watcher* w : {&w1, &w2}) {
    const std::vector<std::uint64_t> tokens = FenceTokens(*w);
    EXPECT_EQ(std::count(tokens.begin(), tokens.end(), tb), 1)
        << "the raise to B's token, once on each stream\n"
        << w->raw();
  }
  for (const auto* r : {r1.get(), r2.get()}) {
    EXPECT_EQ(FenceOf(*r, "orders/1"), tb);
    EXPECT_EQ(Verdict(Put(*r, "orders/1", ta, "A again")), "409 stale-token");
    EXPECT_EQ(Verdict(Put(*r, "orders/1", tb + 1, "nobody")),
              "409 unverified-token");
    EXPECT_EQ(ErrorLines(*r), "");
  }
  EXPECT_TRUE(Accepted(Put(*r2, "orders/1", tb, "from B")));
  EXPECT_EQ(Request(r1->data_port(), "GET", "/orders/1").body, "from B");
  // One churn, raised by one replica (raises are idempotent).
  EXPECT_EQ(Metric(*r1, "fencepost_token_advances_total") +
                Metric(*r2, "fencepost_token_advances_total"),
            1);
}

// scenario.sh's race, fenced by the election: eight `lease run --via
// etcd://` processes campaign at once, two rounds. Each job waits until
// fencepost raised the fence to its token by itself, then writes; after
// its lease run ended, each writes once more with its old token (a
// zombie). No accepted write may carry a token below one already accepted
// or raised before it was sent.
TEST_F(ElectionTest, EightLeaseRunsRaceFencedByTheElection) {
  Etcd etcd;
  ASSERT_FALSE(etcd.url().empty()) << "etcd did not start";
  auto s = Serve("race/", etcd.url() + "/fencepost/leases/race");
  ASSERT_TRUE(AwaitReady(*s)) << s->Log();
  const std::string data = "http://127.0.0.1:" + std::to_string(s->data_port());
  const std::string admin =
      "http://127.0.0.1:" + std::to_string(s->admin_port());
  const std::string log = dir_ / "race.log";
  // Lines: NS raised HOLDER TOKEN FENCE WAITED_NS | NS write HOLDER TOKEN
  // CODE END_NS | NS start/end HOLDER TOKEN | NS zombie HOLDER TOKEN CODE
  // END_NS.
  const std::string job = R"sh(
log=$0 data=$1 admin=$2 t=$FENCING_TOKEN h=$FENCEPOST_HOLDER
echo "$t" >"$log.$h"
s=$(date +%s%N)
echo "$s start $h $t" >>"$log"
i=0 f=0
while [ $i -lt 1000 ]; do
  f=$(curl -s "$admin/v1/fences/race/x" | sed -n 's/.*"token":\([0-9]*\).*/\1/p')
  [ "${f:-0}" -ge "$t" ] && break
  i=$((i + 1)); sleep 0.005
done
r=$(date +%s%N)
echo "$r raised $h $t ${f:-0} $((r - s))" >>"$log"
for n in 1 2 3; do
  b=$(date +%s%N)
  code=$(curl -s -o /dev/null -w '%{http_code}' -X PUT -H "Fencing-Token: $t" --data "$h $n" "$data/race/x")
  echo "$b write $h $t $code $(date +%s%N)" >>"$log"
done
sleep 0.05
echo "$(date +%s%N) end $h $t" >>"$log"
)sh";
  const std::string worker = R"sh(
fencepost=$1 via=$2 log=$3 data=$4 admin=$5 h=$6 go=$7 job=$8
while [ ! -e "$go" ]; do sleep 0.002; done
sleep "$(awk -v r="$(od -An -N2 -tu2 /dev/urandom)" 'BEGIN { printf "0.%03d", r % 40 }')"
"$fencepost" lease run race --via "$via" --holder "$h" --ttl 2s -- sh -c "$job" "$log" "$data" "$admin" || exit $?
t=$(cat "$log.$h")
b=$(date +%s%N)
code=$(curl -s -o /dev/null -w '%{http_code}' -X PUT -H "Fencing-Token: $t" --data "$h zombie" "$data/race/x")
echo "$b zombie $h $t $code $(date +%s%N)" >>"$log"
)sh";
  struct Line {
    std::uint64_t at = 0, end = 0, waited = 0;
    std::string kind, holder;
    std::uint64_t token = 0, fence = 0;
    int code = 0;
  };
  std::vector<std::uint64_t> waits_ns;
  int zombies_refused = 0, zombies_accepted = 0;
  for (int round = 1; round <= 2; ++round) {
    const std::string go = dir_ / ("go" + std::to_string(round));
    const std::string round_log = log + std::to_string(round);
    std::vector<std::unique_ptr<Child>> workers;
    for (int i = 1; i <= 8; ++i) {
      const std::string holder =
          "r" + std::to_string(round) + "w" + std::to_string(i);
      workers.push_back(std::make_unique<Child>(
          std::vector<std::string>{"sh", "-c", worker, "worker",
                                   FENCEPOST_BINARY, etcd.url(), round_log,
                                   data, admin, holder, go, job},
          dir_ / ("worker-" + holder + ".out")));
    }
    std::this_thread::sleep_for(milliseconds(50));
    { std::ofstream touch(go); }
    const auto until = Clock::now() + std::chrono::seconds(60);
    for (auto& w : workers) {
      const double left =
          std::chrono::duration<double>(until - Clock::now()).count();
      EXPECT_EQ(w->Wait(std::max(left, 0.1)), 0) << w->Output();
    }

    std::vector<Line> lines;
    std::istringstream in(ReadFile(round_log));
    for (std::string text; std::getline(in, text);) {
      std::istringstream f(text);
      Line l;
      f >> l.at >> l.kind >> l.holder >> l.token;
      if (l.kind == "raised") f >> l.fence >> l.waited;
      if (l.kind == "write" || l.kind == "zombie") f >> l.code >> l.end;
      lines.push_back(l);
    }
    std::sort(lines.begin(), lines.end(),
              [](const Line& a, const Line& b) { return a.at < b.at; });
    // One job at a time, tokens going up.
    std::string open;
    std::uint64_t last = 0;
    int jobs = 0;
    for (const Line& l : lines) {
      if (l.kind == "start") {
        EXPECT_EQ(open, "") << l.holder << " started while " << open << " led";
        EXPECT_GT(l.token, last);
        open = l.holder;
        last = l.token;
        ++jobs;
      } else if (l.kind == "end") {
        open.clear();
      } else if (l.kind == "raised") {
        EXPECT_EQ(l.fence, l.token)
            << l.holder << "'s fence was not raised to its token (or "
            << "went past it) without a write";
        waits_ns.push_back(l.waited);
      } else if (l.kind == "write") {
        EXPECT_EQ(l.code / 100, 2)
            << l.holder << "'s write with its own token: " << l.code;
      }
    }
    EXPECT_EQ(jobs, 8) << ReadFile(round_log);
    // No accepted write below a token accepted or raised before it was
    // sent; a zombie after the next holder's raise is refused.
    for (const Line& w : lines) {
      if (w.kind != "write" && w.kind != "zombie") continue;
      if (w.kind == "zombie") {
        (w.code == 409 ? zombies_refused : zombies_accepted)++;
        EXPECT_TRUE(w.code == 409 || w.code / 100 == 2)
            << w.holder << "'s zombie write: " << w.code;
      }
      if (w.code / 100 != 2) continue;
      for (const Line& before : lines) {
        const bool raised = before.kind == "raised" && before.at < w.at &&
                            before.fence == before.token;
        const bool written =
            (before.kind == "write" || before.kind == "zombie") &&
            before.code / 100 == 2 && before.end < w.at;
        if ((raised || written) && before.token > w.token) {
          ADD_FAILURE() << w.kind << " of " << w.holder << " with token "
                        << w.token << " accepted after " << before.kind
                        << " of " << before.holder << " with token "
                        << before.token;
        }
      }
    }
  }
  std::sort(waits_ns.begin(), waits_ns.end());
  if (!waits_ns.empty()) {
    Timing("race: a job's start -> its fence raised (median of " +
               std::to_string(waits_ns.size()) + ")",
           waits_ns[waits_ns.size() / 2] / 1e9);
    Timing("race: a job's start -> its fence raised (max)",
           waits_ns.back() / 1e9);
  }
  std::printf(
      "race: zombie writes refused %d, accepted (before the next "
      "election) %d\n",
      zombies_refused, zombies_accepted);
  EXPECT_EQ(ErrorLines(*s), "");
}

// etcds://: an etcd that serves TLS only and asks for client certificates
// (etcd.sh with ETCD_TLS_DIR), `etcdctl elect` given the client's
// certificate. fencepost with --election-ca, --election-cert and
// --election-key raises the fence to the holder's token, verifies there
// that a waiting candidate's token is not the holder's (409
// unverified-token), and raises the fence to the successor's token when the
// holder resigns. Started on the same data with --election-ca but no client
// certificate, while a third candidate is elected: the source is down
// (/readyz 503, fencepost_election_up 0, the new holder's token 503
// election-unavailable) and the fence stays; given the certificate again,
// fencepost catches up.
TEST_F(ElectionTest, EtcdsSourceWithClientCertificates) {
  const std::string certs = dir_ / "certs";
  ASSERT_EQ(MakeEtcdCertificates(certs), "") << "the certificates";
  Etcd etcd(certs);
  ASSERT_EQ(etcd.url().rfind("etcds://127.0.0.1:", 0), 0u)
      << "etcd did not start with TLS: '" << etcd.url() << "'";
  // etcd refuses a client without a certificate.
  int refused = 0;
  const std::string anonymous = Shell(
      "ETCDCTL_API=3 etcdctl --command-timeout=3s --endpoints=https://" +
          etcd.endpoint() + " --cacert=" + certs + "/ca.pem get anything 2>&1",
      &refused);
  ASSERT_NE(refused, 0) << "etcd answered a client without a certificate\n"
                        << anonymous;

  const std::string election = "secure-election";
  auto a = Elect(etcd, election, "A");
  ASSERT_TRUE(a->AwaitOutput("\nA\n")) << a->Output();
  auto b = Elect(etcd, election, "B");
  const auto candidates = etcd.AwaitCandidates(election, 2);
  ASSERT_EQ(candidates.size(), 2u);
  ASSERT_EQ(candidates[0].value, "A");
  const std::uint64_t ta = candidates[0].token, tb = candidates[1].token;

  const std::string source = etcd.url() + "/" + election;
  const std::string data = dir_ / "data";
  const std::vector<std::string> tls = {
      "--election-ca",       certs + "/ca.pem", "--election-cert",
      certs + "/client.pem", "--election-key",  certs + "/client.key"};
  auto s = Serve("orders/", source, data, tls);
  ASSERT_TRUE(AwaitReady(*s)) << s->Log();
  EXPECT_EQ(Metric(*s, Up("orders/")), 1);
  const auto first = AwaitFence(*s, "orders/1", ta);
  ASSERT_TRUE(first) << s->Log();
  EXPECT_EQ(FenceOf(*s, "orders/1"), ta);
  Watcher watcher(s->admin_port(), "/v1/watch");
  ASSERT_TRUE(watcher.Opened()) << watcher.raw();
  const HttpResponse own = Put(*s, "orders/1", ta, "from A");
  EXPECT_TRUE(Accepted(own)) << Verdict(own) << " " << own.body;
  // B is a candidate, not the holder: a verification read over TLS says so.
  const HttpResponse early = Put(*s, "orders/1", tb, "B too early");
  EXPECT_EQ(Verdict(early), "409 unverified-token") << early.body;
  EXPECT_EQ(FenceOf(*s, "orders/1"), ta);

  a->Signal(SIGINT);  // resigns
  const auto raised = AwaitFence(*s, "orders/1", tb);
  ASSERT_TRUE(raised) << "the fence never reached B's token " << tb << "\n"
                      << s->Log();
  Timing("etcds: A resigns -> fence at B's token", *raised);
  EXPECT_TRUE(b->AwaitOutput("\nB\n")) << b->Output();
  EXPECT_EQ(FenceOf(*s, "orders/1"), tb);
  EXPECT_TRUE(SawElectionRaise(watcher, tb)) << watcher.raw();
  EXPECT_EQ(Verdict(Put(*s, "orders/1", ta, "A again")), "409 stale-token");
  EXPECT_TRUE(Accepted(Put(*s, "orders/1", tb, "from B")));
  EXPECT_EQ(Metric(*s, Up("orders/")), 1);
  EXPECT_EQ(ErrorLines(*s), "");
  ExpectCleanStop(s);

  // C is elected while fencepost is stopped.
  auto c = Elect(etcd, election, "C");
  const auto after_b = etcd.AwaitCandidates(election, 2);
  ASSERT_EQ(after_b.size(), 2u);
  const std::uint64_t tc = after_b[1].token;
  b->Signal(SIGINT);
  ASSERT_TRUE(c->AwaitOutput("\nC\n")) << c->Output();

  // The CA, no client certificate: etcd refuses the TLS handshake.
  s = Serve("orders/", source, data, {"--election-ca", certs + "/ca.pem"});
  ExpectSourceDown(*s, "orders/", "orders/1", tb, tc);
  EXPECT_EQ(Verdict(Put(*s, "orders/1", tc + 1000, "nobody's")),
            "503 election-unavailable");
  EXPECT_EQ(FenceOf(*s, "orders/1"), tb);
  ExpectCleanStop(s);

  // The certificate again: the first read raises the fence to C's token.
  s = Serve("orders/", source, data, tls);
  ASSERT_TRUE(AwaitFence(*s, "orders/1", tc)) << s->Log();
  EXPECT_TRUE(AwaitReady(*s)) << s->Log();
  EXPECT_EQ(FenceOf(*s, "orders/1"), tc);
  EXPECT_TRUE(Accepted(Put(*s, "orders/1", tc, "from C")));
}

// ZooKeeper digest authentication: the election's PATH and every node under
// it carry only the digest ACL of user:password (kazoo's make_digest_acl,
// all permissions), made by kazoo candidates authenticated as that user; a
// client without authentication is refused PATH's children. fencepost with
// --election-digest-file (mode 0600, "user:password") reads the holder,
// raises the fence to its czxid and, when it closes its session, to the
// successor's. Started on the same data without the file, then with a wrong
// password, while a third candidate is elected: it cannot read the election
// (/readyz 503, fencepost_election_up 0, the holder's czxid 503
// election-unavailable) and the fence does not move; with the right file
// again it catches up. A digest file of mode 0644 stops the start (exit 2).
TEST_F(ElectionTest, ZooKeeperDigestAuth) {
  ASSERT_FALSE(zk_url_.empty()) << "ZooKeeper did not start";
  const std::string path = "/guarded/orders";
  const std::string user = "elector", password = "s3cret-pw";
  auto a = DigestKazoo(path, "A", user, password);
  ASSERT_TRUE(a->AwaitOutput("node-acls ")) << a->Output();
  const std::uint64_t ta = ElectedToken(a->Output());
  ASSERT_GT(ta, 0u) << a->Output();
  EXPECT_NE(a->Output().find("path-acls digest\n"), std::string::npos)
      << "PATH's ACL is not the digest ACL alone\n"
      << a->Output();
  EXPECT_NE(a->Output().find("node-acls digest\n"), std::string::npos)
      << "the candidate's node's ACL is not the digest ACL alone\n"
      << a->Output();
  EXPECT_EQ(Shell(kPython + " " + *suite_dir_ / "digest_candidate.py" +
                  " check " + ZooKeeperHosts() + " " + path + " 2>&1"),
            "noauth\n")
      << "a client without authentication was not refused";

  const std::string source = "zookeeper://" + ZooKeeperHosts() + path;
  const std::string digest =
      WriteFileWithMode(dir_ / "digest", user + ":" + password + "\n", 0600);
  const std::string data = dir_ / "data";
  auto s = Serve("orders/", source, data, {"--election-digest-file", digest});
  ASSERT_TRUE(AwaitReady(*s)) << s->Log();
  const auto first = AwaitFence(*s, "orders/1", ta);
  ASSERT_TRUE(first) << s->Log();
  EXPECT_EQ(FenceOf(*s, "orders/1"), ta);
  EXPECT_EQ(Metric(*s, Up("orders/")), 1);
  Watcher watcher(s->admin_port(), "/v1/watch");
  ASSERT_TRUE(watcher.Opened()) << watcher.raw();
  const HttpResponse own = Put(*s, "orders/1", ta, "from A");
  EXPECT_TRUE(Accepted(own)) << Verdict(own) << " " << own.body;
  const HttpResponse nobody = Put(*s, "orders/1", ta + 1000, "nobody's");
  EXPECT_EQ(Verdict(nobody), "409 unverified-token") << nobody.body;

  auto b = DigestKazoo(path, "B", user, password);
  const auto closed = Clock::now();
  a->Signal(SIGTERM);  // closes its session: its node goes at once
  ASSERT_TRUE(b->AwaitOutput("elected ")) << b->Output();
  const std::uint64_t tb = ElectedToken(b->Output());
  ASSERT_GT(tb, ta) << b->Output();
  ASSERT_TRUE(AwaitFence(*s, "orders/1", tb)) << s->Log();
  Timing("digest: A closes its session -> fence at B's czxid",
         SecondsSince(closed));
  EXPECT_EQ(FenceOf(*s, "orders/1"), tb);
  EXPECT_TRUE(SawElectionRaise(watcher, tb)) << watcher.raw();
  EXPECT_EQ(Verdict(Put(*s, "orders/1", ta, "A again")), "409 stale-token");
  EXPECT_TRUE(Accepted(Put(*s, "orders/1", tb, "from B")));
  EXPECT_EQ(ErrorLines(*s), "");
  ExpectCleanStop(s);

  // C is elected while fencepost is stopped.
  auto c = DigestKazoo(path, "C", user, password);
  b->Signal(SIGTERM);
  ASSERT_TRUE(c->AwaitOutput("elected ")) << c->Output();
  const std::uint64_t tc = ElectedToken(c->Output());
  ASSERT_GT(tc, tb) << c->Output();

  {
    SCOPED_TRACE("without --election-digest-file");
    s = Serve("orders/", source, data);
    ExpectSourceDown(*s, "orders/", "orders/1", tb, tc);
    ExpectCleanStop(s);
  }
  {
    SCOPED_TRACE("a wrong password");
    const std::string wrong = WriteFileWithMode(
        dir_ / "digest-wrong", user + ":not-" + password + "\n", 0600);
    s = Serve("orders/", source, data, {"--election-digest-file", wrong});
    ExpectSourceDown(*s, "orders/", "orders/1", tb, tc);
    ExpectCleanStop(s);
  }

  // The right file again: the first read raises the fence to C's czxid.
  s = Serve("orders/", source, data, {"--election-digest-file", digest});
  ASSERT_TRUE(AwaitFence(*s, "orders/1", tc)) << s->Log();
  EXPECT_TRUE(AwaitReady(*s)) << s->Log();
  EXPECT_EQ(FenceOf(*s, "orders/1"), tc);
  EXPECT_TRUE(Accepted(Put(*s, "orders/1", tc, "from C")));
  s.reset();

  // A digest file others can read stops the start, before any port opens.
  const std::string open_digest = WriteFileWithMode(
      dir_ / "digest-0644", user + ":" + password + "\n", 0644);
  const testing::RunResult loose = testing::RunFencepost(
      {"serve", "--listen", "127.0.0.1:0", "--admin-listen", "127.0.0.1:0",
       "--data-dir", dir_ / "data-0644", "--fence-scope", "orders/",
       "--election", "orders/=" + source, "--election-digest-file",
       open_digest});
  EXPECT_EQ(loose.exit_status, 2) << loose.output;
  EXPECT_NE(loose.output.find("readable by others"), std::string::npos)
      << loose.output;
}

// The line of `log` holding `event` ("" when there is none).
std::string LogLine(const std::string& log, const std::string& event) {
  std::istringstream in(log);
  for (std::string line; std::getline(in, line);) {
    if (line.find(event) != std::string::npos) return line;
  }
  return "";
}

// etcd: keys put without a lease are nobody's candidacy. Before any
// candidate, `etcdctl put NAME stray` (the key PATH itself) and `etcdctl put
// NAME/000stray x` (under PATH/): the two oldest keys of the election. Then
// `etcdctl elect NAME A`: the fence is raised to A's key's create_revision,
// not to a stray key's; A's token writes, the stray keys' revisions are
// refused; B waits and is unverified; A resigns: the fence is at B's. The
// only fence events are A's and B's. (etcdctl elect itself, that is
// concurrency.Election, waits for every older key under NAME/ to go, with
// a lease or not: A and B never print their proposal while NAME/000stray
// is there, whereas fencepost names A, the oldest key with a lease.)
//
// Then 17 keys without a lease under another election's PATH/, older than
// its one candidate: the oldest keys the source reads (16) are all
// nobody's, so the source is reported down ("no lease") rather than the
// election read as held by nobody; once they are deleted, the candidate's
// token is raised.
//
// A build that took the oldest key whatever its lease puts the fence at
// the bare key's revision: the fence is not at A's token and A's write is
// 409 unverified-token, which fail here.
TEST_F(ElectionTest, AKeyWithoutALeaseIsNotAHolder) {
  Etcd etcd;
  ASSERT_FALSE(etcd.url().empty()) << "etcd did not start";
  const std::string name = "leaseless";
  auto s = Serve("orders/", etcd.url() + "/" + name);
  ASSERT_TRUE(AwaitReady(*s)) << "nobody holds it: ready once read\n"
                              << s->Log();
  Watcher watcher(s->admin_port(), "/v1/watch");
  ASSERT_TRUE(watcher.Opened()) << watcher.raw();

  etcd.Ctl("put " + name + " stray");
  etcd.Ctl("put " + name + "/000stray x");
  const std::vector<Candidate> bare = etcd.Keys(name);
  const std::vector<Candidate> under = etcd.Candidates(name);
  ASSERT_EQ(bare.size(), 1u) << etcd.Ctl("get --prefix " + name);
  ASSERT_EQ(under.size(), 1u) << etcd.Ctl("get --prefix " + name);
  ASSERT_EQ(bare[0].name, name);
  ASSERT_EQ(under[0].name, name + "/000stray");
  ASSERT_EQ(bare[0].lease, 0);
  ASSERT_EQ(under[0].lease, 0);
  const std::uint64_t stray_bare = bare[0].token, stray = under[0].token;
  ASSERT_GT(stray_bare, 0u);
  ASSERT_GT(stray, stray_bare);

  auto a = Elect(etcd, name, "A");
  const std::vector<Candidate> with_a = etcd.AwaitCandidates(name, 2);
  ASSERT_EQ(with_a.size(), 2u) << a->Output();
  const Candidate ka = with_a[1];
  ASSERT_EQ(with_a[0].name, name + "/000stray");
  ASSERT_NE(ka.lease, 0);
  ASSERT_EQ(ka.name, name + "/" + Hex(ka.lease));
  ASSERT_EQ(ka.value, "A");
  const std::uint64_t ta = ka.token;
  ASSERT_GT(ta, stray);

  ASSERT_TRUE(AwaitFence(*s, "orders/1", ta))
      << "the fence never reached A's token " << ta
      << " (the stray keys: " << stray_bare << ", " << stray << "), it is at "
      << FenceOf(*s, "orders/1") << "\n"
      << s->Log();
  EXPECT_EQ(FenceOf(*s, "orders/1"), ta);
  EXPECT_TRUE(AwaitReady(*s)) << s->Log();
  EXPECT_EQ(Metric(*s, Up("orders/")), 1);
  const HttpResponse own = Put(*s, "orders/1", ta, "from A");
  EXPECT_TRUE(Accepted(own)) << Verdict(own) << " " << own.body;
  // The stray keys were put before A campaigned, so their revisions are
  // below A's, at which the fence stands: stale, decided without the
  // source (a revision above the fence would be 409 unverified-token).
  for (const std::uint64_t t : {stray_bare, stray}) {
    const HttpResponse w = Put(*s, "orders/1", t, "a stray key's revision");
    EXPECT_EQ(Verdict(w), "409 stale-token") << "token " << t << "\n" << w.body;
    EXPECT_NE(w.body.find("\"current_token\":" + std::to_string(ta)),
              std::string::npos)
        << w.body;
  }
  EXPECT_EQ(FenceOf(*s, "orders/1"), ta);

  auto b = Elect(etcd, name, "B");
  const std::vector<Candidate> with_b = etcd.AwaitCandidates(name, 3);
  ASSERT_EQ(with_b.size(), 3u) << b->Output();
  ASSERT_EQ(with_b[1].name, ka.name);
  ASSERT_EQ(with_b[2].value, "B");
  const std::uint64_t tb = with_b[2].token;
  const HttpResponse early = Put(*s, "orders/1", tb, "B too early");
  EXPECT_EQ(Verdict(early), "409 unverified-token") << early.body;
  EXPECT_EQ(FenceOf(*s, "orders/1"), ta);

  a->Signal(SIGINT);  // resigns: A's key goes; the stray keys stay
  const auto raised = AwaitFence(*s, "orders/1", tb);
  ASSERT_TRUE(raised) << "the fence never reached B's token " << tb << "\n"
                      << s->Log();
  Timing("leaseless keys: A resigns -> fence at B's token", *raised);
  EXPECT_EQ(FenceOf(*s, "orders/1"), tb);
  EXPECT_EQ(etcd.Keys(name).size(), 1u) << "the bare key stays";
  EXPECT_EQ(etcd.Candidates(name).size(), 2u) << "NAME/000stray and B's";
  ExpectStrayPassedOver(*s, watcher, ta, tb, stray);
  EXPECT_EQ(Request(s->data_port(), "GET", "/orders/1").body, "from B");

  // More keys without a lease than the source reads at once, older than
  // the only candidate.
  const std::string crowded = "crowded";
  for (int i = 0; i < 17; ++i) {
    char key[64];
    std::snprintf(key, sizeof key, "%s/stray-%02d", crowded.c_str(), i);
    etcd.Ctl(std::string("put ") + key + " x");
  }
  const Candidate c = etcd.PutCandidate(crowded, "c");
  const std::vector<Candidate> crowd = etcd.Candidates(crowded);
  ASSERT_EQ(crowd.size(), 18u);
  ASSERT_EQ(crowd.back().name, crowded + "/c");
  ASSERT_NE(c.lease, 0);
  for (std::size_t i = 0; i + 1 < crowd.size(); ++i) {
    ASSERT_EQ(crowd[i].lease, 0) << crowd[i].name;
  }
  auto down = Serve("crowded/", etcd.url() + "/" + crowded);
  ExpectSourceDown(*down, "crowded/", "crowded/1", 0, c.token);
  const std::string line = LogLine(down->Log(), "election_source_down");
  EXPECT_NE(line.find("no lease"), std::string::npos)
      << "election_source_down does not say why\n"
      << down->Log();
  // Deleted, the candidate is the oldest key: read, raised.
  etcd.Ctl("del --prefix " + crowded + "/stray-");
  ASSERT_TRUE(AwaitFence(*down, "crowded/1", c.token)) << down->Log();
  EXPECT_EQ(FenceOf(*down, "crowded/1"), c.token);
  EXPECT_TRUE(AwaitReady(*down)) << down->Log();
  EXPECT_EQ(Metric(*down, Up("crowded/")), 1);
  EXPECT_NE(down->Log().find("election_source_up"), std::string::npos)
      << down->Log();
  EXPECT_TRUE(Accepted(Put(*down, "crowded/1", c.token, "from c")));
}

// ZooKeeper: a child that is not ephemeral is nobody's candidacy (no
// session's end removes it). PATH and a PERSISTENT child named as kazoo's
// Lock names its nodes, with the lowest sequence (x__lock__0000000000),
// made before any candidate; then kazoo's Election candidate A: the fence
// is raised to A's node's czxid, not to the stray node's; A's token
// writes, the stray's czxid is refused; B waits and is unverified; A
// closes its session: the fence is at B's czxid. The only fence events
// are A's and B's. (kazoo's Lock itself waits behind the stray node, as
// etcdctl elect does behind a leaseless key: A and B never print
// "elected" while it is there.)
//
// A build that took the lowest sequence whatever the node puts the fence
// at the stray's czxid: the fence is not at A's czxid and A's write is 409
// unverified-token, which fail here.
TEST_F(ElectionTest, APersistentChildIsNotAHolder) {
  ASSERT_FALSE(zk_url_.empty()) << "ZooKeeper did not start";
  static int run = 0;  // one PATH per run (--gtest_repeat)
  const std::string path = "/elect/persistent" + std::to_string(++run);
  const std::string stray_name = "x__lock__0000000000";
  auto s = Serve("orders/", "zookeeper://" + ZooKeeperHosts() + path);
  ASSERT_TRUE(AwaitReady(*s)) << "no PATH, nobody holds it: ready once read\n"
                              << s->Log();
  Watcher watcher(s->admin_port(), "/v1/watch");
  ASSERT_TRUE(watcher.Opened()) << watcher.raw();

  const std::string made =
      Shell(kPython + " " + *suite_dir_ / "candidate.py" + " persist " +
            ZooKeeperHosts() + " " + path + " " + stray_name + " 2>&1");
  std::uint64_t stray = 0;
  std::istringstream(made) >> stray;
  ASSERT_GT(stray, 0u) << "the persistent child was not made: " << made;

  auto a = Kazoo(path, "A");
  std::vector<Candidate> children;
  ASSERT_TRUE(Await([&] {
    return (children = KazooCandidates(path)).size() == 2;
  })) << a->Output();
  ASSERT_EQ(children[0].name, stray_name);
  ASSERT_EQ(children[0].token, stray);
  const std::uint64_t ta = children[1].token;
  ASSERT_GT(ta, stray);

  ASSERT_TRUE(AwaitFence(*s, "orders/1", ta))
      << "the fence never reached A's czxid " << ta
      << " (the stray's: " << stray << "), it is at " << FenceOf(*s, "orders/1")
      << "\n"
      << s->Log();
  EXPECT_EQ(FenceOf(*s, "orders/1"), ta);
  EXPECT_TRUE(AwaitReady(*s)) << s->Log();
  EXPECT_EQ(Metric(*s, Up("orders/")), 1);
  const HttpResponse own = Put(*s, "orders/1", ta, "from A");
  EXPECT_TRUE(Accepted(own)) << Verdict(own) << " " << own.body;
  // The stray node was made before A's, so its czxid is below the fence:
  // stale, decided without the source.
  const HttpResponse by_stray = Put(*s, "orders/1", stray, "the stray's");
  EXPECT_EQ(Verdict(by_stray), "409 stale-token") << by_stray.body;
  EXPECT_NE(by_stray.body.find("\"current_token\":" + std::to_string(ta)),
            std::string::npos)
      << by_stray.body;
  EXPECT_EQ(FenceOf(*s, "orders/1"), ta);

  auto b = Kazoo(path, "B");
  ASSERT_TRUE(Await([&] {
    return (children = KazooCandidates(path)).size() == 3;
  })) << b->Output();
  ASSERT_EQ(children[0].name, stray_name);
  ASSERT_EQ(children[1].token, ta);
  const std::uint64_t tb = children[2].token;
  const HttpResponse early = Put(*s, "orders/1", tb, "B too early");
  EXPECT_EQ(Verdict(early), "409 unverified-token") << early.body;
  EXPECT_EQ(FenceOf(*s, "orders/1"), ta);

  a->Signal(SIGTERM);  // closes its session: its node goes at once
  const auto raised = AwaitFence(*s, "orders/1", tb);
  ASSERT_TRUE(raised) << "the fence never reached B's czxid " << tb << "\n"
                      << s->Log();
  Timing("persistent child: A closes its session -> fence at B's czxid",
         *raised);
  EXPECT_EQ(FenceOf(*s, "orders/1"), tb);
  ASSERT_TRUE(
      Await([&] { return (children = KazooCandidates(path)).size() == 2; }));
  EXPECT_EQ(children[0].name, stray_name) << "the stray node stays";
  ExpectStrayPassedOver(*s, watcher, ta, tb, stray);
}

}  // namespace
}  // namespace fencepost::reliability
