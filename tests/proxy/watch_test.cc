// Watches without sockets: the hub's rules (order, prefixes, resume and
// reset, the bound on a watcher that does not keep up), and the long poll
// through Service over real LMDB, its committer threads included (the TSan
// pass runs these).

#include <gtest/gtest.h>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_future.hpp>

#include "fence/shards.h"
#include "proxy/service.h"
#include "storage/lmdb_backend.h"
#include "storage/local_fences.h"
#include "storage/watch_hub.h"
#include "tests/testing/exposition.h"
#include "tests/testing/temp_dir.h"

namespace fencepost::proxy {
namespace {

namespace asio = boost::asio;
namespace http = boost::beast::http;
using storage::WatchHub;

std::vector<std::string> Keys(const WatchHub::Subscriber& s) {
  std::vector<std::string> keys;
  for (const auto& e : s.pending) keys.push_back(e->type + ":" + e->key);
  return keys;
}

TEST(WatchHubTest, EventsGoInOrderToTheSubscribersOfTheirPrefix) {
  WatchHub hub(WatchHub::Options{100, 1u << 20, 1000});
  auto orders = hub.Subscribe("orders/", std::nullopt);
  auto all = hub.Subscribe("", std::nullopt);
  int woken = 0;
  orders->wake = [&woken] { ++woken; };
  hub.Publish("fence", "orders/1", "{}");
  hub.Publish("fence", "users/1", "{}");
  hub.Publish("rejection", "orders/2", "{}");
  EXPECT_EQ(Keys(*orders),
            (std::vector<std::string>{"fence:orders/1", "rejection:orders/2"}));
  EXPECT_EQ(Keys(*all).size(), 3u);
  EXPECT_EQ(all->pending[0]->id, 1001u);
  EXPECT_EQ(all->pending[2]->id, 1003u);
  EXPECT_EQ(woken, 1) << "woken for the first event it had to send";
  EXPECT_EQ(hub.watchers(), 2u);
  hub.Unsubscribe(orders);
  hub.Publish("fence", "orders/3", "{}");
  EXPECT_EQ(orders->pending.size(), 2u);
  EXPECT_EQ(hub.watchers(), 1u);
}

TEST(WatchHubTest, AComebackGetsWhatItMissedOrAReset) {
  WatchHub hub(WatchHub::Options{3, 1u << 20, 100});
  for (int i = 1; i <= 5; ++i)
    hub.Publish("fence", "k" + std::to_string(i), "{}");
  // Held: 103, 104, 105.
  auto back = hub.Subscribe("", 103);
  EXPECT_EQ(Keys(*back), (std::vector<std::string>{"fence:k4", "fence:k5"}));
  auto current = hub.Subscribe("", 105);
  EXPECT_TRUE(current->pending.empty());
  auto just_held = hub.Subscribe("", 102);
  EXPECT_EQ(Keys(*just_held).size(), 3u);
  for (std::uint64_t gone : {101u, 50u, 999u}) {
    auto late = hub.Subscribe("", gone);
    ASSERT_EQ(late->pending.size(), 1u) << gone;
    EXPECT_EQ(late->pending[0]->type, "reset") << gone;
    EXPECT_EQ(late->pending[0]->id, 105u) << "resuming from it misses nothing";
  }
  // A resumed prefix gets only its own.
  auto prefixed = hub.Subscribe("k5", 103);
  EXPECT_EQ(Keys(*prefixed), (std::vector<std::string>{"fence:k5"}));
}

TEST(WatchHubTest, AWatcherThatFallsBehindIsDroppedNotWaitedFor) {
  WatchHub hub(WatchHub::Options{10, 4096, 0});
  auto slow = hub.Subscribe("", std::nullopt);
  auto other = hub.Subscribe("x", std::nullopt);
  bool woken = false;
  slow->wake = [&woken] { woken = true; };
  const std::string data(500, 'd');
  int published = 0;
  while (!slow->dropped && published < 100) {
    hub.Publish("fence", "k", data);
    ++published;
  }
  EXPECT_TRUE(slow->dropped);
  EXPECT_LT(published, 10) << "4096 bytes hold fewer than ten such events";
  EXPECT_TRUE(slow->pending.empty());
  EXPECT_TRUE(woken);
  EXPECT_EQ(hub.dropped_total(), 1u);
  hub.Publish("fence", "k", data);
  EXPECT_TRUE(slow->pending.empty()) << "nothing more for a dropped watcher";
  EXPECT_FALSE(other->dropped);
}

// A stream whose client let a write time out is dropped by the same rule:
// its queue emptied, counted once however often it is told.
TEST(WatchHubTest, AWatcherDroppedForATimedOutWriteIsCountedOnce) {
  WatchHub hub(WatchHub::Options{10, 1u << 20, 0});
  auto stalled = hub.Subscribe("", std::nullopt);
  hub.Publish("fence", "k", "{}");
  ASSERT_EQ(stalled->pending.size(), 1u);
  hub.Drop(*stalled);
  hub.Drop(*stalled);
  EXPECT_TRUE(stalled->dropped);
  EXPECT_TRUE(stalled->pending.empty());
  EXPECT_EQ(stalled->pending_bytes, 0u);
  EXPECT_EQ(hub.dropped_total(), 1u);
  hub.Publish("fence", "k", "{}");
  EXPECT_TRUE(stalled->pending.empty());
}

// Issue 36, item 6: the store's feed lost changes (an etcd compaction). A
// client that saw events before the reset and comes back with their id must
// get a reset, not a replay that skips what the reset stands for.
TEST(WatchHubTest, AResetGetsANewIdAndNoComebackFromBeforeItIsReplayed) {
  WatchHub hub(WatchHub::Options{100, 1u << 20, 100});
  hub.Publish("fence", "k1", "{}");  // 101
  hub.Publish("fence", "k2", "{}");  // 102
  auto live = hub.Subscribe("", std::nullopt);
  auto waiter = hub.Wait("k1");
  hub.Reset();
  ASSERT_EQ(live->pending.size(), 1u);
  EXPECT_EQ(live->pending[0]->type, "reset");
  EXPECT_EQ(live->pending[0]->id, 103u) << "a new id, above every sent one";
  EXPECT_EQ(hub.last_id(), 103u);
  EXPECT_TRUE(waiter->signalled) << "a long poll reads again";
  for (std::uint64_t before : {101u, 102u}) {
    auto back = hub.Subscribe("", before);
    ASSERT_EQ(back->pending.size(), 1u) << before;
    EXPECT_EQ(back->pending[0]->type, "reset") << before;
    EXPECT_EQ(back->pending[0]->id, 103u) << before;
  }
  hub.Publish("fence", "k3", "{}");  // 104
  auto from_reset = hub.Subscribe("", 103);
  EXPECT_EQ(Keys(*from_reset), (std::vector<std::string>{"fence:k3"}))
      << "from the reset's id: what came after it";
  auto from_before = hub.Subscribe("", 102);
  ASSERT_EQ(from_before->pending.size(), 1u);
  EXPECT_EQ(from_before->pending[0]->type, "reset");
  EXPECT_EQ(from_before->pending[0]->id, 104u);
}

// Issue 36, item 3: a comeback whose missed events (all still held) pass a
// watcher's queue would be dropped before anything is sent, on every
// reconnection; it gets a reset instead, and goes on from there.
TEST(WatchHubTest, AComebackTooFarBehindForItsQueueGetsAResetNotADrop) {
  WatchHub hub(WatchHub::Options{10000, 4096, 100});
  const std::string data(100, 'd');
  for (int i = 1; i <= 100; ++i) hub.Publish("fence", "k", data);
  // 100 events of ~150 bytes: all held, 15 KB, past the 4 KiB queue.
  auto behind = hub.Subscribe("", 100);
  EXPECT_FALSE(behind->dropped);
  ASSERT_EQ(behind->pending.size(), 1u);
  EXPECT_EQ(behind->pending[0]->type, "reset");
  EXPECT_EQ(behind->pending[0]->id, 200u);
  EXPECT_EQ(hub.dropped_total(), 0u);
  // A comeback that fits is replayed, and one under another prefix counts
  // only its own events.
  auto near = hub.Subscribe("", 190);
  EXPECT_EQ(near->pending.size(), 10u);
  EXPECT_FALSE(near->dropped);
  auto other = hub.Subscribe("x", 100);
  EXPECT_TRUE(other->pending.empty());
  // The reset's id resumes with what comes next.
  hub.Publish("fence", "k", data);
  auto resumed = hub.Subscribe("", behind->pending[0]->id);
  EXPECT_EQ(resumed->pending.size(), 1u);
  EXPECT_EQ(resumed->pending[0]->id, 201u);
}

// Issue 36, item 4: the long poll of a request whose client left ends at
// once; the others wait on.
TEST(WatchHubTest, ALongPollWhoseClientLeftIsWokenAbandoned) {
  WatchHub hub;
  const int request = 0, other_request = 0;
  auto left = hub.Wait("a", &request);
  auto stays = hub.Wait("a", &other_request);
  int wakes = 0;
  left->wake = [&wakes] { ++wakes; };
  hub.ClientLeft(&request);
  EXPECT_TRUE(left->abandoned);
  EXPECT_TRUE(left->signalled);
  EXPECT_EQ(wakes, 1);
  EXPECT_FALSE(stays->abandoned);
  EXPECT_FALSE(stays->signalled);
  hub.ClientLeft(nullptr);
  EXPECT_FALSE(stays->signalled);
}

TEST(WatchHubTest, WaitersHearOfTheirFenceOnlyAndCloseWakesAll) {
  WatchHub hub;
  auto waiter = hub.Wait("a");
  int wakes = 0;
  waiter->wake = [&wakes] { ++wakes; };
  hub.Publish("fence", "ab", "{}");
  hub.Publish("rejection", "a", "{}");
  EXPECT_FALSE(waiter->signalled);
  hub.Publish("fence", "a", "{}");
  EXPECT_TRUE(waiter->signalled);
  EXPECT_EQ(wakes, 1);
  auto stream = hub.Subscribe("", std::nullopt);
  hub.Close();
  EXPECT_TRUE(stream->closed);
  EXPECT_EQ(wakes, 2);
  hub.Unwait("a", waiter);
  EXPECT_EQ(hub.watchers(), 1u);
}

fence::Shards::Options ShardsIn(const std::string& dir) {
  fence::Shards::Options options;
  options.dir = dir;
  options.max_map_size = 256u << 20;
  options.count = 2;
  return options;
}

// The long poll through Service, on one io_context with the writes that
// wake it; the committers run their own threads.
class WatchServiceTest : public ::testing::Test {
 protected:
  static Request Make(http::verb method, std::string target,
                      std::optional<std::string> token = std::nullopt) {
    Request req(method, target, 11);
    if (token) req.set("Fencing-Token", *token);
    req.body() = "v";
    req.prepare_payload();
    return req;
  }
  Response Run(metrics::Port port, const Request& req) {
    asio::io_context io;
    auto future =
        asio::co_spawn(io, service_.Handle(port, req), asio::use_future);
    io.run();
    return future.get();
  }

  testing::TempDir dir_;
  Config config_;
  fence::Shards shards_{ShardsIn(dir_.path())};
  storage::LocalFences fences_{shards_};
  storage::LmdbBackend backend_{shards_, fences_};
  metrics::Metrics metrics_{"lmdb"};
  Service service_{config_, fences_, backend_, metrics_};
};

TEST_F(WatchServiceTest, ALongPollWakesWhenAWriteRaisesItsFence) {
  ASSERT_EQ(
      Run(metrics::Port::kData, Make(http::verb::put, "/k", "5")).result_int(),
      201);
  const Request poll =
      Make(http::verb::get, "/v1/fences/k?wait_above=5&timeout_ms=60000");
  const Request same = Make(http::verb::put, "/k", "5");
  const Request raise = Make(http::verb::put, "/k", "7");
  asio::io_context io;
  auto polled = asio::co_spawn(io, service_.Handle(metrics::Port::kAdmin, poll),
                               asio::use_future);
  // The poll is registered before the writes run (it is spawned first);
  // one at the fence's own token does not answer it, one above does.
  auto writes = asio::co_spawn(
      io,
      [&]() -> Awaitable<void> {
        co_await service_.Handle(metrics::Port::kData, same);
        co_await service_.Handle(metrics::Port::kData, raise);
      },
      asio::use_future);
  io.run();
  writes.get();
  const Response res = polled.get();
  EXPECT_EQ(res.result_int(), 200);
  EXPECT_NE(res.body().find("\"token\":7"), std::string::npos) << res.body();
  EXPECT_EQ(res.count("Fencepost-Watch"), 0u) << "woken, not timed out";
  EXPECT_EQ(service_.watches().watchers(), 0u);
}

TEST_F(WatchServiceTest, ALongPollTimesOutWithTheFenceAsItStands) {
  Run(metrics::Port::kData, Make(http::verb::put, "/k", "5"));
  Response res =
      Run(metrics::Port::kAdmin,
          Make(http::verb::get, "/v1/fences/k?wait_above=5&timeout_ms=50"));
  EXPECT_EQ(res.result_int(), 200);
  EXPECT_EQ(res["Fencepost-Watch"], "timeout");
  EXPECT_NE(res.body().find("\"token\":5"), std::string::npos);
  res = Run(metrics::Port::kAdmin,
            Make(http::verb::get, "/v1/fences/none?wait_above=0&timeout_ms=0"));
  EXPECT_EQ(res.result_int(), 404);
  EXPECT_EQ(res["Fencepost-Watch"], "timeout");
  res =
      Run(metrics::Port::kAdmin,
          Make(http::verb::get, "/v1/fences/k?wait_above=4&timeout_ms=60000"));
  EXPECT_EQ(res.result_int(), 200) << "already above: at once";
  EXPECT_EQ(res.count("Fencepost-Watch"), 0u);
  for (const char* bad :
       {"wait_above=x", "wait_above=", "wait_above=-1",
        "wait_above=1&timeout_ms=300001", "wait_above=1&timeout_ms=1s"}) {
    res = Run(metrics::Port::kAdmin,
              Make(http::verb::get, std::string("/v1/fences/k?") + bad));
    EXPECT_EQ(res.result_int(), 400) << bad;
  }
}

}  // namespace
}  // namespace fencepost::proxy
