// `fencepost probe URL` (SPEC "Conditional writes"), run as the real binary
// against real stores on 127.0.0.1: Debian's nginx as a WebDAV store, which
// answers ETags on GET but applies PUT and DELETE whatever If-Match and
// If-None-Match say; fencepost itself, which honours them; fencepost in
// front of that nginx; a fake store that refuses every conditional write
// and one that refuses failed ones with 403; and ports that refuse, stay
// silent or answer 5xx.

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "tests/client/helpers.h"
#include "tests/testing/http_client.h"
#include "tests/testing/server_process.h"
#include "tests/testing/temp_dir.h"
#include "tests/testing/upstreams.h"

namespace fencepost::client {
namespace {

namespace fs = std::filesystem;
using fencepost::testing::NginxProcess;
using fencepost::testing::RunFencepost;
using fencepost::testing::ServerProcess;
using fencepost::testing::TempDir;

std::size_t Count(const std::string& text, const std::string& what) {
  std::size_t n = 0;
  for (auto at = text.find(what); at != std::string::npos;
       at = text.find(what, at + 1)) {
    ++n;
  }
  return n;
}

bool Has(const std::string& text, const std::string& what) {
  return text.find(what) != std::string::npos;
}

std::string NginxUrl(const NginxProcess& nginx, const std::string& base) {
  return "http://127.0.0.1:" + std::to_string(nginx.port()) + base;
}

// What Debian 12's nginx 1.22 did when tried by hand with curl, and what
// the probe must report: a PUT over a value is 204 and a DELETE 204
// whatever If-Match or If-None-Match say (the WebDAV module never looks at
// them; nginx tests them only on a 200 answer, such as a GET's).
TEST(ProbeTest, NginxIgnoresThePreconditionsAndIsToldSo) {
  TempDir dir;
  const std::string root = dir / "root";
  NginxProcess nginx(root, dir / "nginx");
  const std::string url = NginxUrl(nginx, "/store");
  const auto probe = RunFencepost({"probe", url});
  EXPECT_EQ(probe.exit_status, 1) << probe.output;
  EXPECT_TRUE(Has(probe.output, "the store's ETag on GET: \"")) << probe.output;
  EXPECT_TRUE(Has(probe.output,
                  "PUT with a wrong If-Match: DOES NOT HOLD "
                  "(HTTP 204, value overwritten)"))
      << probe.output;
  EXPECT_TRUE(Has(probe.output,
                  "PUT with If-None-Match: * over a value: DOES NOT HOLD "
                  "(HTTP 204, value overwritten)"))
      << probe.output;
  EXPECT_TRUE(Has(probe.output,
                  "DELETE with a wrong If-Match: DOES NOT HOLD "
                  "(HTTP 204, value deleted)"))
      << probe.output;
  // It applies the writes whose precondition holds, as it applies all.
  EXPECT_TRUE(Has(probe.output,
                  "PUT with If-Match: the store's own ETag: holds "
                  "(HTTP 204, value written)"))
      << probe.output;
  EXPECT_TRUE(Has(probe.output,
                  "DELETE with If-Match: the store's own ETag: holds "
                  "(HTTP 204, value deleted)"))
      << probe.output;
  EXPECT_TRUE(Has(probe.output,
                  "PUT with If-None-Match: * to a new key: holds "
                  "(HTTP 201, value written)"))
      << probe.output;
  EXPECT_EQ(Count(probe.output, "DOES NOT HOLD"), 3u) << probe.output;
  EXPECT_TRUE(Has(probe.output, "verdict: " + url +
                                    " does NOT honour If-Match and "
                                    "If-None-Match: a compare-and-set "
                                    "through it can lose updates\n"))
      << probe.output;
  EXPECT_FALSE(Has(probe.output, "could not be removed")) << probe.output;
  // It cleaned up after itself: nothing is left under the store.
  EXPECT_TRUE(fs::is_empty(root + "/store")) << probe.output;
  // The first write and its read; each check with a wrong precondition,
  // the GET after it and the value written again (each check changed it);
  // the PUT and the DELETE with the tag of a GET before each, and the GET
  // after each; the create-only PUT to a new key, its GET and its cleanup.
  const auto seen = nginx.AwaitRequests(3, "DELETE");
  std::vector<std::string> methods;
  for (const auto& request : seen) methods.push_back(request.method);
  EXPECT_EQ(methods, (std::vector<std::string>{"PUT",    "GET",            //
                                               "PUT",    "GET",    "PUT",  //
                                               "PUT",    "GET",    "PUT",  //
                                               "DELETE", "GET",    "PUT",  //
                                               "GET",    "PUT",    "GET",
                                               "GET",    "DELETE",  //
                                               "GET",               //
                                               "PUT",    "GET",    "DELETE"}));
  ASSERT_EQ(seen.size(), 20u);
  EXPECT_EQ(seen[16].uri, seen[0].uri);
  EXPECT_NE(seen[17].uri, seen[0].uri);  // the new key
  EXPECT_EQ(seen[19].uri, seen[17].uri);
  for (const auto& request : seen) {
    EXPECT_EQ(request.uri.rfind("/store/fencepost-probe-", 0), 0u)
        << request.uri;
    EXPECT_EQ(request.uri.size(),
              std::string("/store/fencepost-probe-").size() + 16)
        << request.uri;
    EXPECT_EQ(request.authorization, "");
  }
}

TEST(ProbeTest, SendsTheBearerTokenOfAuthTokenFileOnEveryRequest) {
  TempDir dir;
  NginxProcess nginx(dir / "root", dir / "nginx");
  std::ofstream(dir / "token") << "# the store's token\n  s3cret-token \n";
  const auto probe = RunFencepost(
      {"probe", NginxUrl(nginx, "/"), "--auth-token-file", dir / "token"});
  EXPECT_EQ(probe.exit_status, 1) << probe.output;
  const auto seen = nginx.AwaitRequests(3, "DELETE");
  ASSERT_EQ(seen.size(), 20u);
  for (const auto& request : seen) {
    EXPECT_EQ(request.authorization, "Bearer s3cret-token") << request.method;
  }
  EXPECT_EQ(RunFencepost({"probe", NginxUrl(nginx, "/"), "--auth-token-file",
                          dir / "missing"})
                .exit_status,
            2);
}

// NEEDS THE SERVER'S CONDITIONAL WRITES (If-Match and If-None-Match on the
// data port, SPEC "Conditional writes"): fencepost's lmdb backend must
// answer each check 412 and leave the value alone.
TEST(ProbeTest, FencepostHonoursThemThroughItsDataPort) {
  TempDir dir;
  ServerProcess server(dir / "data");
  const std::string url = testing::DataUrl(server) + "/base/";
  const auto probe = RunFencepost({"probe", url, "--token", "7"});
  EXPECT_EQ(probe.exit_status, 0) << probe.output;
  EXPECT_TRUE(Has(probe.output,
                  "PUT with a wrong If-Match: holds "
                  "(HTTP 412, value unchanged)"))
      << probe.output;
  EXPECT_TRUE(Has(probe.output,
                  "PUT with If-None-Match: * over a value: holds "
                  "(HTTP 412, value unchanged)"))
      << probe.output;
  EXPECT_TRUE(Has(probe.output,
                  "DELETE with a wrong If-Match: holds "
                  "(HTTP 412, value unchanged)"))
      << probe.output;
  EXPECT_TRUE(Has(probe.output,
                  "PUT with If-Match: the store's own ETag: holds "
                  "(HTTP 200, value written)"))
      << probe.output;
  EXPECT_TRUE(Has(probe.output,
                  "DELETE with If-Match: the store's own ETag: holds "
                  "(HTTP 204, value deleted)"))
      << probe.output;
  EXPECT_TRUE(Has(probe.output,
                  "PUT with If-None-Match: * to a new key: holds "
                  "(HTTP 201, value written)"))
      << probe.output;
  EXPECT_FALSE(Has(probe.output, "DOES NOT HOLD")) << probe.output;
  EXPECT_TRUE(Has(probe.output,
                  "verdict: " + url + " honours If-Match and If-None-Match"))
      << probe.output;
  // The scratch values are gone; its fence stays at the token, as every
  // fence does.
  const auto fences = fencepost::testing::Fetch(server.admin_port(), "GET",
                                                "/v1/fences?prefix=base/");
  EXPECT_TRUE(Has(fences.body, "base/fencepost-probe-")) << fences.body;
  // Without a token the first write is 428: refused, with a hint.
  const auto tokenless = RunFencepost({"probe", url});
  EXPECT_EQ(tokenless.exit_status, 1) << tokenless.output;
  EXPECT_TRUE(Has(tokenless.output, "HTTP 428")) << tokenless.output;
  EXPECT_TRUE(Has(tokenless.output, "--token N")) << tokenless.output;
}

// NEEDS THE SERVER'S CONDITIONAL WRITES, as above: over https, with the
// server's bearer token.
TEST(ProbeTest, FencepostHonoursThemOverTlsWithABearerToken) {
  TempDir dir;
  if (!testing::MakeCertificates(dir.path())) {
    FAIL() << "openssl missing or failing; scripts/deps.sh installs it";
  }
  std::ofstream(dir / "token") << "probe-token\n";
  ServerProcess server(
      dir / "data", {"--tls-cert", dir / "server.pem", "--tls-key",
                     dir / "server.key", "--auth-token-file", dir / "token"});
  const std::string url =
      "https://127.0.0.1:" + std::to_string(server.data_port());
  auto probe =
      RunFencepost({"probe", url, "--token", "1", "--tls-ca", dir / "ca.pem",
                    "--auth-token-file", dir / "token"});
  EXPECT_EQ(probe.exit_status, 0) << probe.output;
  EXPECT_EQ(Count(probe.output, ": holds (HTTP 412, value unchanged)"), 3u)
      << probe.output;
  EXPECT_EQ(Count(probe.output, ": holds (HTTP 2"), 3u) << probe.output;

  probe =
      RunFencepost({"probe", url, "--token", "1", "--tls-ca", dir / "ca.pem"});
  EXPECT_EQ(probe.exit_status, 1) << probe.output;
  EXPECT_TRUE(Has(probe.output, "HTTP 401")) << probe.output;
  EXPECT_TRUE(Has(probe.output, "--auth-token-file")) << probe.output;

  // A certificate that does not chain to the CA given: no store to probe.
  probe = RunFencepost(
      {"probe", url, "--token", "1", "--tls-ca", dir / "other-ca.pem"});
  EXPECT_EQ(probe.exit_status, 3) << probe.output;
}

// fencepost in front of nginx passes If-Match and If-None-Match upstream
// unchanged: probed through its data port, the store behind it is judged.
TEST(ProbeTest, ThroughFencepostInFrontOfNginxNginxIsJudged) {
  TempDir dir;
  const std::string root = dir / "root";
  NginxProcess nginx(root, dir / "nginx");
  ServerProcess server(dir / "data", {"--backend", NginxUrl(nginx, "/store")});
  const auto probe = RunFencepost(
      {"probe", testing::DataUrl(server) + "/jobs", "--token", "5"});
  EXPECT_EQ(probe.exit_status, 1) << probe.output;
  EXPECT_EQ(Count(probe.output, "DOES NOT HOLD (HTTP 204"), 3u) << probe.output;
  EXPECT_TRUE(fs::is_empty(root + "/store/jobs")) << probe.output;
}

// A check holds only when the value is also as it was: a store that
// answers 412 but writes anyway is caught by the GET after it.
TEST(ProbeTest, A412ThatChangedTheValueDoesNotHold) {
  fencepost::testing::FakeUpstream store;
  const std::string url = "http://127.0.0.1:" + std::to_string(store.port());
  auto probe = RunFencepost({"probe", url + "/lies"});
  EXPECT_EQ(probe.exit_status, 1) << probe.output;
  EXPECT_TRUE(Has(probe.output, "the store answered no ETag on GET"))
      << probe.output;
  EXPECT_EQ(Count(probe.output, "DOES NOT HOLD (HTTP 412, value overwritten)"),
            2u)
      << probe.output;
  EXPECT_TRUE(Has(probe.output,
                  "DELETE with a wrong If-Match: DOES NOT HOLD "
                  "(HTTP 412, value deleted)"))
      << probe.output;
  // Without an ETag a client has no tag to send.
  EXPECT_EQ(Count(probe.output,
                  "the store's own ETag: DOES NOT HOLD (the store answered "
                  "no ETag on GET"),
            2u)
      << probe.output;
  EXPECT_TRUE(Has(probe.output,
                  "PUT with If-None-Match: * to a new key: DOES NOT HOLD "
                  "(HTTP 412, value written)"))
      << probe.output;

  // The same store elsewhere ignores the preconditions outright.
  probe = RunFencepost({"probe", url + "/plain"});
  EXPECT_EQ(probe.exit_status, 1) << probe.output;
  EXPECT_EQ(Count(probe.output, "DOES NOT HOLD (HTTP 204"), 3u) << probe.output;
  for (const auto& request : store.Requests()) {
    EXPECT_EQ(store.Value(request.target), "") << request.target;
  }
}

// Ceph RGW 16.2 answered 412 to an If-Match carrying the quoted ETag it had
// answered itself: it refuses every conditional write. The wrong tags are
// refused as they must be, so only the writes whose precondition holds
// show that a compare-and-set through it never succeeds.
TEST(ProbeTest, AStoreThatRefusesEveryConditionalWriteDoesNotHonourThem) {
  fencepost::testing::FakeUpstream store;
  const std::string url =
      "http://127.0.0.1:" + std::to_string(store.port()) + "/refuses";
  const auto probe = RunFencepost({"probe", url});
  EXPECT_EQ(probe.exit_status, 1) << probe.output;
  EXPECT_TRUE(Has(probe.output, "the store's ETag on GET: \"")) << probe.output;
  EXPECT_EQ(Count(probe.output, ": holds (HTTP 412, value unchanged)"), 3u)
      << probe.output;
  EXPECT_TRUE(Has(probe.output,
                  "PUT with If-Match: the store's own ETag: DOES NOT HOLD "
                  "(HTTP 412, value not written)"))
      << probe.output;
  EXPECT_TRUE(Has(probe.output,
                  "DELETE with If-Match: the store's own ETag: DOES NOT HOLD "
                  "(HTTP 412, value still there)"))
      << probe.output;
  EXPECT_TRUE(Has(probe.output,
                  "PUT with If-None-Match: * to a new key: DOES NOT HOLD "
                  "(HTTP 412, value missing)"))
      << probe.output;
  EXPECT_TRUE(
      Has(probe.output, "verdict: " + url +
                            " does NOT honour If-Match and If-None-Match: it "
                            "refuses writes whose precondition holds, so a "
                            "compare-and-set through it cannot succeed\n"))
      << probe.output;
  EXPECT_FALSE(Has(probe.output, "could not be removed")) << probe.output;
  // The If-Match sent was the ETag the store answered, quotes and all.
  bool matched = false;
  for (const auto& request : store.Requests()) {
    EXPECT_EQ(store.Value(request.target), "") << request.target;
    const auto tag = request.headers.find("if-match");
    if (tag != request.headers.end() && tag->second.size() > 2 &&
        tag->second.find("fencepost-probe-wrong-") == std::string::npos) {
      EXPECT_EQ(tag->second.front(), '"') << tag->second;
      matched = true;
    }
  }
  EXPECT_TRUE(matched);
}

// Only 412 tells a client its precondition failed: a store that refuses a
// failed one with 403, and changes nothing, does not honour them either.
TEST(ProbeTest, AStoreThatAnswers403ToAFailedPreconditionDoesNotHonourThem) {
  fencepost::testing::FakeUpstream store;
  const std::string url =
      "http://127.0.0.1:" + std::to_string(store.port()) + "/forbids";
  const auto probe = RunFencepost({"probe", url});
  EXPECT_EQ(probe.exit_status, 1) << probe.output;
  EXPECT_EQ(Count(probe.output, ": DOES NOT HOLD (HTTP 403, value unchanged)"),
            3u)
      << probe.output;
  EXPECT_EQ(Count(probe.output, ": holds (HTTP 2"), 3u) << probe.output;
  EXPECT_TRUE(
      Has(probe.output, "verdict: " + url +
                            " does NOT honour If-Match and If-None-Match: it "
                            "answers a failed precondition with another status "
                            "than 412"))
      << probe.output;
  for (const auto& request : store.Requests()) {
    EXPECT_EQ(store.Value(request.target), "") << request.target;
  }
}

TEST(ProbeTest, AStoreThatRefusesOrFailsIs3) {
  testing::RefusingPort refusing;
  const std::string down =
      "http://127.0.0.1:" + std::to_string(refusing.port());
  auto probe = RunFencepost({"probe", down + "/store"});
  EXPECT_EQ(probe.exit_status, 3) << probe.output;
  EXPECT_TRUE(Has(probe.output, "the first write to " + down + "/store"))
      << probe.output;

  // fencepost in front of that port answers the first write 502.
  TempDir dir;
  ServerProcess server(dir / "data", {"--backend", down});
  probe = RunFencepost({"probe", testing::DataUrl(server), "--token", "1"});
  EXPECT_EQ(probe.exit_status, 3) << probe.output;
  EXPECT_TRUE(Has(probe.output, "HTTP 502")) << probe.output;
}

// A store that takes the connection and never answers: the first write
// times out after 10 s.
TEST(ProbeTest, AStoreThatNeverAnswersIs3) {
  testing::SilentListener silent;
  const auto probe = RunFencepost(
      {"probe", "http://127.0.0.1:" + std::to_string(silent.port())});
  EXPECT_EQ(probe.exit_status, 3) << probe.output;
}

TEST(ProbeTest, ABadUrlOrFlagIs2) {
  for (const std::vector<std::string>& args :
       std::vector<std::vector<std::string>>{
           {"probe"},
           {"probe", "127.0.0.1:7400"},
           {"probe", "ftp://127.0.0.1:7400/x"},
           {"probe", "http://"},
           {"probe", "http://127.0.0.1:0/x"},
           {"probe", "http://127.0.0.1:7400/x?y=1"},
           {"probe", "http://127.0.0.1:7400/x#y"},
           {"probe", "http://127.0.0.1:7400/a b"},
           {"probe", "http://127.0.0.1:7400", "http://127.0.0.1:7401"},
           {"probe", "http://127.0.0.1:7400", "--token", "-1"},
           {"probe", "http://127.0.0.1:7400", "--holder", "h"},
       }) {
    const auto run = RunFencepost(args);
    EXPECT_EQ(run.exit_status, 2) << args.back() << ": " << run.output;
    EXPECT_TRUE(Has(run.output, "fencepost probe --help")) << run.output;
  }
  const auto help = RunFencepost({"probe", "--help"});
  EXPECT_EQ(help.exit_status, 0);
  EXPECT_TRUE(Has(help.output, "fencepost probe URL [--token N]"));
  EXPECT_TRUE(Has(help.output, "`probe` tells whether"));
  EXPECT_TRUE(Has(RunFencepost({"--help"}).output, "fencepost probe URL"));
}

// probe s3:// refuses, before any request, what cannot name or sign for a
// bucket (the runs against a real RGW are S3ProbeTest, probe_s3.sh).
TEST(ProbeTest, AnS3UrlWithABadFlagIs2) {
  const std::string closed = "http://127.0.0.1:1";
  for (const std::vector<std::string>& args :
       std::vector<std::vector<std::string>>{
           {"probe", "s3://Bad_Bucket", "--s3-endpoint", closed},
           {"probe", "s3://fencepost/a%2", "--s3-endpoint", closed},
           {"probe", "s3://fencepost", "--s3-endpoint", "ftp://127.0.0.1"},
           {"probe", "s3://fencepost", "--s3-endpoint", closed, "--token", "5"},
           {"probe", "s3://fencepost", "--s3-endpoint", closed,
            "--auth-token-file", "/dev/null"},
           {"probe", "s3://fencepost", "--s3-endpoint", closed,
            "--s3-addressing", "dns"},
           // No bucket before an IP address.
           {"probe", "s3://fencepost", "--s3-endpoint", closed,
            "--s3-addressing", "virtual"},
           {"probe", "s3://fencepost", "--s3-region", "US East"},
           {"probe", "s3://fencepost", "--s3-endpoint", closed,
            "--s3-credentials-file", "/nonexistent/credentials"},
           {"probe", "http://127.0.0.1:7400", "--s3-region", "us-east-1"},
       }) {
    const auto run = RunFencepost(args);
    EXPECT_EQ(run.exit_status, 2) << args.back() << ": " << run.output;
    EXPECT_TRUE(Has(run.output, "fencepost probe --help")) << run.output;
  }
  EXPECT_TRUE(Has(RunFencepost({"probe", "--help"}).output,
                  "fencepost probe s3://BUCKET[/PREFIX] [--s3-endpoint URL]"));
}

}  // namespace
}  // namespace fencepost::client
