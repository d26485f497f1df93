// Fenced side effects end to end (SPEC "Fenced side effects", issue 48):
// the real binary with --effect-target in front of a target the test starts
// (testing::EffectTarget, which counts every call that reaches it), plain and
// behind Debian's nginx as a TLS proxy; kill -9 while the target holds the
// call; power cuts on tests/reliability/powercut_fs.py, with the test
// build's FENCEPOST_TEST_ANSWER_BEFORE_SYNC=1 as the negative control; the
// target down; a real paused leader (SIGSTOP past its lease); and two
// replicas sharing a real etcd (tests/coordination/etcd.sh). What is
// counted is what reached the target: never a call from a stale token,
// never a second call that fencepost made of its own accord.

#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <iostream>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "tests/coordination/shell.h"
#include "tests/testing/certificates.h"
#include "tests/testing/effect_target.h"
#include "tests/testing/http_client.h"
#include "tests/testing/powercut_fs.h"
#include "tests/testing/server_process.h"
#include "tests/testing/temp_dir.h"
#include "tests/testing/upstreams.h"

namespace fencepost::reliability {
namespace {

using std::chrono::milliseconds;
using testing::EffectTarget;
using testing::Fetch;
using testing::HttpResponse;
using testing::ReadFile;
using testing::ServerProcess;
using testing::TempDir;

constexpr milliseconds kWait{10000};  // testing::kNoHang
const std::string kFence = "orders/leader";
const std::string kBody = R"({"amount":500,"currency":"EUR"})";

// One effect request; the target's NAME is always "pay".
struct Effect {
  std::uint64_t token = 1;
  std::string id;
  std::string body = kBody;
  std::string rest = "/charges?customer=42";
  std::string method = "POST";
};

// The call `e`; a fence held closed (503 fence-held: after a crash, or an
// unknown outcome, calls wait out what may still land) is waited out, as a
// client told Retry-After would, for at most 10 s.
HttpResponse Send(std::uint16_t data_port, const Effect& e) {
  const auto deadline = std::chrono::steady_clock::now() + kWait;
  for (;;) {
    HttpResponse r = Fetch(data_port, e.method, "/v1/effects/pay" + e.rest,
                           {{"Fencing-Token", std::to_string(e.token)},
                            {"Fence-Key", kFence},
                            {"Idempotency-Key", e.id},
                            {"Content-Type", "application/json"}},
                           e.body);
    if (r.status != 503 || r.body.find("fence-held") == std::string::npos ||
        std::chrono::steady_clock::now() > deadline) {
      return r;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
}

// Send, with a broken connection (the server was killed) as status 0.
HttpResponse TrySend(std::uint16_t data_port, const Effect& e) {
  try {
    return Send(data_port, e);
  } catch (const std::exception&) {
    return {};
  }
}

std::vector<std::string> TargetArgs(const std::string& url) {
  // A start after a crash holds the fences for what may still land: the
  // timeout and the settle time, kept short here.
  return {"--effect-target",   "pay=" + url, "--upstream-timeout", "2",
          "--upstream-settle", "0.5"};
}

// Whether `r` is the problem `slug` with `status`: its type ends in the
// slug (the contract's words: 504 `outcome-unknown` is served as
// urn:fencepost:problem:upstream-outcome-unknown).
::testing::AssertionResult IsProblem(const HttpResponse& r, int status,
                                     const std::string& slug) {
  const std::string field = "\"type\":\"urn:fencepost:problem:";
  const auto at = r.body.find(field);
  const auto end = r.body.find('"', at + field.size());
  const std::string type = at == std::string::npos || end == std::string::npos
                               ? ""
                               : r.body.substr(0, end);
  if (r.status == status &&
      (type.ends_with(":" + slug) || type.ends_with("-" + slug))) {
    return ::testing::AssertionSuccess();
  }
  return ::testing::AssertionFailure() << "expected " << status << " " << slug
                                       << ", got " << r.status << " " << r.body;
}

// Whether `r` is the target's answer to call `nth` of `id` (the target
// answers 201 {"id":ID,"call":N}), replayed or not.
::testing::AssertionResult IsAnswer(const HttpResponse& r,
                                    const std::string& id, int nth,
                                    bool replayed) {
  const std::string body =
      "{\"id\":\"" + id + "\",\"call\":" + std::to_string(nth) + "}";
  const std::string flag = replayed ? "true" : "false";
  if (r.status == 201 && r.body == body &&
      r.header("content-type") == "application/json" &&
      r.header("effect-replayed") == flag) {
    return ::testing::AssertionSuccess();
  }
  return ::testing::AssertionFailure()
         << "expected 201 " << body << " with Effect-Replayed: " << flag
         << ", got " << r.status << " " << r.body
         << " (Content-Type: " << r.header("content-type")
         << ", Effect-Replayed: " << r.header("effect-replayed") << ")";
}

// The admin port's record of `id` in GET /v1/effects?QUERY ("" if absent):
// the JSON object around its "idempotency_key".
std::string Listed(std::uint16_t admin_port, const std::string& query,
                   const std::string& id) {
  const HttpResponse r = Fetch(admin_port, "GET", "/v1/effects?" + query);
  const auto at = r.body.find("\"idempotency_key\":\"" + id + "\"");
  if (r.status != 200 || at == std::string::npos) return "";
  const auto begin = r.body.rfind('{', at);
  return r.body.substr(begin, r.body.find('}', at) + 1 - begin);
}

// fencepost_effects_total{target="pay",outcome=...} in /metrics, its labels
// in either order; -1 when absent.
double EffectsTotal(std::uint16_t admin_port, const std::string& outcome) {
  std::istringstream in(Fetch(admin_port, "GET", "/metrics").body);
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("fencepost_effects_total{", 0) == 0 &&
        line.find("target=\"pay\"") != std::string::npos &&
        line.find("outcome=\"" + outcome + "\"") != std::string::npos) {
      return std::stod(line.substr(line.rfind(' ') + 1));
    }
  }
  return -1;
}

// Sent once with the headers the SPEC names, replayed without a call,
// listed done and counted, through `url` (the target or a proxy to it).
void ExpectSentOnceAndReplayed(EffectTarget& target, const std::string& url,
                               std::vector<std::string> args) {
  TempDir dir;
  for (auto& a : TargetArgs(url + "/api")) args.push_back(a);
  ServerProcess server(dir / "data", args);
  const Effect e{.token = 7, .id = "charge-1"};
  EXPECT_TRUE(IsAnswer(Send(server.data_port(), e), "charge-1", 1, false));
  ASSERT_EQ(target.Calls().size(), 1u);
  const EffectTarget::Call call = target.Calls()[0];
  EXPECT_EQ(call.method, "POST");
  EXPECT_EQ(call.target, "/api/charges?customer=42");
  EXPECT_EQ(call.idempotency_key, "charge-1");
  EXPECT_EQ(call.fencing_token, "7");
  EXPECT_EQ(call.content_type, "application/json");
  EXPECT_EQ(call.body, kBody);

  for (int repeat = 0; repeat < 2; ++repeat) {
    EXPECT_TRUE(IsAnswer(Send(server.data_port(), e), "charge-1", 1, true));
  }
  EXPECT_EQ(target.Calls().size(), 1u) << "a repeat reached the target";
  const std::string record =
      Listed(server.admin_port(), "target=pay&state=done", "charge-1");
  EXPECT_NE(record.find("\"state\":\"done\""), std::string::npos) << record;
  EXPECT_NE(record.find("\"status\":201"), std::string::npos) << record;
  EXPECT_NE(record.find("\"token\":7"), std::string::npos) << record;
  EXPECT_EQ(EffectsTotal(server.admin_port(), "sent"), 1);
  EXPECT_EQ(EffectsTotal(server.admin_port(), "replayed"), 2);
}

TEST(EffectTest, SentOnceAndReplayed) {
  EffectTarget target;
  ExpectSentOnceAndReplayed(target, target.url(), {});
}

// https://: nginx serves TLS with a certificate of the test's CA and passes
// each call on to the counting target.
TEST(EffectTest, SentOnceAndReplayedOverTls) {
  TempDir dir;
  testing::MakeCertificates(dir.path());
  if (HasFatalFailure()) return;
  EffectTarget target;
  testing::NginxProcess nginx(dir / "root", dir / "nginx",
                              {.tls_cert = dir / "server.pem",
                               .tls_key = dir / "server.key",
                               .proxy_port = target.port()});
  const std::string url = "https://127.0.0.1:" + std::to_string(nginx.port());
  {
    // Verified: without the CA the certificate is refused and nothing sent.
    TempDir data;
    ServerProcess server(data / "data", TargetArgs(url));
    EXPECT_TRUE(IsProblem(Send(server.data_port(), {.id = "untrusted"}), 502,
                          "upstream-failed"));
    EXPECT_EQ(target.Calls().size(), 0u);
  }
  ExpectSentOnceAndReplayed(target, url, {"--upstream-tls-ca", dir / "ca.pem"});
}

// Token first: after a bump the old leader's call, even a repeat of one it
// made, is refused and sends nothing; a key names one request; a higher
// token raises the fence as a write does.
TEST(EffectTest, AStaleLeaderSendsNothingAndAKeyNamesOneRequest) {
  EffectTarget target;
  TempDir dir;
  ServerProcess server(dir / "data", TargetArgs(target.url()));
  const Effect first{.token = 5, .id = "a"};
  EXPECT_TRUE(IsAnswer(Send(server.data_port(), first), "a", 1, false));
  const HttpResponse bump =
      Fetch(server.admin_port(), "PUT", "/v1/fences/" + kFence,
            {{"Fencing-Token", "9"}});
  ASSERT_EQ(bump.status, 200) << bump.body;

  HttpResponse r = Send(server.data_port(), {.token = 5, .id = "b"});
  EXPECT_TRUE(IsProblem(r, 409, "stale-token"));
  EXPECT_NE(r.body.find("\"current_token\":9"), std::string::npos) << r.body;
  EXPECT_TRUE(IsProblem(Send(server.data_port(), first), 409, "stale-token"))
      << "a stale token is refused before the record is looked at";
  EXPECT_EQ(target.Calls().size(), 1u) << "a stale leader's call was sent";
  EXPECT_EQ(EffectsTotal(server.admin_port(), "stale"), 2);

  EXPECT_TRUE(IsProblem(Send(server.data_port(),
                             {.token = 9, .id = "a", .body = "{\"amount\":1}"}),
                        422, "idempotency-key-reused"));
  EXPECT_TRUE(IsProblem(
      Send(server.data_port(), {.token = 9, .id = "a", .rest = "/refunds"}),
      422, "idempotency-key-reused"));
  EXPECT_EQ(target.Calls().size(), 1u);

  EXPECT_TRUE(IsAnswer(Send(server.data_port(), {.token = 12, .id = "c"}), "c",
                       1, false));
  ASSERT_EQ(target.CallsWith("c").size(), 1u);
  EXPECT_EQ(target.CallsWith("c")[0].fencing_token, "12");
  const HttpResponse fence =
      Fetch(server.admin_port(), "GET", "/v1/fences/" + kFence);
  EXPECT_NE(fence.body.find("\"token\":12"), std::string::npos) << fence.body;
  EXPECT_TRUE(IsProblem(Send(server.data_port(), {.token = 9, .id = "d"}), 409,
                        "stale-token"));

  // The request's own faults, decided before anything is sent.
  const auto bare = Fetch(server.data_port(), "POST", "/v1/effects/pay/x",
                          {{"Fencing-Token", "12"}}, "{}");
  EXPECT_TRUE(IsProblem(bare, 428, "missing-effect-header"));
  const auto unknown = Fetch(server.data_port(), "POST", "/v1/effects/nope/x",
                             {{"Fencing-Token", "12"},
                              {"Fence-Key", kFence},
                              {"Idempotency-Key", "e"}},
                             "{}");
  EXPECT_EQ(unknown.status, 404) << unknown.body;
  EXPECT_EQ(target.Calls().size(), 2u);
}

// kill -9 while the target holds the call: the call may have done its work,
// so after the restart a repeat is an unknown outcome and sends nothing,
// until an admin DELETE with a current token forgets the record.
TEST(EffectTest, AKillWhileTheTargetHoldsTheCallLeavesAnUnknownOutcome) {
  EffectTarget target;
  target.Hold();
  TempDir dir;
  const auto args = TargetArgs(target.url());
  auto server = std::make_unique<ServerProcess>(dir / "data", args);
  const Effect e{.token = 5, .id = "k-1"};
  std::thread caller([&, port = server->data_port()] { TrySend(port, e); });
  ASSERT_TRUE(target.AwaitCalls(1, kWait));
  // Meanwhile, in this process: in progress, or another request.
  EXPECT_TRUE(
      IsProblem(Send(server->data_port(), e), 409, "effect-in-progress"));
  EXPECT_TRUE(IsProblem(
      Send(server->data_port(), {.token = 5, .id = "k-1", .body = "{}"}), 422,
      "idempotency-key-reused"));
  EXPECT_TRUE(IsProblem(Fetch(server->admin_port(), "DELETE",
                              "/v1/effects/pay/k-1", {{"Fencing-Token", "5"}}),
                        409, "effect-in-progress"));
  EXPECT_NE(Listed(server->admin_port(), "state=in-flight", "k-1"), "");
  server->Kill();
  caller.join();
  target.Release();

  server = std::make_unique<ServerProcess>(dir / "data", args);
  const HttpResponse r = Send(server->data_port(), e);
  EXPECT_TRUE(IsProblem(r, 409, "effect-outcome-unknown"));
  EXPECT_NE(r.body.find("\"idempotency_key\":\"k-1\""), std::string::npos);
  EXPECT_EQ(target.Calls().size(), 1u) << "fencepost sent the call again";
  const std::string record =
      Listed(server->admin_port(), "target=pay&state=unknown", "k-1");
  EXPECT_NE(record.find("\"state\":\"unknown\""), std::string::npos)
      << "GET /v1/effects?state=unknown: " << record;

  const std::string path = "/v1/effects/pay/k-1";
  EXPECT_TRUE(IsProblem(
      Fetch(server->admin_port(), "DELETE", path, {{"Fencing-Token", "4"}}),
      409, "stale-token"));
  EXPECT_TRUE(
      IsProblem(Send(server->data_port(), e), 409, "effect-outcome-unknown"))
      << "a stale DELETE forgot the record";
  const HttpResponse forgot =
      Fetch(server->admin_port(), "DELETE", path, {{"Fencing-Token", "5"}});
  EXPECT_EQ(forgot.status, 204) << forgot.body;
  EXPECT_EQ(Listed(server->admin_port(), "target=pay", "k-1"), "");
  // The caller checked with the target and chose to send it again.
  EXPECT_TRUE(IsAnswer(Send(server->data_port(), e), "k-1", 2, false));
  EXPECT_EQ(target.Calls().size(), 2u);
}

// The connection broken after the call was sent: this request is 504, and
// the call is never sent again, as after a kill.
TEST(EffectTest, AConnectionBrokenAfterTheSendIsAnUnknownOutcome) {
  EffectTarget target;
  TempDir dir;
  ServerProcess server(dir / "data", TargetArgs(target.url()));
  const Effect e{.token = 1, .id = "drop-1", .rest = "/drop"};
  EXPECT_TRUE(IsProblem(Send(server.data_port(), e), 504, "outcome-unknown"));
  EXPECT_TRUE(
      IsProblem(Send(server.data_port(), e), 409, "effect-outcome-unknown"));
  EXPECT_EQ(target.Calls().size(), 1u);
  EXPECT_NE(Listed(server.admin_port(), "state=unknown", "drop-1"), "");
  EXPECT_EQ(EffectsTotal(server.admin_port(), "unknown"), 1);
}

// A power cut after the call went out, on a disk whose syncs each take
// 1.5 s (powercut_fs.py's delay rule): `answered` lets the target answer
// and cuts right after it did (the answer's record is then still in its
// sync), otherwise the cut comes as soon as the call arrived. SIGKILL goes
// first and the cut at once after it, while the server's last sync still
// waits in the file system: a killed process is reaped only once a FUSE
// request it is in has been answered, so a cut after the reaping would come
// too late to drop what that sync was about to make durable. Returns the
// calls the target saw, after a repeat of the effect by a restarted server
// (its answer in `*repeat`).
std::size_t CallsAfterAPowerCut(bool answered, bool answer_before_sync,
                                HttpResponse* repeat) {
  if (const std::string why = testing::PowercutFsUnsupported(); !why.empty()) {
    ADD_FAILURE() << why;
    return 0;
  }
  TempDir dir;
  testing::PowercutFs fs(dir.path());
  const std::string data = fs.mountpoint() + "/data";
  EffectTarget target;
  if (!answered) target.Hold();
  const auto args = TargetArgs(target.url());
  std::vector<std::string> env;
  if (answer_before_sync) env.push_back("FENCEPOST_TEST_ANSWER_BEFORE_SYNC=1");
  auto server = std::make_unique<ServerProcess>(data, args, env);
  fs.Control("delay * 1500\n");
  const Effect e{.token = 3, .id = "cut-1"};
  std::thread caller([&, port = server->data_port()] { TrySend(port, e); });
  const bool arrived =
      answered ? target.AwaitAnswered(1, kWait) : target.AwaitCalls(1, kWait);
  server->Signal(SIGKILL);
  if (arrived) fs.Cut();
  server->Kill();
  caller.join();
  target.Release();
  if (!arrived) {
    ADD_FAILURE() << "the call never reached the target";
    return 0;
  }
  fs.Control("");
  server = std::make_unique<ServerProcess>(data, args, env);
  *repeat = Send(server->data_port(), e);
  const std::size_t calls = target.CallsWith("cut-1").size();
  std::cout << "effect power cut (" << (answered ? "answered" : "held")
            << (answer_before_sync ? ", answer before sync" : "")
            << "): the repeat answered " << repeat->status << " "
            << repeat->body << "; " << calls << " calls\n";
  server.reset();  // off the mount before it is unmounted
  return calls;
}

// After the cut, a repeat is the unknown outcome (the intent was durable
// before the send) or the recorded answer, never a second call.
TEST(EffectTest, APowerCutAfterTheSendNeverSendsTwice) {
  for (const bool answered : {false, true}) {
    SCOPED_TRACE(answered ? "cut after the target answered"
                          : "cut while the target held the call");
    HttpResponse repeat;
    EXPECT_EQ(CallsAfterAPowerCut(answered, false, &repeat), 1u)
        << "the repeat answered " << repeat.status << " " << repeat.body;
    if (repeat.status == 201) {
      EXPECT_TRUE(IsAnswer(repeat, "cut-1", 1, true));
    } else {
      EXPECT_TRUE(IsProblem(repeat, 409, "effect-outcome-unknown"));
    }
  }
}

// The negative control: the test build's switch that answers a group before
// its sync lets the call go out before its intent is durable; the cut then
// loses the record of a call that was sent, and the repeat sends it again.
// The test above must be able to see that.
TEST(EffectTest, AnIntentNotDurableBeforeTheSendIsCaught) {
  HttpResponse repeat;
  EXPECT_EQ(CallsAfterAPowerCut(false, true, &repeat), 2u)
      << "the cut did not lose the intent (the repeat answered "
      << repeat.status << " " << repeat.body << ")";
}

// Connection refused: nothing left, recorded as not sent, 502; the repeat
// sends it once the target is up.
TEST(EffectTest, ATargetDownIsNotSentAndARepeatSendsIt) {
  const std::uint16_t port = testing::FreePort();
  TempDir dir;
  ServerProcess server(dir / "data",
                       TargetArgs("http://127.0.0.1:" + std::to_string(port)));
  const Effect e{.token = 2, .id = "down-1"};
  EXPECT_TRUE(IsProblem(Send(server.data_port(), e), 502, "upstream-failed"));
  const std::string record =
      Listed(server.admin_port(), "target=pay&state=not-sent", "down-1");
  EXPECT_NE(record.find("\"state\":\"not-sent\""), std::string::npos)
      << "GET /v1/effects?state=not-sent: " << record;
  EXPECT_EQ(EffectsTotal(server.admin_port(), "not_sent"), 1);

  EffectTarget target(port);
  EXPECT_TRUE(IsAnswer(Send(server.data_port(), e), "down-1", 1, false));
  EXPECT_TRUE(IsAnswer(Send(server.data_port(), e), "down-1", 1, true));
  EXPECT_EQ(target.Calls().size(), 1u);
}

// A process of the test's own, its output in a file; SIGKILLed and reaped
// on destruction if still there.
class Child {
 public:
  Child(const std::vector<std::string>& argv, const std::string& log)
      : log_(log) {
    std::vector<std::string> copy = argv;
    std::vector<char*> args;
    for (std::string& a : copy) args.push_back(a.data());
    args.push_back(nullptr);
    const auto unset = testing::FencepostVariables();
    pid_ = fork();
    if (pid_ == 0) {
      const int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
      dup2(fd, 1);
      dup2(fd, 2);
      for (const std::string& name : unset) unsetenv(name.c_str());
      execvp(args[0], args.data());
      _exit(127);
    }
  }
  ~Child() {
    if (pid_ <= 0) return;
    kill(pid_, SIGKILL);
    kill(pid_, SIGCONT);
    waitpid(pid_, nullptr, 0);
  }
  pid_t pid() const { return pid_; }
  std::string Output() const { return ReadFile(log_); }
  // Waits (at most kWait) for it to stop (`stopped`) or to exit.
  bool Await(bool stopped) {
    const auto until = std::chrono::steady_clock::now() + kWait;
    while (std::chrono::steady_clock::now() < until) {
      int status = 0;
      const pid_t r = waitpid(pid_, &status, WNOHANG | WUNTRACED);
      if (r == pid_ && stopped && WIFSTOPPED(status)) return true;
      if (r == pid_ && !WIFSTOPPED(status)) {
        pid_ = -1;
        return !stopped;
      }
      std::this_thread::sleep_for(milliseconds(5));
    }
    return false;
  }

 private:
  pid_t pid_ = -1;
  std::string log_;
};

// Leader A takes the lease, prints its token and stops itself between its
// check and its call, as a GC pause would; continued, it sends the call.
const char* const kPausedLeader = R"(
import http.client, json, os, signal, sys
admin, data, body = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
c = http.client.HTTPConnection("127.0.0.1", admin, timeout=10)
c.request("PUT", "/v1/leases/orders/leader",
          json.dumps({"holder": "A", "ttl_ms": 300}))
token = json.loads(c.getresponse().read())["token"]
print("elected", token, flush=True)
os.kill(os.getpid(), signal.SIGSTOP)
d = http.client.HTTPConnection("127.0.0.1", data, timeout=10)
d.request("POST", "/v1/effects/pay/charges?customer=42", body,
          {"Fencing-Token": str(token), "Fence-Key": "orders/leader",
           "Idempotency-Key": "paused-1", "Content-Type": "application/json"})
r = d.getresponse()
print("answered", r.status, r.read().decode(), flush=True)
)";

// Two leaders race one effect: A, a real python3 process stopped past its
// lease, wakes after B took the lease and sent the call: exactly one call,
// B's.
TEST(EffectTest, APausedLeaderPastItsLeaseSendsNothing) {
  EffectTarget target;
  TempDir dir;
  ServerProcess server(dir / "data", TargetArgs(target.url()));
  Child a({"python3", "-c", kPausedLeader, std::to_string(server.admin_port()),
           std::to_string(server.data_port()), kBody},
          dir / "a.log");
  ASSERT_TRUE(a.Await(/*stopped=*/true)) << a.Output();
  const std::string elected = a.Output();
  ASSERT_EQ(elected.rfind("elected ", 0), 0u) << elected;
  const std::uint64_t token_a = std::stoull(elected.substr(8));

  std::this_thread::sleep_for(milliseconds(600));  // A's 300 ms run out
  const HttpResponse b =
      Fetch(server.admin_port(), "PUT", "/v1/leases/" + kFence,
            {{"Content-Type", "application/json"}},
            R"({"holder":"B","ttl_ms":10000})");
  ASSERT_EQ(b.status, 200) << b.body;
  const std::uint64_t token_b = std::stoull(b.header("fencing-token"));
  ASSERT_GT(token_b, token_a);
  EXPECT_TRUE(
      IsAnswer(Send(server.data_port(), {.token = token_b, .id = "paused-1"}),
               "paused-1", 1, false));

  ASSERT_EQ(kill(a.pid(), SIGCONT), 0);
  ASSERT_TRUE(a.Await(/*stopped=*/false)) << a.Output();
  EXPECT_NE(a.Output().find("answered 409 "), std::string::npos) << a.Output();
  EXPECT_NE(a.Output().find("stale-token"), std::string::npos) << a.Output();
  const auto calls = target.Calls();
  ASSERT_EQ(calls.size(), 1u) << "the paused leader's call reached the target";
  EXPECT_EQ(calls[0].fencing_token, std::to_string(token_b));
}

// One etcd (tests/coordination/etcd.sh) for one test.
class Etcd {
 public:
  Etcd() { url_ = testing::ShellLine(kScript + " start " + (dir_ / "etcd")); }
  ~Etcd() { testing::Shell(kScript + " stop " + (dir_ / "etcd")); }
  const std::string& url() const { return url_; }  // etcd://HOST:PORT

 private:
  const std::string kScript = FENCEPOST_ETCD_SH;
  TempDir dir_;
  std::string url_;
};

// The same effect to two replicas at once: one call reaches the target; the
// other replica answers in progress, unknown or the replay. The first round
// holds the call at the target, so the second request surely comes while
// it is in flight; the later ones race freely.
TEST(EffectTest, TwoReplicasSendAnEffectOnce) {
  Etcd etcd;
  ASSERT_FALSE(etcd.url().empty()) << "etcd did not start";
  EffectTarget target;
  std::vector<std::string> args = {"--fence-store", etcd.url() + "/effects",
                                   "--backend", "etcd"};
  for (auto& a : TargetArgs(target.url())) args.push_back(a);
  ServerProcess one("", args);
  ServerProcess two("", args);
  for (int round = 0; round < 8; ++round) {
    SCOPED_TRACE("round " + std::to_string(round));
    const Effect e{.token = 4, .id = "r-" + std::to_string(round)};
    if (round == 0) target.Hold();
    HttpResponse first, second;
    std::thread to_one([&] { first = TrySend(one.data_port(), e); });
    std::thread to_two([&] { second = TrySend(two.data_port(), e); });
    if (round == 0) {
      EXPECT_TRUE(target.AwaitCalls(1, kWait));
      std::this_thread::sleep_for(milliseconds(1000));
      target.Release();
    }
    to_one.join();
    to_two.join();
    EXPECT_EQ(target.CallsWith(e.id).size(), 1u);
    int sent = 0;
    for (const HttpResponse* r : {&first, &second}) {
      if (r->status == 201 && r->header("effect-replayed") == "false") {
        ++sent;
      } else if (r->status == 201) {
        EXPECT_TRUE(IsAnswer(*r, e.id, 1, true));
      } else if (!IsProblem(*r, 409, "effect-in-progress")) {
        EXPECT_TRUE(IsProblem(*r, 409, "effect-outcome-unknown"));
      }
    }
    EXPECT_EQ(sent, 1) << first.status << " " << first.body << " | "
                       << second.status << " " << second.body;
    EXPECT_TRUE(IsAnswer(Send(two.data_port(), e), e.id, 1, true));
    EXPECT_NE(Listed(one.admin_port(), "state=done", e.id), "");
  }
  // A bump through one replica fences the other's calls.
  ASSERT_EQ(Fetch(two.admin_port(), "PUT", "/v1/fences/" + kFence,
                  {{"Fencing-Token", "10"}})
                .status,
            200);
  EXPECT_TRUE(IsProblem(Send(one.data_port(), {.token = 4, .id = "r-stale"}),
                        409, "stale-token"));
  // A replica killed while the target holds its call: the other replica
  // never sends it again.
  target.Hold();
  const Effect e{.token = 10, .id = "r-kill"};
  const std::size_t before = target.Calls().size();
  std::thread caller([&] { TrySend(one.data_port(), e); });
  EXPECT_TRUE(target.AwaitCalls(before + 1, kWait));
  one.Kill();
  caller.join();
  target.Release();
  // Another replica's call is in progress until its deadline (it may still
  // be on its way: 2 x --upstream-timeout and the settle time after it was
  // recorded), then an unknown outcome; never sent again.
  const auto deadline = std::chrono::steady_clock::now() + kWait;
  HttpResponse r = Send(two.data_port(), e);
  while (IsProblem(r, 409, "effect-in-progress") &&
         std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    r = Send(two.data_port(), e);
  }
  EXPECT_TRUE(IsProblem(r, 409, "effect-outcome-unknown"));
  EXPECT_EQ(target.CallsWith("r-kill").size(), 1u);
  EXPECT_EQ(target.CallsWith("r-stale").size(), 0u);
}

// The calls of one fence go in its turn across replicas too: while replica
// one's call is held at the target, replica two's call of the same fence
// (another key, a higher token) is refused with 503 fence-held and reaches
// the target only after the first was answered.
TEST(EffectTest, ReplicasSendAFencesCallsInItsTurn) {
  Etcd etcd;
  ASSERT_FALSE(etcd.url().empty()) << "etcd did not start";
  EffectTarget target;
  std::vector<std::string> args = {"--fence-store", etcd.url() + "/turns",
                                   "--backend", "etcd"};
  for (auto& a : TargetArgs(target.url())) args.push_back(a);
  ServerProcess one("", args);
  ServerProcess two("", args);
  target.Hold();
  std::thread first([&] { TrySend(one.data_port(), {.id = "turn-a"}); });
  ASSERT_TRUE(target.AwaitCalls(1, kWait));
  const Effect b{.token = 5, .id = "turn-b"};
  const HttpResponse refused =
      Fetch(two.data_port(), "POST", "/v1/effects/pay" + b.rest,
            {{"Fencing-Token", "5"},
             {"Fence-Key", kFence},
             {"Idempotency-Key", b.id},
             {"Content-Type", "application/json"}},
            b.body);
  EXPECT_TRUE(IsProblem(refused, 503, "fence-held"));
  EXPECT_EQ(target.CallsWith(b.id).size(), 0u);
  target.Release();
  first.join();
  EXPECT_TRUE(IsAnswer(Send(two.data_port(), b), b.id, 1, false));
  const auto calls = target.Calls();
  ASSERT_EQ(calls.size(), 2u);
  EXPECT_EQ(calls[0].idempotency_key, "turn-a");
  EXPECT_EQ(calls[1].idempotency_key, "turn-b");
}

}  // namespace
}  // namespace fencepost::reliability
