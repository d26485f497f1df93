#include "proxy/service.h"

#include <gtest/gtest.h>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/use_future.hpp>

#include "fence/shards.h"
#include "proxy/routes.h"
#include "storage/lmdb_backend.h"
#include "storage/local_fences.h"
#include "tests/testing/exposition.h"
#include "tests/testing/temp_dir.h"

namespace fencepost::proxy {
namespace {

namespace http = boost::beast::http;
using testing::MetricValue;

fence::Shards::Options ShardsIn(const std::string& dir) {
  fence::Shards::Options options;
  options.dir = dir;
  options.max_map_size = 256u << 20;
  options.count = 4;  // every path crosses environments
  return options;
}

// The request handler alone, over real LMDB in a temp dir: no sockets.
class ServiceTest : public ::testing::Test {
 protected:
  explicit ServiceTest(Config config = {}) : config_(std::move(config)) {
    config_.data_dir = dir_.path();
  }

  Response Call(metrics::Port port, http::verb method, std::string target,
                std::optional<std::string> token = std::nullopt,
                std::string body = "") {
    Request req(method, target, 11);
    if (token) req.set("Fencing-Token", *token);
    req.body() = std::move(body);
    req.prepare_payload();
    boost::asio::io_context io;
    auto future = boost::asio::co_spawn(io, service_.Handle(port, req),
                                        boost::asio::use_future);
    io.run();
    return future.get();
  }
  Response Data(http::verb method, std::string target,
                std::optional<std::string> token = std::nullopt,
                std::string body = "") {
    return Call(metrics::Port::kData, method, std::move(target),
                std::move(token), std::move(body));
  }
  Response Admin(http::verb method, std::string target,
                 std::optional<std::string> token = std::nullopt) {
    return Call(metrics::Port::kAdmin, method, std::move(target),
                std::move(token));
  }

  testing::TempDir dir_;
  Config config_;
  fence::Shards shards_{ShardsIn(dir_.path())};
  storage::LocalFences fences_{shards_};
  storage::LmdbBackend backend_{shards_, fences_};
  metrics::Metrics metrics_{"lmdb"};
  Service service_{config_, fences_, backend_, metrics_};
};

TEST_F(ServiceTest, SeedStory) {
  EXPECT_EQ(Data(http::verb::put, "/orders/1", "33", "from A").result_int(),
            201);
  Response b = Data(http::verb::put, "/orders/1", "34", "from B");
  EXPECT_EQ(b.result_int(), 200);
  EXPECT_EQ(b["Fencing-Token"], "34");
  Response stale = Data(http::verb::put, "/orders/1", "33", "stale A");
  EXPECT_EQ(stale.result_int(), 409);
  EXPECT_EQ(stale[http::field::content_type], "application/problem+json");
  EXPECT_NE(stale.body().find("\"current_token\":34"), std::string::npos);
  EXPECT_NE(stale.body().find("\"presented_token\":33"), std::string::npos);
  EXPECT_NE(stale.body().find("urn:fencepost:problem:stale-token"),
            std::string::npos);
  Response get = Data(http::verb::get, "/orders/1");
  EXPECT_EQ(get.result_int(), 200);
  EXPECT_EQ(get.body(), "from B");
  EXPECT_EQ(get["Fencing-Token"], "34");
}

TEST_F(ServiceTest, TokenErrorsChangeNothing) {
  Data(http::verb::put, "/k", "5", "v");
  EXPECT_EQ(Data(http::verb::put, "/k", std::nullopt, "x").result_int(), 428);
  for (const char* bad : {"", "-1", "0x5", "1 2", "18446744073709551616"}) {
    EXPECT_EQ(Data(http::verb::put, "/k", bad, "x").result_int(), 400) << bad;
  }
  EXPECT_EQ(Data(http::verb::delete_, "/k", "abc").result_int(), 400);
  EXPECT_EQ(Data(http::verb::get, "/k").body(), "v");
  const std::string text = metrics_.Serialize();
  EXPECT_EQ(MetricValue(text,
                        "fencepost_writes_rejected_total{reason=\"invalid_"
                        "token\"}"),
            6);
  EXPECT_EQ(MetricValue(text,
                        "fencepost_writes_rejected_total{reason=\"missing_"
                        "token\"}"),
            1);
}

TEST_F(ServiceTest, RepeatedTokenHeaderIsInvalid) {
  Request req(http::verb::put, "/k", 11);
  req.insert("Fencing-Token", "5");
  req.insert("Fencing-Token", "5");
  req.prepare_payload();
  boost::asio::io_context io;
  auto future = boost::asio::co_spawn(
      io, service_.Handle(metrics::Port::kData, req), boost::asio::use_future);
  io.run();
  EXPECT_EQ(future.get().result_int(), 400);
}

TEST_F(ServiceTest, DeleteKeepsTheFence) {
  Data(http::verb::put, "/k", "7", "v");
  Response del = Data(http::verb::delete_, "/k", "8");
  EXPECT_EQ(del.result_int(), 204);
  EXPECT_EQ(del.count(http::field::content_length), 0u)
      << "RFC 9110: no Content-Length on a 204";
  EXPECT_EQ(del["Fencing-Token"], "8");
  EXPECT_EQ(Data(http::verb::get, "/k").result_int(), 404);
  EXPECT_EQ(Data(http::verb::put, "/k", "7", "old").result_int(), 409);
  Response fence = Admin(http::verb::get, "/v1/fences/k");
  EXPECT_NE(fence.body().find("\"token\":8"), std::string::npos);
  EXPECT_EQ(Data(http::verb::delete_, "/missing", "1").result_int(), 204);
}

TEST_F(ServiceTest, MethodsOutsideTheTableGet405WithAllow) {
  Response post = Data(http::verb::post, "/k", "1", "v");
  EXPECT_EQ(post.result_int(), 405);
  EXPECT_EQ(post[http::field::allow], "GET, HEAD, PUT, DELETE");
  EXPECT_EQ(Data(http::verb::patch, "/k", "1", "v").result_int(), 405);
  EXPECT_EQ(Data(http::verb::get, "/k").result_int(), 404);
}

TEST_F(ServiceTest, BadKeys) {
  for (const char* target : {"/", "//a", "/a/", "/a//b", "/a/../b", "/./a",
                             "/a%00", "/%ff", "/a%2"}) {
    Response r = Data(http::verb::put, target, "1", "v");
    EXPECT_EQ(r.result_int(), 400) << target;
    EXPECT_NE(r.body().find("bad-key"), std::string::npos);
  }
}

TEST_F(ServiceTest, FenceDocumentsAndBump) {
  EXPECT_EQ(Admin(http::verb::get, "/v1/fences/a").result_int(), 404);
  Response created = Admin(http::verb::put, "/v1/fences/a", "10");
  EXPECT_EQ(created.result_int(), 201);
  EXPECT_NE(
      created.body().find("\"fence\":\"a\",\"token\":10,\"updated_at\":\""),
      std::string::npos);
  EXPECT_EQ(Admin(http::verb::put, "/v1/fences/a", "11").result_int(), 200);
  EXPECT_EQ(Admin(http::verb::put, "/v1/fences/a", "9").result_int(), 409);
  EXPECT_EQ(Admin(http::verb::put, "/v1/fences/a").result_int(), 428);
  EXPECT_EQ(Data(http::verb::put, "/a", "10", "v").result_int(), 409)
      << "a bump fences out the old leader before it writes";
  EXPECT_EQ(Admin(http::verb::delete_, "/v1/fences/a").result_int(), 405);
}

TEST_F(ServiceTest, ListingValidatesLimit) {
  for (int i = 0; i < 5; ++i) {
    Admin(http::verb::put, "/v1/fences/k" + std::to_string(i), "1");
  }
  Response page = Admin(http::verb::get, "/v1/fences?limit=2");
  EXPECT_EQ(page.result_int(), 200);
  EXPECT_NE(page.body().find("\"next\":\"k1\""), std::string::npos);
  Response rest = Admin(http::verb::get, "/v1/fences?limit=5000&after=k1");
  EXPECT_NE(rest.body().find("\"fence\":\"k4\""), std::string::npos);
  EXPECT_EQ(rest.body().find("\"fence\":\"k1\""), std::string::npos);
  EXPECT_NE(rest.body().find("\"next\":null"), std::string::npos);
  EXPECT_EQ(Admin(http::verb::get, "/v1/fences?limit=0").result_int(), 400);
  EXPECT_EQ(Admin(http::verb::get, "/v1/fences?limit=ten").result_int(), 400);
  EXPECT_EQ(Admin(http::verb::get, "/v1/fences?limit=-1").result_int(), 400);
}

TEST_F(ServiceTest, HealthAndReadiness) {
  EXPECT_EQ(Admin(http::verb::get, "/livez").result_int(), 200);
  EXPECT_EQ(Admin(http::verb::get, "/healthz").result_int(), 200);
  EXPECT_EQ(Admin(http::verb::get, "/readyz").result_int(), 200);
  service_.StartDraining();
  EXPECT_EQ(Admin(http::verb::get, "/readyz").result_int(), 503);
  EXPECT_EQ(Admin(http::verb::get, "/livez").result_int(), 200);
  EXPECT_EQ(Admin(http::verb::get, "/nope").result_int(), 404);
}

TEST_F(ServiceTest, LongKeysRoundTripWithoutCollisions) {
  const std::string a = "/" + std::string(900, 'x') + "a";
  const std::string b = "/" + std::string(900, 'x') + "b";
  EXPECT_EQ(Data(http::verb::put, a, "1", "A").result_int(), 201);
  EXPECT_EQ(Data(http::verb::put, b, "2", "B").result_int(), 201);
  EXPECT_EQ(Data(http::verb::get, a).body(), "A");
  EXPECT_EQ(Data(http::verb::get, b).body(), "B");
  EXPECT_EQ(Data(http::verb::put, a, "0", "stale").result_int(), 409);
  EXPECT_EQ(Data(http::verb::put, "/" + std::string(1025, 'x'), "1", "v")
                .result_int(),
            400);
}

TEST_F(ServiceTest, BadKeyShowsTheDecodedKeyOrTheRawPath) {
  // Decodes: the key as every other problem shows it.
  Response dots = Data(http::verb::put, "/a/%2E%2E/b?x=1", "1", "v");
  EXPECT_EQ(dots.result_int(), 400);
  EXPECT_NE(dots.body().find("\"key\":\"a/../b\""), std::string::npos)
      << dots.body();
  // Does not decode (a malformed escape, a NUL, invalid UTF-8): the path as
  // sent, JSON-escaped.
  for (const char* raw : {"a%zz", "a%00b", "%ff\"x"}) {
    Response r = Data(http::verb::put, std::string("/") + raw, "1", "v");
    EXPECT_EQ(r.result_int(), 400) << raw;
    std::string escaped = raw;
    if (const auto q = escaped.find('"'); q != std::string::npos) {
      escaped.insert(q, "\\");
    }
    EXPECT_NE(r.body().find("\"key\":\"" + escaped + "\""), std::string::npos)
        << r.body();
  }
}

TEST_F(ServiceTest, InvalidTokenEchoesWhatWasSentBounded) {
  Response r = Data(http::verb::put, "/k", "12\"ab", "v");
  EXPECT_EQ(r.result_int(), 400);
  EXPECT_NE(r.body().find("\"presented\":\"12\\\"ab\""), std::string::npos)
      << r.body();
  Response long_one = Data(http::verb::put, "/k", std::string(100, '9'), "v");
  EXPECT_NE(
      long_one.body().find("\"presented\":\"" + std::string(64, '9') + "...\""),
      std::string::npos)
      << long_one.body();
  Response missing = Data(http::verb::put, "/k", std::nullopt, "v");
  EXPECT_EQ(missing.body().find("presented\""), std::string::npos);
}

TEST(RoutesTest, HeadKeepsTheLengthAndDropsTheBody) {
  Request head(http::verb::head, "/k", 11);
  Response res(http::status::ok, 11);
  res.body() = "12345";
  res.prepare_payload();
  routes::FinishHead(head, res);
  EXPECT_EQ(res.body(), "");
  EXPECT_EQ(res[http::field::content_length], "5");
  // A body never read: its size from the backend.
  Response unread(http::status::ok, 11);
  routes::FinishHead(head, unread, 42);
  EXPECT_EQ(unread[http::field::content_length], "42");
  // An empty body keeps the length it carries (a relayed upstream answer).
  Response relayed(http::status::ok, 11);
  relayed.content_length(7);
  routes::FinishHead(head, relayed);
  EXPECT_EQ(relayed[http::field::content_length], "7");
  // Other methods are left alone.
  Request get(http::verb::get, "/k", 11);
  Response body(http::status::ok, 11);
  body.body() = "abc";
  body.prepare_payload();
  routes::FinishHead(get, body);
  EXPECT_EQ(body.body(), "abc");
}

class ScopedServiceTest : public ServiceTest {
 protected:
  static Config Scoped() {
    Config c;
    c.fence_scopes = {"tenants/acme/"};
    return c;
  }
  ScopedServiceTest() : ServiceTest(Scoped()) {}
};

TEST_F(ScopedServiceTest, KeysInAScopeShareOneFence) {
  EXPECT_EQ(Data(http::verb::put, "/tenants/acme/a", "34", "B").result_int(),
            201);
  Response stale = Data(http::verb::put, "/tenants/acme/b", "33", "A");
  EXPECT_EQ(stale.result_int(), 409)
      << "a key the new leader never touched is still fenced";
  EXPECT_EQ(Data(http::verb::get, "/tenants/acme/b").result_int(), 404);
  Response fence = Admin(http::verb::get, "/v1/fences/tenants/acme/zzz");
  EXPECT_NE(fence.body().find("\"fence\":\"tenants/acme/\""),
            std::string::npos);
  EXPECT_EQ(Data(http::verb::put, "/tenants/other", "1", "x").result_int(),
            201);
}

TEST_F(ScopedServiceTest, AScopeFenceReadsBackByItsExactName) {
  ASSERT_EQ(Data(http::verb::put, "/tenants/acme/a", "7", "v").result_int(),
            201);
  Response scope = Admin(http::verb::get, "/v1/fences/tenants/acme/");
  EXPECT_EQ(scope.result_int(), 200) << scope.body();
  EXPECT_NE(scope.body().find("\"fence\":\"tenants/acme/\""),
            std::string::npos);
  EXPECT_EQ(scope["Fencing-Token"], "7");
  EXPECT_EQ(Admin(http::verb::head, "/v1/fences/tenants/acme/").result_int(),
            200);
  // Only a configured scope's exact name: other trailing slashes stay 400.
  EXPECT_EQ(Admin(http::verb::get, "/v1/fences/tenants/").result_int(), 400);
  EXPECT_EQ(Admin(http::verb::get, "/v1/fences/tenants/acme/a/").result_int(),
            400);
  // The bump takes the scope's name too (and the prefixes that are not
  // scopes stay 400, above).
  EXPECT_EQ(
      Admin(http::verb::put, "/v1/fences/tenants/acme/", "9").result_int(),
      200);
  EXPECT_EQ(Admin(http::verb::get, "/v1/fences/tenants/acme/")["Fencing-Token"],
            "9");
  EXPECT_EQ(Admin(http::verb::put, "/v1/fences/tenants/", "9").result_int(),
            400);
}

class ObserveServiceTest : public ServiceTest {
 protected:
  static Config Observe() {
    Config c;
    c.mode = Mode::kObserve;
    return c;
  }
  ObserveServiceTest() : ServiceTest(Observe()) {}
};

TEST_F(ObserveServiceTest, StoresWhatEnforceWouldRejectAndCountsIt) {
  Data(http::verb::put, "/k", "34", "B");
  Response stale = Data(http::verb::put, "/k", "33", "A");
  EXPECT_EQ(stale.result_int(), 200);
  EXPECT_EQ(stale["Fencing-Token"], "34") << "the response carries the fence's";
  EXPECT_EQ(Data(http::verb::put, "/k", std::nullopt, "C").result_int(), 200);
  EXPECT_EQ(Data(http::verb::get, "/k").body(), "C");
  EXPECT_EQ(Data(http::verb::put, "/k", "x1", "D").result_int(), 400);
  Response fence = Admin(http::verb::get, "/v1/fences/k");
  EXPECT_NE(fence.body().find("\"token\":34"), std::string::npos);
  EXPECT_EQ(
      MetricValue(metrics_.Serialize(), "fencepost_writes_would_reject_total"),
      2);
}

// Leases through the handler: the HTTP rules around the committer's.
TEST_F(ServiceTest, LeaseAcquireRenewDenyReleaseAndGet) {
  const auto lease = [this](http::verb method, const std::string& body,
                            std::optional<std::string> token = std::nullopt) {
    return Call(metrics::Port::kAdmin, method, "/v1/leases/jobs/leader",
                std::move(token), body);
  };
  Response a = lease(http::verb::put, R"({"holder":"a","ttl_ms":60000})");
  EXPECT_EQ(a.result_int(), 200);
  EXPECT_NE(a.body().find("\"holder\":\"a\",\"token\":1,"), std::string::npos)
      << a.body();
  EXPECT_EQ(a["Fencing-Token"], "1");
  EXPECT_EQ(
      lease(http::verb::put, R"({"holder":"a","ttl_ms":60000})").result_int(),
      200);
  Response b = lease(http::verb::put, R"({"ttl_ms":1000,"holder":"b"})");
  EXPECT_EQ(b.result_int(), 409);
  EXPECT_NE(b.body().find("urn:fencepost:problem:lease-held"),
            std::string::npos);
  EXPECT_NE(b.body().find("\"holder\":\"a\""), std::string::npos);
  EXPECT_NE(b.body().find("\"expires_in_ms\":"), std::string::npos);
  // The grant raised the fence: a write with a lower token is stale.
  EXPECT_EQ(Data(http::verb::put, "/jobs/leader", "0", "x").result_int(), 409);

  EXPECT_EQ(lease(http::verb::delete_, R"({"holder":"a"})").result_int(), 428);
  Response wrong = lease(http::verb::delete_, R"({"holder":"b"})", "1");
  EXPECT_EQ(wrong.result_int(), 409);
  EXPECT_NE(wrong.body().find("urn:fencepost:problem:lease-not-held"),
            std::string::npos);
  EXPECT_EQ(lease(http::verb::delete_, R"({"holder":"a"})", "1").result_int(),
            204);
  Response get = Admin(http::verb::get, "/v1/leases/jobs/leader");
  EXPECT_EQ(get.result_int(), 200);
  EXPECT_NE(get.body().find("\"holder\":null,\"token\":1,"), std::string::npos)
      << get.body();
  EXPECT_EQ(Admin(http::verb::get, "/v1/fences/jobs/leader").result_int(), 200);
  Response next = lease(http::verb::put, R"({"holder":"b","ttl_ms":1000})");
  EXPECT_NE(next.body().find("\"token\":2,"), std::string::npos);
  EXPECT_NE(next.body().find("\"transitions\":1}"), std::string::npos);

  EXPECT_EQ(Admin(http::verb::get, "/v1/leases/never").result_int(), 404);
  EXPECT_EQ(Admin(http::verb::post, "/v1/leases/x").result_int(), 405);
  const std::string text = metrics_.Serialize();
  EXPECT_EQ(MetricValue(text, "fencepost_lease_grants_total"), 2);
  EXPECT_EQ(MetricValue(text, "fencepost_lease_renewals_total"), 1);
  EXPECT_EQ(MetricValue(text, "fencepost_lease_denied_total"), 1);
  EXPECT_EQ(MetricValue(text, "fencepost_lease_releases_total"), 1);
  // A grant raises a fence as a bump does.
  EXPECT_EQ(MetricValue(text, "fencepost_writes_accepted_total"), 2);
  EXPECT_EQ(MetricValue(text, "fencepost_token_advances_total"), 1);
}

TEST_F(ServiceTest, BadLeaseBodiesAre400AndChangeNothing) {
  const std::string target = "/v1/leases/l";
  for (const std::string& body : std::vector<std::string>{
           "",
           "null",
           "[]",
           R"({"holder":"a"})",
           R"({"ttl_ms":1000})",
           R"({"holder":"","ttl_ms":1000})",
           R"({"holder":"a","ttl_ms":99})",
           R"({"holder":"a","ttl_ms":3600001})",
           R"({"holder":"a","ttl_ms":1.5})",
           R"({"holder":"a","ttl_ms":"1000"})",
           R"({"holder":"a","ttl_ms":-1})",
           R"({"holder":1,"ttl_ms":1000})",
           R"({"holder":"a\nb","ttl_ms":1000})",
           R"({"holder":"a","ttl_ms":1000,"extra":1})",
           R"({"holder":"a","holder":"b","ttl_ms":1000})",
           R"({"holder":"a","ttl_ms":1000} x)",
           R"({"holder":{},"ttl_ms":1000})",
           "{\"holder\":\"" + std::string(257, 'h') + "\",\"ttl_ms\":1000}",
           "{\"holder\":\"\xff\",\"ttl_ms\":1000}",
           R"({"holder":"a\u202egnp.exe","ttl_ms":1000})",
           R"({"holder":"a\u200bb","ttl_ms":1000})",
           R"({"holder":"a\u0085b","ttl_ms":1000})"}) {
    Response r = Call(metrics::Port::kAdmin, http::verb::put, target,
                      std::nullopt, body);
    EXPECT_EQ(r.result_int(), 400) << body;
    EXPECT_NE(r.body().find("urn:fencepost:problem:bad-request"),
              std::string::npos)
        << body;
  }
  EXPECT_EQ(Admin(http::verb::get, target).result_int(), 404);
  EXPECT_EQ(Admin(http::verb::get, "/v1/fences/l").result_int(), 404);
  EXPECT_EQ(Call(metrics::Port::kAdmin, http::verb::put, "/v1/leases/a//b",
                 std::nullopt, R"({"holder":"a","ttl_ms":1000})")
                .result_int(),
            400);
  // 256 bytes is the most.
  EXPECT_EQ(
      Call(metrics::Port::kAdmin, http::verb::put, target, std::nullopt,
           "{\"holder\":\"" + std::string(256, 'h') + "\",\"ttl_ms\":1000}")
          .result_int(),
      200);
}

TEST_F(ServiceTest, LeasesArePagedByName) {
  for (const char* name : {"b", "a/1", "a/2", "a/3", "c"}) {
    ASSERT_EQ(Call(metrics::Port::kAdmin, http::verb::put,
                   std::string("/v1/leases/") + name, std::nullopt,
                   R"({"holder":"h","ttl_ms":1000})")
                  .result_int(),
              200);
  }
  Response page = Admin(http::verb::get, "/v1/leases?prefix=a/&limit=2");
  EXPECT_EQ(page.result_int(), 200);
  EXPECT_NE(page.body().find("\"name\":\"a/1\""), std::string::npos);
  EXPECT_NE(page.body().find("\"name\":\"a/2\""), std::string::npos);
  EXPECT_EQ(page.body().find("\"name\":\"a/3\""), std::string::npos);
  EXPECT_NE(page.body().find("\"next\":\"a/2\""), std::string::npos);
  Response rest = Admin(http::verb::get, "/v1/leases?prefix=a/&after=a/2");
  EXPECT_NE(rest.body().find("\"name\":\"a/3\""), std::string::npos);
  EXPECT_NE(rest.body().find("\"next\":null"), std::string::npos);
  EXPECT_EQ(Admin(http::verb::get, "/v1/leases?limit=0").result_int(), 400);
  EXPECT_EQ(MetricValue(metrics_.Serialize(), "fencepost_leases_held"), 0)
      << "the gauge is set at scrape";
  Response metrics = Admin(http::verb::get, "/metrics");
  EXPECT_EQ(MetricValue(metrics.body(), "fencepost_leases_held"), 5);
}

// Batches through the handler (the fixture has 4 shards: a batch's keys
// must share one, so these use one key or keys under one scope).
class BatchServiceTest : public ServiceTest {
 protected:
  BatchServiceTest() : ServiceTest(ScopedConfig()) {}
  static Config ScopedConfig() {
    Config config;
    config.fence_scopes = {"job/"};
    return config;
  }
  Response Post(const std::string& body, const char* token = "5") {
    return Call(metrics::Port::kData, http::verb::post, "/", token, body);
  }
  static std::string PutOp(const std::string& key, const std::string& b64) {
    return R"({"op":"put","key":")" + key + R"(","value":")" + b64 + R"("})";
  }
};

TEST_F(BatchServiceTest, AppliesEveryOpAtOneToken) {
  Response r =
      Post(R"({"ops":[)" + PutOp("job/state", "cnVubmluZw==") + "," +
           PutOp("job/ckpt", "") + R"(,{"op":"delete","key":"job/old"}]})");
  EXPECT_EQ(r.result_int(), 200) << r.body();
  EXPECT_EQ(r.body(),
            R"({"results":[{"key":"job/state","status":201,"etag":"\"1\""},)"
            R"({"key":"job/ckpt","status":201,"etag":"\"2\""},)"
            R"({"key":"job/old","status":204}]})"
            "\n");
  EXPECT_EQ(r["Fencing-Token"], "5");
  EXPECT_EQ(Data(http::verb::get, "/job/state").body(), "running");
  EXPECT_EQ(Data(http::verb::get, "/job/ckpt").result_int(), 200);
  EXPECT_EQ(
      MetricValue(metrics_.Serialize(), "fencepost_writes_accepted_total"), 3);
}

TEST_F(BatchServiceTest, AStaleBatchIs409AndChangesNothing) {
  ASSERT_EQ(Data(http::verb::put, "/job/a", "3", "a3").result_int(), 201);
  Admin(http::verb::put, "/v1/fences/job/x", "9");  // the scope job/ at 9
  Response r = Post(R"({"ops":[)" + PutOp("job/a", "bmV3") + "]}", "8");
  EXPECT_EQ(r.result_int(), 409);
  EXPECT_NE(r.body().find("\"key\":\"job/a\""), std::string::npos);
  EXPECT_NE(r.body().find("\"current_token\":9"), std::string::npos);
  EXPECT_EQ(Data(http::verb::get, "/job/a").body(), "a3");
}

TEST_F(BatchServiceTest, BadBatchesAre400AndChangeNothing) {
  std::string many = R"({"ops":[)";
  for (int i = 0; i < 1001; ++i) {
    many += (i ? "," : "") + PutOp("job/k" + std::to_string(i), "");
  }
  many += "]}";
  for (
      const std::string& body : std::vector<std::string>{
          "", "[]", R"({"ops":[]})", R"({"ops":{}})", R"({"ops":[1]})",
          R"({"ops":[],"x":1})", R"({"ops":[{"op":"put","key":"job/a"}]})",
          R"({"ops":[{"op":"get","key":"job/a"}]})",
          R"({"ops":[{"op":"delete","key":"job/a","value":""}]})",
          R"({"ops":[{"op":"put","key":"job/a","value":"!!!!"}]})",
          R"({"ops":[{"op":"put","key":"job/a","value":"YQ"}]})",
          R"({"ops":[{"op":"put","key":"job/a","value":1}]})",
          R"({"ops":[{"op":"put","key":"job//a","value":""}]})",
          R"({"ops":[{"op":"delete","key":"job/a"},{"op":"delete","key":"job/a"}]})",
          many}) {
    Response r = Post(body);
    EXPECT_EQ(r.result_int(), 400) << body.substr(0, 80) << r.body();
  }
  EXPECT_EQ(Admin(http::verb::get, "/v1/fences/job/a").result_int(), 404);
  EXPECT_EQ(Data(http::verb::get, "/job/k0").result_int(), 404);
  // 1000 ops is the most.
  many.resize(many.rfind(",{"));
  many += "]}";
  EXPECT_EQ(Post(many).result_int(), 200);
}

TEST_F(BatchServiceTest, KeysInDifferentShardsAre400) {
  std::string body = R"({"ops":[)";
  for (int i = 0; i < 16; ++i) {
    body += (i ? "," : "") + PutOp("other/" + std::to_string(i), "");
  }
  body += "]}";
  Response r = Post(body);
  EXPECT_EQ(r.result_int(), 400);
  EXPECT_NE(r.body().find("shards"), std::string::npos);
}

}  // namespace
}  // namespace fencepost::proxy
