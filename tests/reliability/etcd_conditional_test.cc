// Conditional writes (SPEC "Conditional writes") on the etcd backend: real
// fencepost replicas (--fence-store etcd:// --backend etcd) in front of a
// real single-member etcd (Debian's etcd-server, started by
// tests/coordination/etcd.sh on free ports of 127.0.0.1), over HTTP. Entity
// tags are the values' mod_revisions; preconditions are compared in the
// transaction that writes, so that replicas racing on one value lose no
// update.

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "tests/coordination/shell.h"
#include "tests/testing/http_client.h"
#include "tests/testing/server_process.h"
#include "tests/testing/suite_etcd.h"
#include "tests/testing/temp_dir.h"

namespace fencepost::reliability {
namespace {

using testing::Fetch;
using testing::HttpClient;
using testing::HttpResponse;
using testing::ServerProcess;
using testing::Shell;

// One etcd for the suite (testing::SuiteEtcd).
class EtcdConditionalTest : public testing::SuiteEtcd {
 protected:
  // A replica serving values from etcd under `prefix`, with `more` flags.
  static std::unique_ptr<ServerProcess> Replica(
      const std::string& prefix, std::vector<std::string> more = {}) {
    std::vector<std::string> args = {"--fence-store", url_ + "/" + prefix,
                                     "--backend", "etcd"};
    args.insert(args.end(), more.begin(), more.end());
    return std::make_unique<ServerProcess>("", args);
  }
  // etcdctl's endpoint: HOST:PORT of url_ (etcd://HOST:PORT).
  static std::string Endpoint() { return url_.substr(url_.find("//") + 2); }
};

// An ETag field's value ("N") as a JSON string: "\"N\"".
std::string JsonOf(const std::string& etag) {
  if (etag.size() < 2) return "(no tag)";
  return "\"\\\"" + etag.substr(1, etag.size() - 2) + "\\\"\"";
}

TEST_F(EtcdConditionalTest, TheETagChangesOnEveryWriteAndOutlivesARestart) {
  auto replica = Replica("etags");
  const auto port = replica->data_port();
  auto created =
      Fetch(port, "PUT", "/doc",
            {{"Fencing-Token", "7"}, {"Content-Type", "text/csv"}}, "a,b");
  ASSERT_EQ(created.status, 201) << created.body;
  const std::string first = created.header("etag");
  ASSERT_FALSE(first.empty());
  auto read = Fetch(port, "GET", "/doc");
  EXPECT_EQ(read.status, 200);
  EXPECT_EQ(read.header("etag"), first);
  EXPECT_EQ(read.header("content-type"), "text/csv");
  EXPECT_EQ(read.header("fencing-token"), "7");
  EXPECT_EQ(read.body, "a,b");
  auto head = Fetch(port, "HEAD", "/doc");
  EXPECT_EQ(head.header("etag"), first);

  // The same body with the same token, and no Content-Type this time.
  auto again = Fetch(port, "PUT", "/doc", {{"Fencing-Token", "7"}}, "a,b");
  ASSERT_EQ(again.status, 200) << again.body;
  const std::string second = again.header("etag");
  EXPECT_NE(second, first);
  read = Fetch(port, "GET", "/doc");
  EXPECT_EQ(read.header("etag"), second);
  EXPECT_EQ(read.header("content-type"), "application/octet-stream");
  // Stored as the previous release stored it, so that release reads it.
  EXPECT_EQ(Shell("ETCDCTL_API=3 etcdctl --endpoints=" + Endpoint() +
                  " get --print-value-only etags/values/doc"),
            "7\na,b\n");

  replica.reset();
  replica = Replica("etags");
  read = Fetch(replica->data_port(), "GET", "/doc");
  EXPECT_EQ(read.status, 200);
  EXPECT_EQ(read.header("etag"), second);
  auto other = Replica("etags");  // every replica gives the same tag
  EXPECT_EQ(Fetch(other->data_port(), "GET", "/doc").header("etag"), second);
}

TEST_F(EtcdConditionalTest, IfMatchAndIfNoneMatchDecideAfterTheToken) {
  auto replica = Replica("preconditions");
  const auto port = replica->data_port();
  // If-None-Match: * creates once.
  auto created = Fetch(port, "PUT", "/cfg",
                       {{"Fencing-Token", "7"}, {"If-None-Match", "*"}}, "v1");
  ASSERT_EQ(created.status, 201) << created.body;
  const std::string tag = created.header("etag");
  auto exists = Fetch(port, "PUT", "/cfg",
                      {{"Fencing-Token", "7"}, {"If-None-Match", "*"}}, "v0");
  EXPECT_EQ(exists.status, 412) << exists.body;
  EXPECT_NE(exists.body.find("\"current_etag\":" + JsonOf(tag)),
            std::string::npos)
      << exists.body;

  // A wrong tag: 412, and neither the value nor the fence moves.
  const std::string fence_before =
      Fetch(replica->admin_port(), "GET", "/v1/fences/cfg").body;
  auto wrong = Fetch(port, "PUT", "/cfg",
                     {{"Fencing-Token", "8"}, {"If-Match", "\"1\""}}, "v2");
  EXPECT_EQ(wrong.status, 412) << wrong.body;
  EXPECT_NE(wrong.body.find("precondition-failed"), std::string::npos);
  EXPECT_EQ(wrong.header("etag"), tag);
  EXPECT_EQ(Fetch(replica->admin_port(), "GET", "/v1/fences/cfg").body,
            fence_before);
  auto value = Fetch(port, "GET", "/cfg");
  EXPECT_EQ(value.body, "v1");
  EXPECT_EQ(value.header("etag"), tag);
  // A stale token is 409 whatever the precondition.
  EXPECT_EQ(Fetch(port, "PUT", "/cfg",
                  {{"Fencing-Token", "6"}, {"If-Match", "\"1\""}}, "v2")
                .status,
            409);
  EXPECT_EQ(Fetch(port, "PUT", "/cfg",
                  {{"Fencing-Token", "6"}, {"If-Match", tag}}, "v2")
                .status,
            409);

  // The right tag (in a list), then `*`.
  auto right =
      Fetch(port, "PUT", "/cfg",
            {{"Fencing-Token", "8"}, {"If-Match", "\"1\", " + tag}}, "v2");
  EXPECT_EQ(right.status, 200) << right.body;
  EXPECT_NE(right.header("etag"), tag);
  EXPECT_NE(Fetch(replica->admin_port(), "GET", "/v1/fences/cfg")
                .body.find("\"token\":8"),
            std::string::npos);
  auto any = Fetch(port, "PUT", "/cfg",
                   {{"Fencing-Token", "8"}, {"If-Match", "*"}}, "v3");
  EXPECT_EQ(any.status, 200) << any.body;
  EXPECT_EQ(Fetch(port, "PUT", "/none",
                  {{"Fencing-Token", "8"}, {"If-Match", "*"}}, "x")
                .status,
            412);

  // GET: a matching If-None-Match is 304, another tag 200.
  EXPECT_EQ(Fetch(port, "GET", "/cfg", {{"If-None-Match", any.header("etag")}})
                .status,
            304);
  EXPECT_EQ(Fetch(port, "GET", "/cfg", {{"If-None-Match", tag}}).status, 200);

  // DELETE: with the old tag 412, with the current one 204.
  EXPECT_EQ(
      Fetch(port, "DELETE", "/cfg", {{"Fencing-Token", "8"}, {"If-Match", tag}})
          .status,
      412);
  EXPECT_EQ(Fetch(port, "DELETE", "/cfg",
                  {{"Fencing-Token", "8"}, {"If-Match", any.header("etag")}})
                .status,
            204);
  EXPECT_EQ(Fetch(port, "GET", "/cfg").status, 404);
}

TEST_F(EtcdConditionalTest, ABatchWithAFailingIfMatchIs412AndAppliesNothing) {
  auto replica = Replica("batches");
  const auto port = replica->data_port();
  auto x = Fetch(port, "PUT", "/b/x", {{"Fencing-Token", "5"}}, "x1");
  ASSERT_EQ(x.status, 201);
  const std::string tag = x.header("etag");
  auto refused =
      Fetch(port, "POST", "/", {{"Fencing-Token", "5"}},
            "{\"ops\":[{\"op\":\"put\",\"key\":\"b/y\",\"value\":\"eTE=\"},"
            "{\"op\":\"put\",\"key\":\"b/x\",\"value\":\"eDI=\",\"if_match\":"
            "\"\\\"1\\\"\"}]}");
  EXPECT_EQ(refused.status, 412) << refused.body;
  EXPECT_NE(refused.body.find("op 1"), std::string::npos) << refused.body;
  EXPECT_NE(refused.body.find("b/x"), std::string::npos) << refused.body;
  EXPECT_EQ(Fetch(port, "GET", "/b/y").status, 404);
  EXPECT_EQ(Fetch(replica->admin_port(), "GET", "/v1/fences/b/y").status, 404);
  EXPECT_EQ(Fetch(port, "GET", "/b/x").body, "x1");

  auto applied = Fetch(
      port, "POST", "/", {{"Fencing-Token", "5"}},
      "{\"ops\":[{\"op\":\"put\",\"key\":\"b/y\",\"value\":\"eTE=\","
      "\"if_none_match\":\"*\"},{\"op\":\"put\",\"key\":\"b/x\",\"value\":"
      "\"eDI=\",\"if_match\":" +
          JsonOf(tag) + "}]}");
  ASSERT_EQ(applied.status, 200) << applied.body;
  const std::string new_tag = Fetch(port, "GET", "/b/x").header("etag");
  EXPECT_NE(new_tag, tag);
  EXPECT_NE(applied.body.find("\"etag\":" + JsonOf(new_tag)), std::string::npos)
      << applied.body;
  EXPECT_EQ(Fetch(port, "GET", "/b/y").body, "y1");
}

// The prefix records its format at the first start ("2"); one written by
// a newer release is refused with exit 2.
TEST_F(EtcdConditionalTest, ThePrefixsFormatIsRecordedAndANewerOneRefused) {
  { auto replica = Replica("formats"); }
  EXPECT_EQ(Shell("ETCDCTL_API=3 etcdctl --endpoints=" + Endpoint() +
                  " get --print-value-only formats/format"),
            "2\n");
  ASSERT_EQ(Shell("ETCDCTL_API=3 etcdctl --endpoints=" + Endpoint() +
                  " put newer/format 3 >/dev/null; echo $?"),
            "0\n");
  const auto refused = testing::RunFencepost(
      {"--fence-store", url_ + "/newer", "--backend", "etcd", "--listen",
       "127.0.0.1:0", "--admin-listen", "127.0.0.1:0"});
  EXPECT_EQ(refused.exit_status, 2) << refused.output;
  EXPECT_NE(refused.output.find("written by another release of fencepost "
                                "(format 3"),
            std::string::npos)
      << refused.output;
}

TEST_F(EtcdConditionalTest, AValueOfThePreviousReleaseReadsAndTakesATag) {
  // Written as the release before Content-Types stored values.
  ASSERT_EQ(Shell("printf '7\\nfrom before' | ETCDCTL_API=3 etcdctl "
                  "--endpoints=" +
                  Endpoint() + " put old/values/kept >/dev/null; echo $?"),
            "0\n");
  auto replica = Replica("old");
  const auto port = replica->data_port();
  auto read = Fetch(port, "GET", "/kept");
  ASSERT_EQ(read.status, 200) << read.body;
  EXPECT_EQ(read.body, "from before");
  EXPECT_EQ(read.header("fencing-token"), "7");
  EXPECT_EQ(read.header("content-type"), "application/octet-stream");
  const std::string tag = read.header("etag");
  ASSERT_FALSE(tag.empty());
  auto cas = Fetch(port, "PUT", "/kept",
                   {{"Fencing-Token", "7"},
                    {"If-Match", tag},
                    {"Content-Type", "application/json"}},
                   "{}");
  EXPECT_EQ(cas.status, 200) << cas.body;
  read = Fetch(port, "GET", "/kept");
  EXPECT_EQ(read.body, "{}");
  EXPECT_EQ(read.header("content-type"), "application/json");
}

// Clients read a counter, add one and write it back with If-Match, again
// after each 412, through two replicas: every 2xx is one increment.
struct RaceResult {
  int accepted = 0, refused = 0;
  std::map<int, int> others;  // status -> count
  bool timed_out = false;
  std::string final_value;
};

RaceResult CasRace(const std::vector<std::uint16_t>& ports,
                   const testing::Headers& token, int threads, int increments) {
  RaceResult result;
  std::mutex mu;
  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::seconds(120);
  std::vector<std::thread> clients;
  for (int t = 0; t < threads; ++t) {
    clients.emplace_back([&, t] {
      HttpClient client(ports[t % ports.size()]);
      int accepted = 0, refused = 0;
      std::map<int, int> others;
      bool timed_out = false;
      for (int i = 0; i < increments && !timed_out; ++i) {
        for (;;) {
          if (std::chrono::steady_clock::now() > deadline) {
            timed_out = true;
            break;
          }
          HttpResponse got = client.Request("GET", "/counter");
          if (got.status != 200) {
            ++others[got.status];
            continue;
          }
          testing::Headers headers = token;
          headers.emplace_back("If-Match", got.header("etag"));
          HttpResponse put =
              client.Request("PUT", "/counter", headers,
                             std::to_string(std::stoi(got.body) + 1));
          if (put.status / 100 == 2) {
            ++accepted;
            break;
          }
          ++(put.status == 412 ? refused : others[put.status]);
        }
      }
      std::lock_guard lock(mu);
      result.accepted += accepted;
      result.refused += refused;
      for (auto [status, n] : others) result.others[status] += n;
      result.timed_out = result.timed_out || timed_out;
    });
  }
  for (std::thread& c : clients) c.join();
  result.final_value = Fetch(ports[0], "GET", "/counter").body;
  return result;
}

void ExpectNoLostIncrement(const RaceResult& race, int expected) {
  EXPECT_FALSE(race.timed_out);
  EXPECT_EQ(race.accepted, expected);
  EXPECT_EQ(race.final_value, std::to_string(race.accepted))
      << race.accepted << " increments acknowledged, " << race.refused
      << " refused with 412";
  EXPECT_GT(race.refused, 0) << "the clients never raced";
  for (auto [status, n] : race.others) {
    ADD_FAILURE() << n << " answers with status " << status;
  }
}

TEST_F(EtcdConditionalTest, ClientsRacingThroughTwoReplicasLoseNoIncrement) {
  auto a = Replica("race");
  auto b = Replica("race");
  const testing::Headers token = {{"Fencing-Token", "7"}};
  testing::Headers create = token;
  create.emplace_back("If-None-Match", "*");
  ASSERT_EQ(Fetch(a->data_port(), "PUT", "/counter", create, "0").status, 201);
  const RaceResult race =
      CasRace({a->data_port(), b->data_port()}, token, 6, 30);
  ExpectNoLostIncrement(race, 6 * 30);
  std::printf("enforce: %d increments, %d refused with 412\n", race.accepted,
              race.refused);
}

// The same in observe mode, by clients that send no token (a legacy
// system being migrated): their writes move no fence, so only the compare
// of the value's revision stands between two replicas' read-modify-writes.
TEST_F(EtcdConditionalTest, ObservedWritesRacingThroughTwoReplicasLoseNone) {
  auto a = Replica("observed", {"--mode", "observe"});
  auto b = Replica("observed", {"--mode", "observe"});
  ASSERT_EQ(
      Fetch(a->data_port(), "PUT", "/counter", {{"If-None-Match", "*"}}, "0")
          .status,
      201);
  const RaceResult race = CasRace({a->data_port(), b->data_port()}, {}, 6, 30);
  ExpectNoLostIncrement(race, 6 * 30);
  std::printf("observe: %d increments, %d refused with 412\n", race.accepted,
              race.refused);
}

}  // namespace
}  // namespace fencepost::reliability
