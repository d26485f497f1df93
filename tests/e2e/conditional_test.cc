// Conditional writes end to end (SPEC "Conditional writes"): entity tags,
// If-Match and If-None-Match on the embedded and fs: backends, the real
// binary over HTTP on 127.0.0.1.

#include <gtest/gtest.h>
#include <signal.h>

#include <atomic>
#include <filesystem>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "tests/testing/exposition.h"
#include "tests/testing/http_client.h"
#include "tests/testing/server_process.h"
#include "tests/testing/temp_dir.h"

namespace fencepost {
namespace {

namespace fs = std::filesystem;
using testing::Fetch;
using testing::HttpClient;
using testing::HttpResponse;
using testing::ServerProcess;
using testing::TempDir;

std::string FenceDocument(std::uint16_t admin, const std::string& key) {
  return Fetch(admin, "GET", "/v1/fences/" + key).body;
}

HttpResponse Put(std::uint16_t port, const std::string& key,
                 const std::string& body, const std::string& token,
                 testing::Headers extra = {}) {
  extra.emplace_back("Fencing-Token", token);
  return Fetch(port, "PUT", "/" + key, extra, body);
}

// The embedded backend and fs: keep tags themselves; the same promises.
class ConditionalTest : public ::testing::TestWithParam<std::string> {
 protected:
  std::vector<std::string> Args() const {
    if (GetParam() == "fs") return {"--backend", "fs:" + store_};
    return {};
  }
  std::unique_ptr<ServerProcess> Start() {
    return std::make_unique<ServerProcess>(data_, Args());
  }

  TempDir dir_;
  std::string data_ = dir_ / "data";
  std::string store_ = dir_ / "store";
};

INSTANTIATE_TEST_SUITE_P(Backends, ConditionalTest,
                         ::testing::Values("lmdb", "fs"),
                         [](const auto& info) { return info.param; });

TEST_P(ConditionalTest, EveryWriteHasANewTagThatSurvivesRestartAndKill) {
  auto server = Start();
  HttpResponse first = Put(server->data_port(), "doc", "same", "3");
  ASSERT_EQ(first.status, 201);
  const std::string tag = first.header("etag");
  ASSERT_FALSE(tag.empty());
  EXPECT_EQ(tag.front(), '"');
  EXPECT_EQ(Fetch(server->data_port(), "GET", "/doc").header("etag"), tag);
  EXPECT_EQ(Fetch(server->data_port(), "HEAD", "/doc").header("etag"), tag);
  // The same body and token again: still a new tag.
  HttpResponse second = Put(server->data_port(), "doc", "same", "3");
  ASSERT_EQ(second.status, 200);
  EXPECT_NE(second.header("etag"), tag);

  server->Signal(SIGTERM);
  EXPECT_EQ(server->Wait(), 0);
  server = Start();
  EXPECT_EQ(Fetch(server->data_port(), "GET", "/doc").header("etag"),
            second.header("etag"));
  HttpResponse third = Put(server->data_port(), "doc", "third", "3");
  ASSERT_EQ(third.status, 200);
  server->Kill();
  server = Start();
  HttpResponse read = Fetch(server->data_port(), "GET", "/doc");
  EXPECT_EQ(read.body, "third");
  EXPECT_EQ(read.header("etag"), third.header("etag"));
  EXPECT_NE(third.header("etag"), tag);
  EXPECT_NE(third.header("etag"), second.header("etag"));
}

TEST_P(ConditionalTest, IfMatchAndIfNoneMatchDecideAfterTheToken) {
  auto server = Start();
  const auto port = server->data_port();
  const auto admin = server->admin_port();
  ASSERT_EQ(Put(port, "k", "v1", "3").status, 201);
  const std::string tag = Fetch(port, "GET", "/k").header("etag");
  const std::string fence = FenceDocument(admin, "k");

  // A wrong tag, with a token above the fence: 412, and neither the value
  // nor the fence moves.
  HttpResponse wrong = Put(port, "k", "v2", "5", {{"If-Match", "\"nope\""}});
  EXPECT_EQ(wrong.status, 412);
  EXPECT_NE(wrong.body.find("urn:fencepost:problem:precondition-failed"),
            std::string::npos);
  EXPECT_NE(wrong.body.find("\"current_etag\":\"\\\"" +
                            tag.substr(1, tag.size() - 2) + "\\\"\""),
            std::string::npos)
      << wrong.body;
  EXPECT_EQ(wrong.header("etag"), tag);
  EXPECT_EQ(FenceDocument(admin, "k"), fence);
  EXPECT_EQ(Fetch(port, "GET", "/k").body, "v1");

  // If-None-Match: * over a value: 412. A stale token with a wrong tag:
  // 409, the token first.
  EXPECT_EQ(Put(port, "k", "v2", "3", {{"If-None-Match", "*"}}).status, 412);
  EXPECT_EQ(Put(port, "k", "v2", "2", {{"If-Match", "\"nope\""}}).status, 409);
  EXPECT_EQ(Fetch(port, "GET", "/k").body, "v1");

  // The right tag, in a list, and `*`.
  HttpResponse right =
      Put(port, "k", "v2", "4", {{"If-Match", "\"x\", " + tag}});
  EXPECT_EQ(right.status, 200);
  EXPECT_NE(right.header("etag"), tag);
  EXPECT_EQ(Put(port, "k", "v3", "4", {{"If-Match", tag}}).status, 412);
  EXPECT_EQ(Put(port, "k", "v3", "4", {{"If-Match", "*"}}).status, 200);
  EXPECT_EQ(Fetch(port, "GET", "/k").body, "v3");

  // Create-only, and `*` where there is no value (current_etag null).
  EXPECT_EQ(Put(port, "new", "n", "1", {{"If-None-Match", "*"}}).status, 201);
  HttpResponse none = Put(port, "absent", "a", "1", {{"If-Match", "*"}});
  EXPECT_EQ(none.status, 412);
  EXPECT_NE(none.body.find("\"current_etag\":null"), std::string::npos);
  EXPECT_EQ(Fetch(port, "GET", "/absent").status, 404);
  EXPECT_EQ(Fetch(admin, "GET", "/v1/fences/absent").status, 404);

  // DELETE: a wrong tag keeps the value; the right one removes it.
  const std::string now = Fetch(port, "GET", "/k").header("etag");
  EXPECT_EQ(Fetch(port, "DELETE", "/k",
                  {{"Fencing-Token", "4"}, {"If-Match", "\"nope\""}})
                .status,
            412);
  EXPECT_EQ(Fetch(port, "GET", "/k").body, "v3");
  EXPECT_EQ(
      Fetch(port, "DELETE", "/k", {{"Fencing-Token", "4"}, {"If-Match", now}})
          .status,
      204);
  EXPECT_EQ(Fetch(port, "GET", "/k").status, 404);

  const std::string metrics = Fetch(admin, "GET", "/metrics").body;
  EXPECT_EQ(
      testing::MetricValue(
          metrics,
          "fencepost_writes_rejected_total{reason=\"precondition_failed\"}"),
      5);
  const std::string journal = Fetch(admin, "GET", "/v1/rejections").body;
  EXPECT_NE(journal.find("\"reason\":\"precondition_failed\""),
            std::string::npos);
  EXPECT_NE(journal.find("\"reason\":\"stale_token\""), std::string::npos);
}

TEST_P(ConditionalTest, ReadsAnswerTagsTypesAndNotModified) {
  auto server = Start();
  const auto port = server->data_port();
  ASSERT_EQ(Put(port, "page", "<p>hi</p>", "1",
                {{"Content-Type", "text/html; charset=utf-8"}})
                .status,
            201);
  ASSERT_EQ(Put(port, "blob", "b", "1").status, 201);
  HttpResponse page = Fetch(port, "GET", "/page");
  EXPECT_EQ(page.header("content-type"), "text/html; charset=utf-8");
  EXPECT_EQ(Fetch(port, "GET", "/blob").header("content-type"),
            "application/octet-stream");
  const std::string tag = page.header("etag");

  HttpResponse same = Fetch(port, "GET", "/page", {{"If-None-Match", tag}});
  EXPECT_EQ(same.status, 304);
  EXPECT_EQ(same.header("etag"), tag);
  EXPECT_TRUE(same.body.empty());
  EXPECT_EQ(Fetch(port, "GET", "/page", {{"If-None-Match", "W/" + tag}}).status,
            304);  // weak comparison
  EXPECT_EQ(
      Fetch(port, "GET", "/page", {{"If-None-Match", "\"other\""}}).status,
      200);
  EXPECT_EQ(Fetch(port, "GET", "/page", {{"If-Match", "\"other\""}}).status,
            412);
  // A malformed field is 400, and changes nothing.
  EXPECT_EQ(Put(port, "page", "x", "2", {{"If-Match", "unquoted"}}).status,
            400);
  EXPECT_EQ(
      Put(port, "page", "x", "2", {{"Content-Type", std::string(256, 'a')}})
          .status,
      400);
  EXPECT_EQ(Fetch(port, "GET", "/page").body, "<p>hi</p>");
  EXPECT_NE(FenceDocument(server->admin_port(), "page").find("\"token\":1"),
            std::string::npos);
}

// If-None-Match lists decide writes too; If-Match compares strongly, so
// a weak tag never matches, even the value's own.
TEST_P(ConditionalTest, TagListsAndWeakTagsOnWrites) {
  auto server = Start();
  const auto port = server->data_port();
  ASSERT_EQ(Put(port, "k", "v1", "3").status, 201);
  const std::string tag = Fetch(port, "GET", "/k").header("etag");
  ASSERT_FALSE(tag.empty());

  // A list that names the current tag refuses; one that does not applies.
  HttpResponse listed =
      Put(port, "k", "v2", "3", {{"If-None-Match", "\"x\", " + tag}});
  EXPECT_EQ(listed.status, 412);
  EXPECT_EQ(listed.header("etag"), tag);
  EXPECT_EQ(Fetch(port, "GET", "/k").body, "v1");
  HttpResponse other =
      Put(port, "k", "v2", "3", {{"If-None-Match", "\"x\", \"y\""}});
  EXPECT_EQ(other.status, 200);
  const std::string now = other.header("etag");
  ASSERT_FALSE(now.empty());

  // W/ and the current tag: no strong match, on PUT and DELETE.
  EXPECT_EQ(Put(port, "k", "v3", "3", {{"If-Match", "W/" + now}}).status, 412);
  EXPECT_EQ(Fetch(port, "DELETE", "/k",
                  {{"Fencing-Token", "3"}, {"If-Match", "W/" + now}})
                .status,
            412);
  EXPECT_EQ(Fetch(port, "GET", "/k").body, "v2");
  EXPECT_EQ(
      Put(port, "k", "v3", "3", {{"If-Match", "W/" + now + ", " + now}}).status,
      200);
}

// The token is checked first: a stale token is 409 also when If-Match,
// If-None-Match or Content-Type is malformed (else 400, as when fresh).
TEST_P(ConditionalTest, AStaleTokenIsRefusedBeforeAMalformedPrecondition) {
  auto server = Start();
  const auto port = server->data_port();
  ASSERT_EQ(Put(port, "k", "v1", "5").status, 201);
  for (const testing::Headers& bad : std::vector<testing::Headers>{
           {{"If-Match", "unquoted"}},
           {{"If-None-Match", "\"a\" \"b\""}},
           {{"If-Match", "*, \"a\""}},
           {{"Content-Type", std::string(256, 'a')}}}) {
    const std::string field = bad.front().first;
    HttpResponse stale = Put(port, "k", "v2", "4", bad);
    EXPECT_EQ(stale.status, 409) << field;
    EXPECT_NE(stale.body.find("\"current_token\":5"), std::string::npos)
        << field << ": " << stale.body;
    EXPECT_EQ(Put(port, "k", "v2", "5", bad).status, 400) << field;
    EXPECT_EQ(Put(port, "never", "v", "1", bad).status, 400) << field;
  }
  EXPECT_EQ(Fetch(port, "DELETE", "/k",
                  {{"Fencing-Token", "4"}, {"If-Match", "unquoted"}})
                .status,
            409);
  EXPECT_EQ(Fetch(port, "GET", "/k").body, "v1");
  EXPECT_EQ(Fetch(server->admin_port(), "GET", "/v1/fences/never").status, 404);
}

// A GET's 412 carries the value's ETag, as a write's does.
TEST_P(ConditionalTest, AReadsPreconditionFailureCarriesTheTag) {
  auto server = Start();
  const auto port = server->data_port();
  ASSERT_EQ(Put(port, "k", "v1", "1").status, 201);
  const std::string tag = Fetch(port, "GET", "/k").header("etag");
  for (const std::string method : {"GET", "HEAD"}) {
    HttpResponse refused =
        Fetch(port, method, "/k", {{"If-Match", "\"other\""}});
    EXPECT_EQ(refused.status, 412) << method;
    EXPECT_EQ(refused.header("etag"), tag) << method;
  }
}

// The interleaving a lost update needs, planted: two readers of the same
// tag each write an increment. Without If-Match the second write lands
// over the first (the negative control); with it, the second is 412.
TEST_P(ConditionalTest, ASecondWriterOfTheSameReadIsRefused) {
  auto server = Start();
  const auto port = server->data_port();
  ASSERT_EQ(Put(port, "n", "0", "1").status, 201);
  const std::string read_a = Fetch(port, "GET", "/n").header("etag");
  const std::string read_b = Fetch(port, "GET", "/n").header("etag");
  EXPECT_EQ(Put(port, "n", "1", "1", {{"If-Match", read_a}}).status, 200);
  EXPECT_EQ(Put(port, "n", "1", "1", {{"If-Match", read_b}}).status, 412);
  // Unconditional, the same interleaving loses A's increment.
  EXPECT_EQ(Put(port, "m", "0", "1").status, 201);
  EXPECT_EQ(Put(port, "m", "1", "1").status, 200);  // A's
  EXPECT_EQ(Put(port, "m", "1", "1").status, 200);  // B's, over it
  EXPECT_EQ(Fetch(port, "GET", "/m").body, "1");    // two writes, one step
}

// Many clients increment one counter by read, +1, PUT If-Match, retrying
// on 412: every 2xx is one increment, none lost.
TEST_P(ConditionalTest, ACompareAndSetRaceLosesNoIncrement) {
  auto server = Start();
  const auto port = server->data_port();
  ASSERT_EQ(Put(port, "counter", "0", "1").status, 201);
  constexpr int kClients = 8, kIncrements = 40;
  std::atomic<int> successes = 0, refusals = 0, failures = 0;
  std::vector<std::thread> clients;
  for (int c = 0; c < kClients; ++c) {
    clients.emplace_back([&] {
      HttpClient client(port);
      for (int done = 0, attempts = 0; done < kIncrements && attempts < 2000;
           ++attempts) {
        HttpResponse read = client.Request("GET", "/counter");
        if (read.status != 200) {
          ++failures;
          return;
        }
        const std::string next = std::to_string(std::stoi(read.body) + 1);
        HttpResponse write = client.Request(
            "PUT", "/counter",
            {{"Fencing-Token", "1"}, {"If-Match", read.header("etag")}}, next);
        if (write.status == 200) {
          ++successes;
          ++done;
        } else if (write.status == 412) {
          ++refusals;
        } else {
          ++failures;
          return;
        }
      }
    });
  }
  for (std::thread& t : clients) t.join();
  EXPECT_EQ(failures, 0);
  EXPECT_EQ(successes, kClients * kIncrements);
  EXPECT_EQ(Fetch(port, "GET", "/counter").body,
            std::to_string(successes.load()));
  EXPECT_GT(refusals, 0);  // the clients did race
}

// Batch ops carry if_match / if_none_match; one failing makes the whole
// batch 412 naming it, and nothing of it is applied.
TEST(ConditionalBatchTest, OneFailingPreconditionRefusesTheWholeBatch) {
  TempDir dir;
  ServerProcess server(dir / "data");
  const auto port = server.data_port();
  ASSERT_EQ(Put(port, "a", "a0", "2").status, 201);
  const std::string tag = Fetch(port, "GET", "/a").header("etag");
  auto batch = [&](const std::string& token, const std::string& ops) {
    return Fetch(port, "POST", "/", {{"Fencing-Token", token}},
                 "{\"ops\":[" + ops + "]}");
  };
  const std::string put_b =
      R"({"op":"put","key":"b","value":"YjE=","if_none_match":"*"})";
  HttpResponse refused = batch(
      "2",
      put_b +
          R"(,{"op":"put","key":"a","value":"YTE=","if_match":"\"nope\""})");
  EXPECT_EQ(refused.status, 412);
  EXPECT_NE(refused.body.find("op 1"), std::string::npos) << refused.body;
  EXPECT_NE(refused.body.find("\"key\":\"a\""), std::string::npos);
  EXPECT_EQ(Fetch(port, "GET", "/b").status, 404);
  EXPECT_EQ(Fetch(port, "GET", "/a").body, "a0");
  EXPECT_EQ(Fetch(server.admin_port(), "GET", "/v1/fences/b").status, 404);

  // A failing precondition and a stale op later: 409, the token first.
  ASSERT_EQ(Put(port, "c", "c0", "5").status, 201);
  HttpResponse stale = batch(
      "3", R"({"op":"put","key":"a","value":"YTE=","if_match":"\"nope\""},)"
           R"({"op":"put","key":"c","value":"YzE="})");
  EXPECT_EQ(stale.status, 409);

  HttpResponse applied = batch(
      "2", put_b + R"(,{"op":"put","key":"a","value":"YTE=","if_match":)" +
               "\"" + tag.substr(1, tag.size() - 2) + "\"}");
  ASSERT_EQ(applied.status, 200) << applied.body;
  EXPECT_NE(applied.body.find("\"etag\":"), std::string::npos);
  EXPECT_EQ(Fetch(port, "GET", "/a").body, "a1");
  EXPECT_EQ(Fetch(port, "GET", "/b").body, "b1");
  EXPECT_NE(Fetch(port, "GET", "/a").header("etag"), tag);
  EXPECT_EQ(batch("2", put_b).status, 412);  // b exists now
  EXPECT_EQ(
      batch("2", R"({"op":"put","key":"x","value":"eA==","if_none_match":"a"})")
          .status,
      400);

  // A malformed if_match is the op's fault, not its key's: bad-request,
  // naming the key. A bad key is bad-key.
  HttpResponse bad_tag =
      batch("2", R"({"op":"put","key":"a","value":"YTE=","if_match":"a b"})");
  EXPECT_EQ(bad_tag.status, 400);
  EXPECT_NE(bad_tag.body.find("urn:fencepost:problem:bad-request"),
            std::string::npos)
      << bad_tag.body;
  EXPECT_NE(bad_tag.body.find("\"key\":\"a\""), std::string::npos);
  HttpResponse bad_key =
      batch("2", R"({"op":"put","key":"a//b","value":"YTE="})");
  EXPECT_EQ(bad_key.status, 400);
  EXPECT_NE(bad_key.body.find("urn:fencepost:problem:bad-key"),
            std::string::npos)
      << bad_key.body;
}

// A batch refused for a precondition takes no log record numbers: the
// writes acknowledged after it are numbered on from the last one logged, so
// recovery after a kill -9 (which stops at a gap) finds every one of them.
TEST(ConditionalBatchTest, WritesAfterARefusedBatchSurviveAKill) {
  TempDir dir;
  auto server = std::make_unique<ServerProcess>(dir / "data");
  ASSERT_EQ(Put(server->data_port(), "a", "a0", "1").status, 201);
  HttpResponse refused =
      Fetch(server->data_port(), "POST", "/", {{"Fencing-Token", "1"}},
            R"({"ops":[{"op":"put","key":"x","value":"eA=="},)"
            R"({"op":"put","key":"a","value":"YQ==","if_match":"\"nope\""}]})");
  ASSERT_EQ(refused.status, 412);
  std::map<std::string, std::string> tags;
  for (const std::string key : {"b", "c", "d"}) {
    HttpResponse put = Put(server->data_port(), key, key + "1", "1");
    ASSERT_EQ(put.status, 201);
    tags[key] = put.header("etag");
  }
  // On lmdb a tag is its record's number: one after another, no gap where
  // the refused batch was decided.
  EXPECT_EQ(tags["b"], "\"2\"");
  EXPECT_EQ(tags["c"], "\"3\"");
  EXPECT_EQ(tags["d"], "\"4\"");
  server->Kill();
  server = std::make_unique<ServerProcess>(dir / "data");
  for (const auto& [key, tag] : tags) {
    HttpResponse read = Fetch(server->data_port(), "GET", "/" + key);
    EXPECT_EQ(read.body, key + "1") << key;
    EXPECT_EQ(read.header("etag"), tag) << key;
  }
  EXPECT_EQ(Fetch(server->data_port(), "GET", "/x").status, 404);
}

// http://: the preconditions go upstream unchanged and the upstream decides
// (here a second fencepost, which keeps tags); its 412 is relayed as it is,
// and counted.
TEST(ConditionalHttpTest, PreconditionsGoUpstreamAndItsAnswerIsRelayed) {
  TempDir dir;
  ServerProcess upstream(dir / "upstream");
  ServerProcess front(
      dir / "front",
      {"--backend", "http://127.0.0.1:" + std::to_string(upstream.data_port()),
       "--forward-token"});
  const auto port = front.data_port();
  HttpResponse created =
      Put(port, "k", "v1", "3", {{"Content-Type", "text/plain"}});
  ASSERT_EQ(created.status, 201);
  const std::string tag = created.header("etag");  // the upstream's
  ASSERT_FALSE(tag.empty());
  EXPECT_EQ(Fetch(upstream.data_port(), "GET", "/k").header("etag"), tag);
  EXPECT_EQ(Fetch(upstream.data_port(), "GET", "/k").header("content-type"),
            "text/plain");

  HttpResponse refused = Put(port, "k", "v2", "3", {{"If-Match", "\"nope\""}});
  EXPECT_EQ(refused.status, 412);
  EXPECT_NE(refused.body.find("\"current_etag\":"), std::string::npos)
      << "the upstream's own problem document, relayed";
  EXPECT_EQ(Fetch(upstream.data_port(), "GET", "/k").body, "v1");
  EXPECT_EQ(Put(port, "k", "v2", "3", {{"If-None-Match", "*"}}).status, 412);
  HttpResponse applied = Put(port, "k", "v2", "3", {{"If-Match", tag}});
  EXPECT_EQ(applied.status, 200);
  EXPECT_EQ(Fetch(upstream.data_port(), "GET", "/k").body, "v2");
  EXPECT_EQ(
      Fetch(port, "GET", "/k", {{"If-None-Match", applied.header("etag")}})
          .status,
      304);

  const std::string metrics = Fetch(front.admin_port(), "GET", "/metrics").body;
  EXPECT_EQ(
      testing::MetricValue(
          metrics,
          "fencepost_writes_rejected_total{reason=\"precondition_failed\"}"),
      2);
  EXPECT_EQ(testing::MetricValue(metrics, "fencepost_writes_accepted_total"),
            2);
  EXPECT_NE(Fetch(front.admin_port(), "GET", "/v1/rejections")
                .body.find("\"reason\":\"precondition_failed\""),
            std::string::npos);
}

}  // namespace
}  // namespace fencepost
