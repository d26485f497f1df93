// --backend http://: the real binary in front of a real nginx WebDAV store,
// and in front of a fake store that can stall a write past the timeout.

#include <gtest/gtest.h>

#include <csignal>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <sstream>
#include <thread>

#include "tests/testing/event_stream.h"
#include "tests/testing/http_client.h"
#include "tests/testing/long_poll.h"
#include "tests/testing/refusing_port.h"
#include "tests/testing/server_process.h"
#include "tests/testing/temp_dir.h"
#include "tests/testing/upstreams.h"

namespace fencepost {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;
using testing::FakeUpstream;
using testing::Fetch;
using testing::HttpClient;
using testing::LongPoll;
using testing::MetricValue;
using testing::NginxProcess;
using testing::ServerProcess;
using testing::TempDir;
using testing::Watcher;

std::string Backend(std::uint16_t port, const std::string& base = "") {
  return "http://127.0.0.1:" + std::to_string(port) + base;
}

int Count(const std::string& haystack, const std::string& needle) {
  int n = 0;
  for (auto at = haystack.find(needle); at != std::string::npos;
       at = haystack.find(needle, at + 1)) {
    ++n;
  }
  return n;
}

TEST(HttpBackendTest, SeedStoryThroughNginxWebDav) {
  TempDir dir;
  NginxProcess nginx(dir / "root", dir / "nginx");
  ServerProcess server(dir / "data", {"--backend", Backend(nginx.port())});
  const auto port = server.data_port();
  auto a = Fetch(port, "PUT", "/orders/1", {{"Fencing-Token", "33"}}, "from A");
  EXPECT_EQ(a.status, 201);
  EXPECT_EQ(a.header("fencing-token"), "33");
  auto b = Fetch(port, "PUT", "/orders/1", {{"Fencing-Token", "34"}}, "from B");
  EXPECT_EQ(b.status / 100, 2);
  EXPECT_EQ(b.header("fencing-token"), "34");
  auto stale =
      Fetch(port, "PUT", "/orders/1", {{"Fencing-Token", "33"}}, "stale A");
  EXPECT_EQ(stale.status, 409);

  // The stale write never reached nginx; B's value is what nginx holds.
  EXPECT_EQ(testing::ReadFile(fs::path(dir / "root") / "orders" / "1"),
            "from B");
  // nginx logs a request after answering it: wait for both lines.
  std::size_t puts = 0;
  for (const auto& seen : nginx.AwaitRequests(2, "PUT")) {
    puts += seen.method == "PUT" && seen.uri == "/orders/1";
  }
  EXPECT_EQ(puts, 2u);
  auto get = Fetch(port, "GET", "/orders/1");
  EXPECT_EQ(get.status, 200);
  EXPECT_EQ(get.body, "from B");
  EXPECT_EQ(get.header("server").rfind("nginx", 0), 0u) << "passed through";

  EXPECT_EQ(
      Fetch(port, "DELETE", "/orders/1", {{"Fencing-Token", "35"}}).status,
      204);
  EXPECT_FALSE(fs::exists(fs::path(dir / "root") / "orders" / "1"));
  EXPECT_EQ(Fetch(port, "GET", "/orders/1").status, 404);
  EXPECT_EQ(Fetch(server.admin_port(), "GET", "/readyz").status, 200);
}

// The attack that once worked: a fragment made a new fence for a name the
// store then wrote as the old one.
TEST(HttpBackendTest, AFragmentCannotReachAValueUnderAnotherFence) {
  TempDir dir;
  NginxProcess nginx(dir / "root", dir / "nginx");
  ServerProcess server(dir / "data", {"--backend", Backend(nginx.port())});
  const auto port = server.data_port();
  EXPECT_EQ(
      Fetch(port, "PUT", "/orders/7", {{"Fencing-Token", "34"}}, "B: shipped")
          .status,
      201);
  EXPECT_EQ(
      Fetch(port, "PUT", "/orders/7", {{"Fencing-Token", "33"}}, "A: cancelled")
          .status,
      409);
  HttpClient client(port);
  auto zombie = client.Raw(
      "PUT /orders/7#zombie HTTP/1.1\r\nHost: x\r\nFencing-Token: 33\r\n"
      "Content-Length: 12\r\n\r\nA: cancelled");
  EXPECT_EQ(zombie.status, 400);
  EXPECT_NE(zombie.body.find("bad-key"), std::string::npos) << zombie.body;
  auto erase = client.Raw(
      "DELETE /orders/7#z HTTP/1.1\r\nHost: x\r\nFencing-Token: 1\r\n\r\n");
  EXPECT_EQ(erase.status, 400);
  EXPECT_EQ(Fetch(port, "GET", "/orders/7").body, "B: shipped");
  EXPECT_EQ(testing::ReadFile(fs::path(dir / "root") / "orders" / "7"),
            "B: shipped");
  auto fences = Fetch(server.admin_port(), "GET", "/v1/fences").body;
  EXPECT_EQ(Count(fences, "\"fence\":"), 1) << fences;
}

// A JSON string's contents (as fencepost writes them: \\, \", and \u00XX
// for control characters) unescaped.
std::string JsonUnescape(const std::string& quoted) {
  std::string out;
  for (std::size_t i = 0; i < quoted.size(); ++i) {
    if (quoted[i] != '\\' || i + 1 == quoted.size()) {
      out.push_back(quoted[i]);
      continue;
    }
    const char c = quoted[++i];
    switch (c) {
      case 'n':
        out.push_back('\n');
        break;
      case 't':
        out.push_back('\t');
        break;
      case 'r':
        out.push_back('\r');
        break;
      case 'b':
        out.push_back('\b');
        break;
      case 'f':
        out.push_back('\f');
        break;
      case 'u':
        out.push_back(
            static_cast<char>(std::stoi(quoted.substr(i + 1, 4), nullptr, 16)));
        i += 4;
        break;
      default:
        out.push_back(c);
    }
  }
  return out;
}

// The fence whose token is `token` in a /v1/fences listing, or "".
std::string FenceWithToken(const std::string& listing, std::uint64_t token) {
  const std::string needle = ",\"token\":" + std::to_string(token) + ",";
  const auto at = listing.find(needle);
  if (at == std::string::npos) return "";
  const auto name_end = listing.rfind("\"", at - 1);
  const auto name_start = listing.rfind("{\"fence\":\"", name_end);
  return listing.substr(name_start + 10, name_end - name_start - 10);
}

// Tricky spellings of a target against the real nginx: each write is either
// refused with nothing touched, or fenced under a key that is exactly the
// path nginx wrote (its normalised $uri) and the file that holds the body.
TEST(HttpBackendTest, EveryAcceptedWriteLandsExactlyOnItsFencedKey) {
  TempDir dir;
  NginxProcess nginx(dir / "root", dir / "nginx");
  ServerProcess server(dir / "data", {"--backend", Backend(nginx.port())});
  const std::vector<std::string> targets = {"/plain",
                                            "/a%2Fb",
                                            "/A%7eB",
                                            "/A~B",
                                            "/sp%20ace",
                                            "/caf%C3%A9",
                                            "/caf%c3%a9",
                                            "/semi%3Bcolon",
                                            "/semi;colon",
                                            "/p%5Cq",
                                            "/q?x=1",
                                            "/q?x=1#f",
                                            "/pct%41%62",
                                            "/x/y/z",
                                            "/dot.name",
                                            "/%2e%2e",
                                            "/%2E",
                                            "/a/./b",
                                            "/a/../b",
                                            "/a/%2e/b",
                                            "/x/",
                                            "//x",
                                            "/orders/8#frag",
                                            "orders/9",
                                            "-admin/cfg",
                                            "http://evil/abs",
                                            "/a%2f..%2fb",
                                            "/a%252Fb",
                                            "/plus+sign",
                                            "/eq=ual",
                                            "/col:on",
                                            "/at@sign",
                                            "/a%3Fq",
                                            "/a%23h",
                                            "/bs\\x",
                                            "/raw\xc3\xa9",
                                            "/%00nul",
                                            "/a%2F",
                                            "/tab%09x",
                                            "/nl%0Ax",
                                            "/amp&and",
                                            "/q%3F?real=1",
                                            "/ap'os",
                                            "/%7Euser",
                                            "/paren(1)"};
  std::uint64_t token = 100;
  std::vector<std::pair<std::string, std::string>> landed;  // key, body
  for (const std::string& target : targets) {
    ++token;
    const std::string body = "body of " + target;
    HttpClient client(server.data_port());
    auto r = client.Raw("PUT " + target + " HTTP/1.1\r\nHost: x\r\n" +
                        "Fencing-Token: " + std::to_string(token) +
                        "\r\nContent-Length: " + std::to_string(body.size()) +
                        "\r\n\r\n" + body);
    const std::string listing =
        Fetch(server.admin_port(), "GET", "/v1/fences?limit=1000").body;
    const std::string fenced = FenceWithToken(listing, token);
    if (r.status / 100 != 2) {
      EXPECT_EQ(r.status, 400) << target;
      EXPECT_EQ(fenced, "") << target << ": a refused write set a fence";
      continue;
    }
    ASSERT_NE(fenced, "") << target << ": accepted without its fence";
    landed.emplace_back(JsonUnescape(fenced), body);
  }
  ASSERT_GE(landed.size(), 20u) << "the corpus should mostly be accepted";
  std::vector<NginxProcess::Seen> puts;
  for (const auto& seen : nginx.AwaitRequests(landed.size(), "PUT")) {
    if (seen.method == "PUT") puts.push_back(seen);
  }
  ASSERT_EQ(puts.size(), landed.size())
      << "one upstream write per accepted one";
  std::map<std::string, std::string> last;  // key: the body written last
  for (std::size_t i = 0; i < landed.size(); ++i) {
    const auto& [key, body] = landed[i];
    EXPECT_EQ(puts[i].uri, "/" + key) << "nginx wrote another resource";
    last[key] = body;
  }
  for (const auto& [key, body] : last) {
    EXPECT_EQ(testing::ReadFile(fs::path(dir / "root") / key), body) << key;
  }
}

// A target without its leading '/' once went upstream glued to BASE.
TEST(HttpBackendTest, ATargetWithoutItsSlashNeverLeavesBase) {
  TempDir dir;
  NginxProcess nginx(dir / "root", dir / "nginx");
  ServerProcess server(dir / "data",
                       {"--backend", Backend(nginx.port(), "/store")});
  HttpClient client(server.data_port());
  for (const std::string target : {"-admin/cfg", "orders/9"}) {
    auto r = client.Raw("PUT " + target +
                        " HTTP/1.1\r\nHost: x\r\nFencing-Token: 50\r\n"
                        "Content-Length: 3\r\n\r\nbad");
    EXPECT_EQ(r.status, 400) << target;
  }
  EXPECT_FALSE(fs::exists(fs::path(dir / "root") / "store-admin"));
  EXPECT_TRUE(nginx.Requests().empty()) << "nothing went upstream";
  auto fences = Fetch(server.admin_port(), "GET", "/v1/fences").body;
  EXPECT_EQ(Count(fences, "\"fence\":"), 0) << fences;
  EXPECT_EQ(
      Fetch(server.data_port(), "PUT", "/ok", {{"Fencing-Token", "1"}}, "v")
          .status,
      201);
  EXPECT_EQ(testing::ReadFile(fs::path(dir / "root") / "store" / "ok"), "v");
}

// With --auth-token-file the bearer token is fencepost's, not the store's.
TEST(HttpBackendTest, FencepostsBearerTokenIsNotSentUpstream) {
  TempDir dir;
  std::ofstream(dir / "tokens") << "right-token\n";
  NginxProcess nginx(dir / "root", dir / "nginx");
  const testing::Headers auth = {{"Fencing-Token", "1"},
                                 {"Authorization", "Bearer right-token"}};
  {
    ServerProcess server(dir / "data", {"--backend", Backend(nginx.port()),
                                        "--auth-token-file", dir / "tokens"});
    EXPECT_EQ(Fetch(server.data_port(), "PUT", "/k", auth, "v").status, 201);
    EXPECT_EQ(Fetch(server.data_port(), "GET", "/k", auth).status, 200);
  }
  {
    ServerProcess forwarding(
        dir / "data2", {"--backend", Backend(nginx.port()), "--auth-token-file",
                        dir / "tokens", "--forward-authorization"});
    EXPECT_EQ(Fetch(forwarding.data_port(), "PUT", "/k2", auth, "v").status,
              201);
  }
  {
    // Without fencepost's auth the header is the client's, for the store.
    ServerProcess open(dir / "data3", {"--backend", Backend(nginx.port())});
    EXPECT_EQ(
        Fetch(open.data_port(), "PUT", "/k3",
              {{"Fencing-Token", "1"}, {"Authorization", "Basic c3RvcmU="}},
              "v")
            .status,
        201);
  }
  const auto seen = nginx.AwaitRequests(4);
  ASSERT_EQ(seen.size(), 4u);
  EXPECT_EQ(seen[0].authorization, "") << "PUT";
  EXPECT_EQ(seen[1].authorization, "") << "GET";
  EXPECT_EQ(seen[2].authorization, "Bearer right-token");
  EXPECT_EQ(seen[3].authorization, "Basic c3RvcmU=");
}

// Interim answers are read past: the client gets the upstream's final
// answer, and the pooled connection's next answer belongs to the next
// request.
TEST(HttpBackendTest, InterimAnswersAreNotRelayedAsFinal) {
  TempDir dir;
  FakeUpstream upstream;
  ServerProcess server(dir / "data", {"--backend", Backend(upstream.port())});
  HttpClient client(server.data_port());
  auto put = client.Request("PUT", "/a", {{"Fencing-Token", "1"}}, "early:a");
  EXPECT_EQ(put.status, 201);
  EXPECT_EQ(put.header("fencing-token"), "1");
  auto get = client.Request("GET", "/b");
  EXPECT_EQ(get.status, 404) << "the next answer is the GET's own";
  EXPECT_EQ(client.Request("GET", "/a").body, "early:a");
}

// A trailer never replaces or joins a header field, also when it repeats a
// header's name.
TEST(HttpBackendTest, TrailerFieldsAreNeverForwarded) {
  TempDir dir;
  FakeUpstream upstream;
  ServerProcess server(dir / "data", {"--backend", Backend(upstream.port())});
  HttpClient client(server.data_port());
  auto r = client.Raw(
      "PUT /k HTTP/1.1\r\nHost: h\r\nX-User: alice\r\n"
      "Transfer-Encoding: chunked\r\nFencing-Token: 40\r\n\r\n"
      "1\r\nx\r\n0\r\nX-User: root\r\nHost: h\r\nX-Extra: 1\r\n\r\n");
  EXPECT_EQ(r.status, 201);
  ASSERT_EQ(upstream.Requests().size(), 1u);
  const auto seen = upstream.Requests().back();
  EXPECT_EQ(seen.headers.at("x-user"), "alice");
  EXPECT_EQ(seen.headers.count("x-extra"), 0u);
}

TEST(HttpBackendTest, ForwardsThePathUnderBaseWithoutHopByHopFields) {
  TempDir dir;
  FakeUpstream upstream;
  {
    ServerProcess server(dir / "data",
                         {"--backend", Backend(upstream.port(), "/base/")});
    HttpClient client(server.data_port());
    auto r = client.Request("PUT", "/a/b%20c?x=1",
                            {{"Fencing-Token", "5"},
                             {"Connection", "keep-alive, X-Hop"},
                             {"X-Hop", "1"},
                             {"Keep-Alive", "timeout=5"},
                             {"X-End", "2"}},
                            "v");
    EXPECT_EQ(r.status, 201);
    ASSERT_EQ(upstream.Requests().size(), 1u);
    const auto seen = upstream.Requests().back();
    EXPECT_EQ(seen.target, "/base/a/b%20c?x=1") << "the key's canonical path";
    EXPECT_EQ(seen.headers.count("x-hop"), 0u);
    EXPECT_EQ(seen.headers.count("keep-alive"), 0u);
    EXPECT_EQ(seen.headers.count("fencing-token"), 0u);
    EXPECT_EQ(seen.headers.at("x-end"), "2");
    EXPECT_EQ(seen.headers.at("host"),
              "127.0.0.1:" + std::to_string(upstream.port()));
    EXPECT_EQ(upstream.Value("/base/a/b%20c?x=1"), "v");
    auto get = client.Request("GET", "/a/b%20c?x=1");
    EXPECT_EQ(get.body, "v");
    // POST and PATCH are fenced like PUT.
    EXPECT_EQ(
        client.Request("POST", "/a/p", {{"Fencing-Token", "4"}}, "p").status,
        201);
    EXPECT_EQ(
        client.Request("PATCH", "/a/p", {{"Fencing-Token", "3"}}, "q").status,
        409);
    EXPECT_EQ(upstream.Value("/base/a/p"), "p");
  }
  ServerProcess forwarding(
      dir / "data2",
      {"--backend", Backend(upstream.port()), "--forward-token"});
  Fetch(forwarding.data_port(), "PUT", "/t", {{"Fencing-Token", "9"}}, "v");
  EXPECT_EQ(upstream.Requests().back().headers.at("fencing-token"), "9");
}

// The delayed-write hazard: the upstream stalls write A past the timeout and
// applies it later. With the hold, B cannot be acknowledged until A has had
// its chance to land, so B is what the store keeps.
TEST(HttpBackendTest, UnknownOutcomeHoldsTheFenceUntilTheStallSettles) {
  TempDir dir;
  FakeUpstream upstream(1000ms);
  ServerProcess server(dir / "data",
                       {"--backend", Backend(upstream.port()),
                        "--upstream-timeout", "0.3", "--upstream-settle", "2"});
  const auto port = server.data_port();
  auto a = Fetch(port, "PUT", "/k", {{"Fencing-Token", "10"}}, "stall:A");
  EXPECT_EQ(a.status, 504);
  EXPECT_NE(a.body.find("upstream-outcome-unknown"), std::string::npos);

  auto held = Fetch(port, "PUT", "/k", {{"Fencing-Token", "11"}}, "B");
  EXPECT_EQ(held.status, 503);
  EXPECT_FALSE(held.header("retry-after").empty());
  EXPECT_EQ(Fetch(port, "PUT", "/k", {{"Fencing-Token", "9"}}, "old").status,
            409)
      << "a stale token still gets 409 first";
  EXPECT_EQ(Fetch(server.admin_port(), "PUT", "/v1/fences/k",
                  {{"Fencing-Token", "10"}})
                    .status /
                100,
            2)
      << "bumps are not held";

  // B is retried until the hold ends; every answer meanwhile is the hold's
  // 503 (nothing else may happen to it).
  int status = 503;
  for (int i = 0; i < 1000 && status == 503; ++i) {
    std::this_thread::sleep_for(10ms);
    status = Fetch(port, "PUT", "/k", {{"Fencing-Token", "11"}}, "B").status;
  }
  ASSERT_EQ(status / 100, 2);
  EXPECT_EQ(upstream.stalled_applied(), 1) << "A landed before B was allowed";
  EXPECT_EQ(upstream.Value("/k"), "B");
  auto metrics = Fetch(server.admin_port(), "GET", "/metrics").body;
  EXPECT_EQ(MetricValue(metrics, "fencepost_upstream_outcome_unknown_total"),
            1);
}

// The same story with the hold switched off (a test-only switch): B is
// acknowledged at once and then overwritten by the late A. This is the
// failure the hold exists for, so the test above is known to bite.
TEST(HttpBackendTest, WithoutTheHoldALateWriteOverwritesANewerOne) {
  TempDir dir;
  FakeUpstream upstream(1000ms);
  ServerProcess server(dir / "data",
                       {"--backend", Backend(upstream.port()),
                        "--upstream-timeout", "0.3", "--upstream-settle", "2"},
                       {"FENCEPOST_TEST_DISABLE_UPSTREAM_GATE=1"});
  const auto port = server.data_port();
  EXPECT_EQ(
      Fetch(port, "PUT", "/k", {{"Fencing-Token", "10"}}, "stall:A").status,
      504);
  EXPECT_EQ(
      Fetch(port, "PUT", "/k", {{"Fencing-Token", "11"}}, "B").status / 100, 2);
  for (int i = 0; i < 500 && upstream.stalled_applied() == 0; ++i) {
    std::this_thread::sleep_for(10ms);
  }
  ASSERT_EQ(upstream.stalled_applied(), 1) << "the stalled A never landed";
  EXPECT_EQ(upstream.Value("/k"), "stall:A")
      << "without the hold, the acknowledged B is lost";
}

// A crash loses the in-memory holds, and a write the dead process had
// forwarded just before may still be on its way for --upstream-timeout and
// then land within --upstream-settle: after an unclean stop every fence
// waits out the dead process's bound (not the new flags', which may be
// shorter); after a clean one with no hold left, none does. A lock file
// left empty (a power cut as a start wrote it) in a directory with fences
// counts as unclean. Seen failing before the bound was recorded: the hold
// was the new process's settle alone (Retry-After 1), and an empty lock
// file held nothing.
TEST(HttpBackendTest, AfterACrashEveryFenceWaitsOutTheDeadProcesssBound) {
  TempDir dir;
  NginxProcess nginx(dir / "root", dir / "nginx");
  const std::vector<std::string> args = {
      "--backend", Backend(nginx.port()), "--upstream-timeout",
      "1",         "--upstream-settle",   "1"};
  std::vector<std::string> longer = args;
  longer.back() = "2";  // a bound of 3 s
  const auto put = [](const ServerProcess& server, const char* token) {
    return Fetch(server.data_port(), "PUT", "/k", {{"Fencing-Token", token}},
                 "v");
  };
  const auto await_open = [&](const ServerProcess& server, const char* token) {
    int status = 0;
    for (int i = 0; i < 60 && status / 100 != 2; ++i) {
      std::this_thread::sleep_for(100ms);
      status = put(server, token).status;
    }
    return status;
  };
  {
    ServerProcess crashed(dir / "data", longer);
    EXPECT_EQ(put(crashed, "1").status, 201);
    crashed.Kill();
  }
  {
    ServerProcess restarted(dir / "data", args);
    auto held = put(restarted, "2");
    EXPECT_EQ(held.status, 503);
    EXPECT_NE(held.body.find("fence-held"), std::string::npos);
    EXPECT_EQ(held.header("retry-after"), "3");
    EXPECT_EQ(await_open(restarted, "2") / 100, 2) << "the hold ends";
    restarted.Signal(SIGTERM);
    EXPECT_EQ(restarted.Wait(), 0);
  }
  {
    std::ifstream lock(dir / "data/fencepost.lock");
    std::string mark;
    std::getline(lock, mark);
    EXPECT_EQ(mark, "stopped") << "nothing left to hold";
  }
  {
    ServerProcess clean(dir / "data", args);
    EXPECT_EQ(put(clean, "3").status / 100, 2) << "no hold after a clean stop";
    clean.Signal(SIGTERM);
    EXPECT_EQ(clean.Wait(), 0);
  }
  std::filesystem::resize_file(dir / "data/fencepost.lock", 0);
  ServerProcess after_power_cut(dir / "data", args);
  auto held = put(after_power_cut, "4");
  EXPECT_EQ(held.status, 503) << "an empty lock file beside fences";
  EXPECT_EQ(held.header("retry-after"), "2");
  EXPECT_EQ(await_open(after_power_cut, "4") / 100, 2);
}

// A lock file's mark is read, never echoed: a planted one with control
// characters and a line of its own is held as a crash (the bound of the
// new process), and the log names the pid as unknown.
TEST(HttpBackendTest, APlantedLockMarkIsHeldAndNotEchoed) {
  TempDir dir;
  NginxProcess nginx(dir / "root", dir / "nginx");
  std::filesystem::create_directories(dir / "data");
  std::ofstream(dir / "data/fencepost.lock")
      << "12\x1b[2J\nforged: all fences open hold-ms=1\n";
  ServerProcess server(
      dir / "data", {"--backend", Backend(nginx.port()), "--upstream-timeout",
                     "1", "--upstream-settle", "1"});
  const auto held =
      Fetch(server.data_port(), "PUT", "/k", {{"Fencing-Token", "1"}}, "v");
  EXPECT_EQ(held.status, 503) << held.body;
  EXPECT_EQ(held.header("retry-after"), "2");
  const std::string log = server.Log();
  EXPECT_NE(log.find("pid unknown"), std::string::npos) << log;
  EXPECT_EQ(log.find('\x1b'), std::string::npos) << log;
  EXPECT_EQ(log.find("forged"), std::string::npos) << log;
}

// The PUTs of `target` the upstream was sent.
int PutsSent(FakeUpstream& upstream, const std::string& target) {
  int sent = 0;
  for (const auto& seen : upstream.Requests()) {
    sent += seen.method == "PUT" && seen.target == target;
  }
  return sent;
}

// A conditional write is never sent upstream twice. The upstream applies it
// on a kept-alive connection and closes that without an answer: sent again,
// its If-Match would no longer hold, and the client, told 412, would take
// its write for lost although it landed. Its outcome is unknown: 504.
TEST(HttpBackendTest, AConditionalWriteIsNeverSentAgain) {
  TempDir dir;
  FakeUpstream upstream;
  ServerProcess server(dir / "data", {"--backend", Backend(upstream.port())});
  const auto port = server.data_port();
  for (const char* condition : {"If-Match", "If-None-Match"}) {
    SCOPED_TRACE(condition);
    const std::string key = std::string("/") + condition;
    const std::string body = std::string("drop:") + condition;
    // The GET leaves a kept-alive connection for the write to reuse.
    ASSERT_EQ(Fetch(port, "GET", key).status, 404);
    auto put = Fetch(port, "PUT", key,
                     {{"Fencing-Token", "1"}, {condition, "\"t\""}}, body);
    EXPECT_EQ(put.status, 504) << put.body;
    EXPECT_EQ(upstream.Value(key), body) << "it landed";
    EXPECT_EQ(PutsSent(upstream, key), 1);
  }
}

// Nor is any other write: the upstream reads a PUT whole on a kept-alive
// connection, applies it and closes without an answer. Sent again it would
// be answered for the second copy (here 412; a 503 would tell the client
// "not applied" for an applied write), and the next write would go at
// once. Its outcome is unknown: 504, sent once, and the fence held.
TEST(HttpBackendTest, AWriteTheUpstreamReadWholeIsNeverSentAgain) {
  TempDir dir;
  FakeUpstream upstream;
  ServerProcess server(dir / "data", {"--backend", Backend(upstream.port()),
                                      "--upstream-settle", "5"});
  const auto port = server.data_port();
  // The GET leaves a kept-alive connection for the write to reuse.
  ASSERT_EQ(Fetch(port, "GET", "/k").status, 404);
  auto put = Fetch(port, "PUT", "/k", {{"Fencing-Token", "1"}}, "drop:A");
  EXPECT_EQ(put.status, 504) << put.body;
  EXPECT_EQ(upstream.Value("/k"), "drop:A") << "it landed";
  EXPECT_EQ(PutsSent(upstream, "/k"), 1);
  auto next = Fetch(port, "PUT", "/k", {{"Fencing-Token", "2"}}, "B");
  EXPECT_EQ(next.status, 503) << "held: " << next.body;
  EXPECT_EQ(upstream.Value("/k"), "drop:A");
}

// Location and Content-Location that name the upstream's resource of a key
// are rewritten to fencepost's own path of that key; any other is dropped,
// so no answer sends a client around the fence.
TEST(HttpBackendTest, LocationsNameFencepostsOwnPathOrNothing) {
  TempDir dir;
  FakeUpstream upstream;
  ServerProcess server(dir / "data",
                       {"--backend", Backend(upstream.port(), "/store")});
  const auto port = server.data_port();
  const std::string authority = "127.0.0.1:" + std::to_string(upstream.port());
  // What the upstream answers to PUT /a/b (as /store/a/b), and what the
  // client gets ("": no field).
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"http://" + authority + "/store/a/b", "/a/b"},
      {"HTTP://" + authority + "/store/x%20y?v=1#top", "/x%20y?v=1#top"},
      {"//" + authority + "/store/c", "/c"},
      {"/store/p%2Fq", "/p/q"},
      {"/store/./c/../d", "/d"},
      {"e", "/a/e"},
      {"../f", "/f"},
      {"?v=2", "/a/b?v=2"},
      {"http://" + authority + "/other/a", ""},
      {"http://" + authority, ""},
      {"http://elsewhere.example/store/a", ""},
      {"https://" + authority + "/store/a", ""},
      {"http://user@" + authority + "/store/a", ""},
      {"ftp://" + authority + "/store/a", ""},
      {"/store", ""},
      {"/storehouse/a", ""},
      {"/store/dir/", ""},
      {"/store/%2e%2e/secret", ""},
      {"../../outside", ""},
  };
  for (const auto& [sent, want] : cases) {
    SCOPED_TRACE(sent);
    for (const char* field : {"Location", "Content-Location"}) {
      auto put = Fetch(
          port, "PUT", "/a/b",
          {{"Fencing-Token", "1"}, {std::string("Echo-") + field, sent}}, "v");
      EXPECT_EQ(put.status / 100, 2);
      const std::string lower =
          field[0] == 'L' ? "location" : "content-location";
      EXPECT_EQ(put.has(lower), !want.empty()) << field;
      EXPECT_EQ(put.header(lower), want) << field;
    }
  }
  // Reads too.
  auto get = Fetch(port, "GET", "/a/b",
                   {{"Echo-Location", "http://" + authority + "/store/a/c"},
                    {"Echo-Content-Location", "/elsewhere"}});
  EXPECT_EQ(get.status, 200);
  EXPECT_EQ(get.header("location"), "/a/c");
  EXPECT_FALSE(get.has("content-location"));

  // nginx names the resource it created with its own absolute URL.
  NginxProcess nginx(dir / "root", dir / "nginx");
  ServerProcess front(dir / "front",
                      {"--backend", Backend(nginx.port(), "/store")});
  auto created =
      Fetch(front.data_port(), "PUT", "/a/b", {{"Fencing-Token", "1"}}, "v");
  EXPECT_EQ(created.status, 201);
  EXPECT_EQ(created.header("location"), "/a/b");
  // Its redirect to a directory ("/store/a/") names no key: dropped.
  auto directory = Fetch(front.data_port(), "GET", "/a");
  EXPECT_EQ(directory.status, 301);
  EXPECT_FALSE(directory.has("location")) << directory.header("location");
}

// The fence is made durable at the write's token before the forward, so it
// stands there whatever the upstream answers (SPEC), and watchers are told
// at once: also of an upstream's 412, an unknown outcome (504) and a write
// that never reached the upstream (502).
TEST(HttpBackendTest, AFenceRaisedBeforeAForwardIsToldWhateverTheAnswer) {
  TempDir dir;
  FakeUpstream upstream(1000ms);
  const std::uint16_t refusing = testing::FreePort();
  struct Case {
    std::uint16_t upstream;
    std::string key;
    testing::Headers headers;
    std::string body;
    int status;
  };
  const std::vector<Case> cases = {
      {upstream.port(), "lies/a", {{"If-Match", "\"t\""}}, "v", 412},
      {upstream.port(), "b", {}, "stall:v", 504},
      {refusing, "c", {}, "v", 502},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.key);
    ServerProcess server(
        dir / std::to_string(c.status),
        {"--backend", Backend(c.upstream), "--upstream-timeout", "0.3"});
    const auto admin = server.admin_port();
    Watcher watcher(admin, "/v1/watch");
    LongPoll poll(admin, c.key, 6, 2);  // the watcher and the poll
    testing::Headers headers = c.headers;
    headers.emplace_back("Fencing-Token", "7");
    auto put = Fetch(server.data_port(), "PUT", "/" + c.key, headers, c.body);
    EXPECT_EQ(put.status, c.status) << put.body;
    const testing::HttpResponse polled = poll.Answer();
    EXPECT_EQ(polled.status, 200) << "the raise woke no long poll";
    EXPECT_FALSE(polled.has("fencepost-watch"));
    EXPECT_NE(polled.body.find("\"token\":7"), std::string::npos)
        << polled.body;
    const std::vector<testing::Event> events = watcher.Events(1);
    EXPECT_EQ(events.size(), 1u) << watcher.raw();
    if (events.empty()) continue;
    EXPECT_EQ(events[0].type, "fence");
    EXPECT_NE(events[0].data.find("\"token\":7"), std::string::npos)
        << events[0].data;
  }
}

TEST(HttpBackendTest, UpstreamDownIs502AndNotReady) {
  TempDir dir;
  // Held, refusing connections, until the upstream comes up on it.
  auto down = std::make_optional<testing::RefusingPort>(testing::FreePort());
  const std::uint16_t port = down->port();
  ServerProcess server(dir / "data",
                       {"--backend", Backend(port), "--upstream-timeout", "1"});
  auto put =
      Fetch(server.data_port(), "PUT", "/k", {{"Fencing-Token", "1"}}, "v");
  EXPECT_EQ(put.status, 502);
  EXPECT_NE(put.body.find("upstream-failed"), std::string::npos);
  EXPECT_EQ(Fetch(server.data_port(), "GET", "/k").status, 502);
  const auto ready = Fetch(server.admin_port(), "GET", "/readyz");
  EXPECT_EQ(ready.status, 503);
  // The reason, in the body and once in the log.
  EXPECT_NE(ready.body.find("backend not ready: HEAD of the base: no answer: "),
            std::string::npos)
      << ready.body;
  EXPECT_EQ(Fetch(server.admin_port(), "GET", "/readyz").status, 503);
  // Each failure is logged once, by the service, with the backend's account.
  const std::string log = server.Log();
  EXPECT_EQ(log.find("event=backend_not_ready"),
            log.rfind("event=backend_not_ready"))
      << log;
  EXPECT_NE(log.find("event=backend_not_ready"), std::string::npos) << log;
  EXPECT_NE(log.find("event=backend_failed key=k"), std::string::npos) << log;
  EXPECT_NE(log.find("detail=\"upstream PUT /k was not sent: "),
            std::string::npos)
      << log;
  EXPECT_NE(log.find("detail=\"upstream GET /k failed: "), std::string::npos)
      << log;

  down.reset();
  FakeUpstream upstream(1000ms, port);
  EXPECT_EQ(Fetch(server.admin_port(), "GET", "/readyz").status, 200);
  EXPECT_NE(server.Log().find("event=backend_ready"), std::string::npos);
  EXPECT_EQ(
      Fetch(server.data_port(), "PUT", "/k", {{"Fencing-Token", "2"}}, "v")
          .status,
      201);
}

TEST(HttpBackendTest, ObserveModeForwardsWhatEnforceWouldReject) {
  TempDir dir;
  FakeUpstream upstream;
  ServerProcess server(dir / "data", {"--backend", Backend(upstream.port()),
                                      "--mode", "observe"});
  const auto port = server.data_port();
  EXPECT_EQ(Fetch(port, "PUT", "/k", {{"Fencing-Token", "10"}}, "new").status,
            201);
  auto stale = Fetch(port, "PUT", "/k", {{"Fencing-Token", "5"}}, "old");
  EXPECT_EQ(stale.status / 100, 2);
  EXPECT_EQ(stale.header("fencing-token"), "10");
  EXPECT_EQ(upstream.Value("/k"), "old");
  auto metrics = Fetch(server.admin_port(), "GET", "/metrics").body;
  EXPECT_EQ(MetricValue(metrics, "fencepost_writes_would_reject_total"), 1);
}

}  // namespace
}  // namespace fencepost
