// The data and admin ports over real sockets: tokens, keys, limits, framing.

#include <gtest/gtest.h>

#include <thread>

#include "tests/testing/http_client.h"
#include "tests/testing/server_process.h"
#include "tests/testing/temp_dir.h"

namespace fencepost {
namespace {

using testing::Fetch;
using testing::HttpClient;
using testing::HttpResponse;
using testing::MetricValue;
using testing::ServerProcess;
using testing::TempDir;

// One server for the suite, started with a small body limit and a scope.
class HttpTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new TempDir();
    server_ = new ServerProcess(
        *dir_ / "data", {"--max-body", "1024", "--fence-scope", "tenants/acme/",
                         "--read-timeout", "1"});
  }
  static void TearDownTestSuite() {
    delete server_;
    delete dir_;
  }
  static int port() { return server_->data_port(); }
  static int admin() { return server_->admin_port(); }
  static HttpResponse Put(const std::string& key, const std::string& token,
                          const std::string& body = "v") {
    return Fetch(port(), "PUT", "/" + key, {{"Fencing-Token", token}}, body);
  }
  static std::string Get(const std::string& key) {
    return Fetch(port(), "GET", "/" + key).body;
  }
  // A raw request on its own connection.
  static HttpResponse Raw(const std::string& bytes) {
    return HttpClient(port()).Raw(bytes);
  }
  // The same, and whether the server then closed the connection.
  static std::pair<HttpResponse, bool> RawThenClosed(const std::string& bytes) {
    HttpClient client(port());
    HttpResponse r = client.Raw(bytes);
    return {r, client.ClosedByPeer(3)};
  }

  static TempDir* dir_;
  static ServerProcess* server_;
};
TempDir* HttpTest::dir_ = nullptr;
ServerProcess* HttpTest::server_ = nullptr;

TEST_F(HttpTest, TokenEdges) {
  EXPECT_EQ(Put("edge/first", "12345").status, 201) << "any first token";
  EXPECT_EQ(Put("edge/first", "12345", "again").status, 200) << "equal token";
  EXPECT_EQ(Get("edge/first"), "again");
  EXPECT_EQ(Put("edge/zero", "0").status, 201);
  EXPECT_EQ(Put("edge/zero", "0").status, 200);
  auto max = Put("edge/max", "18446744073709551615");
  EXPECT_EQ(max.status, 201);
  EXPECT_EQ(max.header("fencing-token"), "18446744073709551615");
  EXPECT_EQ(Put("edge/max", "18446744073709551614").status, 409);
  auto over = Put("edge/over", "18446744073709551616");
  EXPECT_EQ(over.status, 400);
  EXPECT_EQ(over.header("content-type"), "application/problem+json");
  EXPECT_NE(over.body.find("invalid-token"), std::string::npos);
  EXPECT_EQ(Fetch(port(), "GET", "/edge/over").status, 404);
}

TEST_F(HttpTest, MissingAndMalformedTokens) {
  auto missing = Fetch(port(), "PUT", "/tok/k", {}, "v");
  EXPECT_EQ(missing.status, 428);
  EXPECT_NE(missing.body.find("missing-token"), std::string::npos);
  for (const char* bad :
       {"", "+1", "-1", "0x1f", "1 2", "1.5", "one", "99999999999999999999"}) {
    EXPECT_EQ(Put("tok/k", bad).status, 400) << "'" << bad << "'";
  }
  EXPECT_EQ(Fetch(port(), "PUT", "/tok/k",
                  {{"Fencing-Token", "1"}, {"Fencing-Token", "1"}}, "v")
                .status,
            400)
      << "repeated header";
  auto spaced =
      Raw("PUT /tok/k HTTP/1.1\r\nHost: x\r\nFencing-Token:   7  \r\n"
          "Content-Length: 1\r\n\r\nv");
  EXPECT_EQ(spaced.status, 201) << "surrounding spaces are trimmed";
  EXPECT_EQ(spaced.header("fencing-token"), "7");
  EXPECT_EQ(Fetch(port(), "DELETE", "/tok/k").status, 428);
}

TEST_F(HttpTest, BadKeysAre400) {
  for (const char* target : {"/", "//a", "/a/", "/a//b", "/a/./b", "/a/../b",
                             "/%2e%2e/b", "/a%00b", "/a%zz", "/%C0%AF"}) {
    auto r = Raw(std::string("PUT ") + target +
                 " HTTP/1.1\r\nHost: x\r\nFencing-Token: 1\r\n"
                 "Content-Length: 1\r\n\r\nv");
    EXPECT_EQ(r.status, 400) << target;
    EXPECT_NE(r.body.find("bad-key"), std::string::npos) << target;
  }
  EXPECT_EQ(Put(std::string(1024, 'k'), "1").status, 201);
  EXPECT_EQ(Put(std::string(1025, 'k'), "1").status, 400);
  EXPECT_EQ(Put("q?x=1", "1", "with query").status, 201);
  EXPECT_EQ(Get("q"), "with query") << "query strings are not part of the key";
  EXPECT_EQ(Put("sp%20ace", "1", "decoded").status, 201);
  EXPECT_EQ(Get("sp%20ace"), "decoded");
}

// One target check for every route: the batch route (POST /) and the admin
// port's paths refuse what a PUT to a key refuses, and nothing changes.
TEST_F(HttpTest, EveryRouteRefusesABadTarget) {
  const std::string batch =
      R"({"ops":[{"op":"put","key":"target/batch","value":"dg=="}]})";
  for (const char* target : {"/?#frag%zz", "/#frag", "/?q=%zz", "/?a\\b"}) {
    auto r = Raw(std::string("POST ") + target +
                 " HTTP/1.1\r\nHost: x\r\nFencing-Token: 1\r\n"
                 "Content-Length: " +
                 std::to_string(batch.size()) + "\r\n\r\n" + batch);
    EXPECT_EQ(r.status, 400) << "POST " << target;
    EXPECT_NE(r.body.find("bad-key"), std::string::npos) << target;
  }
  EXPECT_EQ(Fetch(port(), "GET", "/target/batch").status, 404)
      << "no refused batch was applied";
  EXPECT_EQ(Fetch(port(), "POST", "/", {{"Fencing-Token", "1"}}, batch).status,
            200)
      << "the same batch at a good target";

  for (const char* target :
       {"/livez?#x", "/readyz#frag", "/metrics?a=%zz", "/healthz?\x7f",
        "/v1/fences?prefix=a#b", "/v1/leases?prefix=%G0", "/v1/rejections#",
        "/nowhere#x", "/v1/leases/a#b", "/v1/fences/a%zz"}) {
    auto r = HttpClient(admin()).Raw(std::string("GET ") + target +
                                     " HTTP/1.1\r\nHost: x\r\n\r\n");
    EXPECT_EQ(r.status, 400) << target;
    EXPECT_EQ(r.header("content-type"), "application/problem+json") << target;
  }
  auto lease = HttpClient(admin()).Raw(
      "PUT /v1/leases/a?%zz HTTP/1.1\r\nHost: x\r\nContent-Length: 30\r\n"
      "\r\n{\"holder\":\"h\",\"ttl_ms\":1000}  ");
  EXPECT_EQ(lease.status, 400);
  EXPECT_NE(lease.body.find("bad-key"), std::string::npos);
  EXPECT_EQ(Fetch(admin(), "GET", "/v1/leases/a").status, 404)
      << "the refused acquire granted nothing";
  EXPECT_EQ(Fetch(admin(), "GET", "/livez?probe=1").status, 200);
}

TEST_F(HttpTest, HeadersOver16KiBAre431) {
  auto r = RawThenClosed("GET /k HTTP/1.1\r\nHost: x\r\nX-Big: " +
                         std::string(17 * 1024, 'a') + "\r\n\r\n");
  EXPECT_EQ(r.first.status, 431);
  EXPECT_TRUE(r.second);
  EXPECT_EQ(
      Fetch(port(), "GET", "/k", {{"X-Ok", std::string(8000, 'a')}}).status,
      404)
      << "large but legal headers pass";
}

TEST_F(HttpTest, BodyOverTheLimitIs413AndNothingIsStored) {
  auto by_length = Put("big/a", "1", std::string(1025, 'b'));
  EXPECT_EQ(by_length.status, 413);
  EXPECT_EQ(Put("big/b", "1", std::string(1024, 'b')).status, 201);
  auto chunked = RawThenClosed(
      "PUT /big/c HTTP/1.1\r\nHost: x\r\nFencing-Token: 1\r\n"
      "Transfer-Encoding: chunked\r\n\r\n400\r\n" +
      std::string(1024, 'c') + "\r\n10\r\n" + std::string(16, 'c') +
      "\r\n0\r\n\r\n");
  EXPECT_EQ(chunked.first.status, 413);
  EXPECT_TRUE(chunked.second);
  EXPECT_EQ(Fetch(port(), "GET", "/big/a").status, 404);
  EXPECT_EQ(Fetch(port(), "GET", "/big/c").status, 404);
  EXPECT_EQ(Fetch(admin(), "GET", "/v1/fences/big/a").status, 404)
      << "a rejected write does not create a fence";
}

TEST_F(HttpTest, SmugglingShapedRequestsAre400AndClose) {
  const std::string head =
      "PUT /smuggle HTTP/1.1\r\nHost: x\r\nFencing-Token: 1\r\n";
  const std::string tail = "GET /smuggled HTTP/1.1\r\nHost: x\r\n\r\n";
  for (const std::string framing : {
           "Content-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
           "Transfer-Encoding: chunked\r\nContent-Length: 5\r\n\r\n0\r\n\r\n",
           "Transfer-Encoding: gzip\r\nContent-Length: 5\r\n\r\nhello",
           "Content-Length: 5\r\nTransfer-Encoding: gzip\r\n\r\nhello",
           "Transfer-Encoding: gzip, chunked\r\n\r\n0\r\n\r\n",
           "Transfer-Encoding: chunked, chunked\r\n\r\n0\r\n\r\n",
           "Transfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n"
           "0\r\n\r\n",
           "Content-Length: 5\r\nContent-Length: 6\r\n\r\nhello!",
           "Content-Length: 5, 6\r\n\r\nhello!",
       }) {
    auto r = RawThenClosed(head + framing + tail);
    EXPECT_EQ(r.first.status, 400) << framing;
    EXPECT_TRUE(r.second) << "connection left open after: " << framing;
  }
  EXPECT_EQ(Fetch(port(), "GET", "/smuggle").status, 404);
  EXPECT_EQ(Fetch(admin(), "GET", "/v1/fences/smuggle").status, 404);
}

TEST_F(HttpTest, KeepAliveAndPipelining) {
  HttpClient client(port());
  EXPECT_EQ(
      client.Request("PUT", "/pipe/a", {{"Fencing-Token", "1"}}, "A").status,
      201);
  EXPECT_EQ(client.Request("GET", "/pipe/a").body, "A");
  client.Send(
      "PUT /pipe/b HTTP/1.1\r\nHost: x\r\nFencing-Token: 2\r\n"
      "Content-Length: 1\r\n\r\nB"
      "GET /pipe/b HTTP/1.1\r\nHost: x\r\n\r\n"
      "PUT /pipe/b HTTP/1.1\r\nHost: x\r\nFencing-Token: 1\r\n"
      "Content-Length: 1\r\n\r\nX"
      "GET /pipe/b HTTP/1.1\r\nHost: x\r\n\r\n");
  EXPECT_EQ(client.ReadResponse().status, 201);
  EXPECT_EQ(client.ReadResponse().body, "B");
  EXPECT_EQ(client.ReadResponse().status, 409);
  auto last = client.ReadResponse();
  EXPECT_EQ(last.body, "B");
  EXPECT_EQ(last.header("fencing-token"), "2");
}

TEST_F(HttpTest, HeadCarriesLengthWithoutBody) {
  Put("head/k", "3", "twelve bytes");
  HttpClient client(port());
  auto head = client.Request("HEAD", "/head/k");
  EXPECT_EQ(head.status, 200);
  EXPECT_EQ(head.header("content-length"), "12");
  EXPECT_EQ(head.header("fencing-token"), "3");
  EXPECT_EQ(head.body, "");
  EXPECT_EQ(client.Request("GET", "/head/k").body, "twelve bytes")
      << "the connection is still in sync after HEAD";
  EXPECT_EQ(client.Request("HEAD", "/head/missing").status, 404);
  EXPECT_EQ(client.Request("GET", "/head/k").status, 200);
}

TEST_F(HttpTest, ExpectContinue) {
  HttpClient client(port());
  client.Send(
      "PUT /expect HTTP/1.1\r\nHost: x\r\nFencing-Token: 1\r\n"
      "Expect: 100-continue\r\nContent-Length: 3\r\n\r\n");
  EXPECT_EQ(client.ReadResponse().status, 100);
  client.Send("abc");
  EXPECT_EQ(client.ReadResponse().status, 201);
  EXPECT_EQ(Get("expect"), "abc");
}

TEST_F(HttpTest, ScopeSharedByTwoKeys) {
  EXPECT_EQ(Put("tenants/acme/orders", "34", "B").status, 201);
  auto stale = Put("tenants/acme/invoices", "33", "A");
  EXPECT_EQ(stale.status, 409);
  EXPECT_NE(stale.body.find("\"current_token\":34"), std::string::npos);
  auto fence = Fetch(admin(), "GET", "/v1/fences/tenants/acme/invoices");
  EXPECT_EQ(fence.status, 200);
  EXPECT_NE(fence.body.find("\"fence\":\"tenants/acme/\""), std::string::npos);
}

TEST_F(HttpTest, BumpFencesOutTheOldLeader) {
  auto bump =
      Fetch(admin(), "PUT", "/v1/fences/bump/k", {{"Fencing-Token", "50"}});
  EXPECT_EQ(bump.status, 201);
  EXPECT_NE(bump.body.find("\"token\":50"), std::string::npos);
  EXPECT_EQ(Put("bump/k", "49").status, 409);
  EXPECT_EQ(
      Fetch(admin(), "PUT", "/v1/fences/bump/k", {{"Fencing-Token", "49"}})
          .status,
      409);
  EXPECT_EQ(Put("bump/k", "50").status, 201);
}

TEST_F(HttpTest, FenceListingPages) {
  for (int i = 0; i < 5; ++i) {
    Fetch(admin(), "PUT", "/v1/fences/list/" + std::to_string(i),
          {{"Fencing-Token", "1"}});
  }
  auto first = Fetch(admin(), "GET", "/v1/fences?prefix=list/&limit=3");
  EXPECT_EQ(first.status, 200);
  EXPECT_EQ(first.header("content-type"), "application/json");
  EXPECT_NE(first.body.find("\"fence\":\"list/2\""), std::string::npos);
  EXPECT_NE(first.body.find("\"next\":\"list/2\""), std::string::npos);
  auto second =
      Fetch(admin(), "GET", "/v1/fences?prefix=list%2F&limit=3&after=list/2");
  EXPECT_NE(second.body.find("\"fence\":\"list/3\""), std::string::npos);
  EXPECT_NE(second.body.find("\"fence\":\"list/4\""), std::string::npos);
  EXPECT_EQ(second.body.find("\"fence\":\"list/2\""), std::string::npos);
  EXPECT_NE(second.body.find("\"next\":null"), std::string::npos);
  EXPECT_EQ(Fetch(admin(), "GET", "/v1/fences?limit=0").status, 400);
}

TEST_F(HttpTest, StalledClientIsCutOffWithoutHoldingUpOthers) {
  HttpClient slow(port());
  slow.Send("GET /slow HTTP/1.1\r\n");
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(Put("stall/k", std::to_string(i)).status / 100, 2);
  }
  EXPECT_TRUE(slow.ClosedByPeer(5)) << "cut off at the 1 s read deadline";
}

TEST_F(HttpTest, EveryResponseHasContentLength) {
  for (auto r : {Fetch(port(), "GET", "/none"), Fetch(admin(), "GET", "/livez"),
                 Fetch(admin(), "GET", "/metrics"), Put("cl/k", "1"),
                 Put("cl/k", "1"), Put("cl/k", "0"),
                 Fetch(port(), "POST", "/cl/k", {{"Fencing-Token", "1"}}, "x"),
                 Fetch(admin(), "GET", "/v1/fences")}) {
    EXPECT_TRUE(r.has("content-length")) << r.status;
  }
  auto deleted = Fetch(port(), "DELETE", "/cl/k", {{"Fencing-Token", "1"}});
  EXPECT_EQ(deleted.status, 204);
  EXPECT_FALSE(deleted.has("content-length"))
      << "RFC 9110 forbids Content-Length on a 204";
}

// A fresh server so the counters start at zero.
TEST(MetricsEndToEndTest, CountersMoveByExactlyTheExpectedAmounts) {
  TempDir dir;
  ServerProcess server(dir / "d");
  const int port = server.data_port();
  const std::string secret = "customer-4711-secret";
  auto put = [&](const std::string& token) {
    return Fetch(port, "PUT", "/" + secret, {{"Fencing-Token", token}}, "v")
        .status;
  };
  EXPECT_EQ(put("10"), 201);  // accepted, creates (no advance)
  EXPECT_EQ(put("10"), 200);  // accepted, equal
  EXPECT_EQ(put("11"), 200);  // accepted, advance
  EXPECT_EQ(put("9"), 409);   // stale
  EXPECT_EQ(put("x"), 400);   // invalid
  EXPECT_EQ(Fetch(port, "PUT", "/" + secret, {}, "v").status, 428);
  EXPECT_EQ(Fetch(server.admin_port(), "PUT", "/v1/fences/other",
                  {{"Fencing-Token", "3"}})
                .status,
            201);  // bump, creates
  EXPECT_EQ(Fetch(port, "DELETE", "/other", {{"Fencing-Token", "4"}}).status,
            204);  // accepted, advance

  const std::string m = Fetch(server.admin_port(), "GET", "/metrics").body;
  EXPECT_EQ(MetricValue(m, "fencepost_writes_accepted_total"), 5);
  EXPECT_EQ(MetricValue(m, "fencepost_token_advances_total"), 2);
  EXPECT_EQ(
      MetricValue(m, "fencepost_writes_rejected_total{reason=\"stale_token\"}"),
      1);
  EXPECT_EQ(MetricValue(
                m, "fencepost_writes_rejected_total{reason=\"invalid_token\"}"),
            1);
  EXPECT_EQ(MetricValue(
                m, "fencepost_writes_rejected_total{reason=\"missing_token\"}"),
            1);
  EXPECT_EQ(MetricValue(m, "fencepost_fences"), 2);
  EXPECT_EQ(MetricValue(m,
                        "fencepost_http_requests_total{code=\"200\",method="
                        "\"PUT\",port=\"data\"}"),
            2);
  EXPECT_EQ(MetricValue(m,
                        "fencepost_http_requests_total{code=\"409\",method="
                        "\"PUT\",port=\"data\"}"),
            1);
  EXPECT_EQ(
      MetricValue(
          m, "fencepost_http_request_duration_seconds_count{port=\"data\"}"),
      7);
  EXPECT_EQ(m.find(secret), std::string::npos) << "no label carries a key";
  EXPECT_EQ(m.find("other"), std::string::npos) << "no label carries a key";
}

// The write-ahead log's groups, syncs and waits (for the tail in
// docs/performance.md): one request at a time, each its own group.
TEST(MetricsEndToEndTest, TheLogsGroupsSyncsAndWaitsAreHistograms) {
  TempDir dir;
  ServerProcess server(dir / "d");
  constexpr int kWrites = 5;
  for (int i = 1; i <= kWrites; ++i) {
    ASSERT_EQ(Fetch(server.data_port(), "PUT", "/k" + std::to_string(i),
                    {{"Fencing-Token", "1"}}, "v")
                  .status,
              201);
  }
  ASSERT_EQ(
      Fetch(server.data_port(), "PUT", "/k1", {{"Fencing-Token", "0"}}, "v")
          .status,
      409);  // a group that logs nothing
  const std::string m = Fetch(server.admin_port(), "GET", "/metrics").body;
  EXPECT_EQ(MetricValue(m, "fencepost_log_group_writes_sum"), kWrites + 1);
  EXPECT_EQ(MetricValue(m, "fencepost_log_group_writes_count"), kWrites + 1);
  EXPECT_EQ(MetricValue(m, "fencepost_log_group_writes_bucket{le=\"1\"}"),
            kWrites + 1);
  EXPECT_EQ(MetricValue(m, "fencepost_log_sync_seconds_count"), kWrites);
  EXPECT_GT(MetricValue(m, "fencepost_log_sync_seconds_sum"), 0);
  EXPECT_EQ(MetricValue(m, "fencepost_log_sync_seconds_bucket{le=\"+Inf\"}"),
            kWrites);
  EXPECT_EQ(MetricValue(m, "fencepost_log_group_wait_seconds_count"),
            kWrites + 1);
  EXPECT_GT(MetricValue(m, "fencepost_log_group_wait_seconds_sum"), 0);
  const std::string again = Fetch(server.admin_port(), "GET", "/metrics").body;
  EXPECT_EQ(MetricValue(again, "fencepost_log_group_writes_count"), kWrites + 1)
      << "a second scrape counts nothing twice";
}

}  // namespace
}  // namespace fencepost
