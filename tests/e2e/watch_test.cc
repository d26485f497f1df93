// Watches through the real binary over 127.0.0.1: the event stream's
// contents and prefix, coming back with Last-Event-ID (and a reset after a
// restart, or when what it missed passes its queue), a watcher that never
// reads dropped while writes go on and one that keeps up never dropped, the
// long poll answered by another client's bump, streams ended cleanly when
// the server stops, and watchers that leave room on the admin port and free
// their slots when their clients leave.

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "tests/testing/event_stream.h"
#include "tests/testing/exposition.h"
#include "tests/testing/http_client.h"
#include "tests/testing/server_process.h"
#include "tests/testing/temp_dir.h"

namespace fencepost {
namespace {

using testing::Fetch;
using testing::ServerProcess;
using testing::TempDir;
using testing::Watcher;
using Event = testing::Event;

int Put(std::uint16_t port, const std::string& key, int token) {
  return Fetch(port, "PUT", "/" + key,
               {{"Fencing-Token", std::to_string(token)}}, "v")
      .status;
}

// `count` puts of short keys PREFIX0, PREFIX1, ... at token 1, in batches
// of 1000 (an event each): what takes thousands of events quickly.
void PutMany(std::uint16_t port, const std::string& prefix, int count) {
  for (int from = 0; from < count; from += 1000) {
    std::string body = "{\"ops\":[";
    for (int i = from; i < std::min(count, from + 1000); ++i) {
      if (i > from) body += ",";
      body += "{\"op\":\"put\",\"key\":\"" + prefix + std::to_string(i) +
              "\",\"value\":\"\"}";
    }
    body += "]}";
    ASSERT_EQ(Fetch(port, "POST", "/", {{"Fencing-Token", "1"}}, body).status,
              200);
  }
}

// Whether `pred` holds within `seconds` (asked every 20 ms).
template <class Pred>
bool Within(double seconds, Pred pred) {
  const auto until =
      std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  while (!pred()) {
    if (std::chrono::steady_clock::now() >= until) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return true;
}

// Whether a watch's answer has begun (its head has come): read until it has
// or 10 s pass.
// (A stream's head is sent once it is subscribed.)
bool Answered(Watcher& watcher) {
  return Within(10, [&watcher] {
    watcher.EventsFor(20);
    return watcher.raw().find("\r\n\r\n") != std::string::npos;
  });
}

double Watchers(std::uint16_t admin) {
  return testing::MetricValue(Fetch(admin, "GET", "/metrics").body,
                              "fencepost_watchers");
}

TEST(WatchTest, TheStreamCarriesFencesLeasesAndRejectionsUnderItsPrefix) {
  TempDir dir;
  ServerProcess server(dir / "data");
  const auto data = server.data_port(), admin = server.admin_port();
  Watcher watcher(admin, "/v1/watch?prefix=p/");
  ASSERT_TRUE(watcher.Opened()) << watcher.raw();
  ASSERT_EQ(Put(data, "p/a", 5), 201);
  ASSERT_EQ(Put(data, "p/a", 5), 200);  // the same token: no event
  ASSERT_EQ(Put(data, "p/a", 3), 409);
  ASSERT_EQ(Put(data, "q/b", 7), 201);  // another prefix
  const std::string lease = R"({"holder":"h1","ttl_ms":60000})";
  ASSERT_EQ(Fetch(admin, "PUT", "/v1/leases/p/l", {}, lease).status, 200);
  ASSERT_EQ(Fetch(admin, "PUT", "/v1/leases/p/l", {}, lease).status, 200);
  ASSERT_EQ(Fetch(admin, "DELETE", "/v1/leases/p/l", {{"Fencing-Token", "1"}},
                  R"({"holder":"h1"})")
                .status,
            204);
  ASSERT_EQ(
      Fetch(admin, "PUT", "/v1/fences/p/a", {{"Fencing-Token", "9"}}).status,
      200);
  const std::vector<Event> events = watcher.Events(7);
  ASSERT_EQ(events.size(), 7u) << watcher.raw();
  const std::vector<std::string> want = {
      "fence:\"fence\":\"p/a\",\"token\":5",
      "rejection:\"presented_token\":3,\"current_token\":5,\"method\":\"PUT\"",
      "fence:\"fence\":\"p/l\",\"token\":1",
      "lease:\"change\":\"granted\"",
      "lease:\"change\":\"renewed\"",
      "lease:\"change\":\"released\"",
      "fence:\"fence\":\"p/a\",\"token\":9"};
  for (std::size_t i = 0; i < want.size(); ++i) {
    const std::string type = want[i].substr(0, want[i].find(':'));
    EXPECT_EQ(events[i].type, type) << i << " " << events[i].data;
    EXPECT_NE(events[i].data.find(want[i].substr(type.size() + 1)),
              std::string::npos)
        << i << " " << events[i].data;
    if (i > 0) {
      EXPECT_GT(events[i].id, events[i - 1].id);
    }
  }
  EXPECT_NE(events[3].data.find("\"holder\":\"h1\""), std::string::npos);
  EXPECT_EQ(watcher.raw().find("q/b"), std::string::npos);
  EXPECT_NE(watcher.raw().find("Transfer-Encoding: chunked"),
            std::string::npos);
  EXPECT_NE(watcher.raw().find("text/event-stream"), std::string::npos);
  EXPECT_EQ(testing::MetricValue(Fetch(admin, "GET", "/metrics").body,
                                 "fencepost_watchers"),
            1);
  // Bad queries change nothing and say why.
  EXPECT_EQ(Fetch(admin, "GET", "/v1/watch", {{"Last-Event-ID", "x"}}).status,
            400);
  EXPECT_EQ(Fetch(admin, "POST", "/v1/watch").status, 405);
}

// Issue 36, item 10: a stream has no head of its own; HEAD /v1/watch is a
// 405 like any other method the path does not take, not a stream.
TEST(WatchTest, HeadOfTheStreamIs405WithAllow) {
  TempDir dir;
  ServerProcess server(dir / "data");
  const auto head = Fetch(server.admin_port(), "HEAD", "/v1/watch");
  EXPECT_EQ(head.status, 405);
  EXPECT_EQ(head.header("allow"), "GET");
  EXPECT_EQ(head.header("content-type"), "application/problem+json");
  EXPECT_TRUE(head.has("content-length"));
  EXPECT_FALSE(head.has("transfer-encoding"));
  const auto post = Fetch(server.admin_port(), "POST", "/v1/watch");
  EXPECT_EQ(post.header("allow"), "GET");
  EXPECT_EQ(head.header("content-length"), std::to_string(post.body.size()))
      << "the length of the problem it would send (HEAD and POST: 4 letters)";
}

// Issue 36, item 3: a client that comes back with an id 10,000 short events
// behind (all still held, past the 1 MiB a watcher may have waiting) was
// queued them all and dropped before anything was sent, on every
// reconnection. It gets a reset instead, and what comes after.
TEST(WatchTest, AComebackTooFarBehindForItsQueueGetsAResetNotADrop) {
  TempDir dir;
  ServerProcess server(dir / "data", {"--lmdb-shards", "1"});
  const auto data = server.data_port(), admin = server.admin_port();
  std::uint64_t start = 0;
  {
    Watcher first(admin, "/v1/watch");
    ASSERT_TRUE(Answered(first));
    ASSERT_EQ(Put(data, "start", 1), 201);
    const std::vector<Event> seen = first.Events(1);
    ASSERT_EQ(seen.size(), 1u) << first.raw();
    start = seen[0].id;
  }
  PutMany(data, "b", 10000);
  Watcher back(admin, "/v1/watch", std::to_string(start));
  const std::vector<Event> reset = back.Events(1);
  ASSERT_EQ(reset.size(), 1u)
      << "dropped before anything was sent: " << back.raw();
  EXPECT_EQ(reset[0].type, "reset");
  ASSERT_EQ(Put(data, "after", 1), 201);
  const std::vector<Event> events = back.Events(2);
  ASSERT_EQ(events.size(), 2u) << back.raw();
  EXPECT_NE(events[1].data.find("\"after\""), std::string::npos);
  EXPECT_EQ(testing::MetricValue(Fetch(admin, "GET", "/metrics").body,
                                 "fencepost_watchers_dropped_total"),
            0);
}

// Issue 36, item 25: what a watcher has waiting goes down as it is sent, so
// one that keeps up is never dropped, however much it is sent in all (here
// about 1.5 MB, past the 1 MiB bound).
TEST(WatchTest, AWatcherThatKeepsUpGetsMoreThanAMebibyte) {
  TempDir dir;
  ServerProcess server(dir / "data", {"--lmdb-shards", "1"});
  const auto data = server.data_port(), admin = server.admin_port();
  Watcher watcher(admin, "/v1/watch");
  ASSERT_TRUE(Answered(watcher));
  constexpr int kRounds = 12, kEach = 1000;
  for (int round = 0; round < kRounds; ++round) {
    PutMany(data, "r" + std::to_string(round) + "/", kEach);
    const std::size_t want = static_cast<std::size_t>((round + 1) * kEach);
    ASSERT_EQ(watcher.Events(want).size(), want) << "round " << round;
  }
  EXPECT_GT(watcher.raw().size(), 1u << 20);
  EXPECT_EQ(testing::MetricValue(Fetch(admin, "GET", "/metrics").body,
                                 "fencepost_watchers_dropped_total"),
            0);
}

// Issue 36, item 4: with the default 64 admin connections, 64 idle streams
// held every slot, and health checks, metrics and lease renewals were 503.
// Streams and long polls now leave room for them.
TEST(WatchTest, StreamsLeaveRoomForHealthMetricsAndLeaseCalls) {
  TempDir dir;
  ServerProcess server(dir / "data");
  const auto admin = server.admin_port();
  const std::string lease = R"({"holder":"h1","ttl_ms":60000})";
  ASSERT_EQ(Fetch(admin, "PUT", "/v1/leases/l", {}, lease).status, 200);
  std::vector<std::unique_ptr<Watcher>> watchers;
  for (int i = 0; i < 64; ++i) {
    watchers.push_back(std::make_unique<Watcher>(admin, "/v1/watch"));
    ASSERT_TRUE(Answered(*watchers.back())) << i;
  }
  int streams = 0, refused = 0;
  for (const auto& w : watchers) {
    if (w->raw().rfind("HTTP/1.1 200", 0) == 0) ++streams;
    if (w->raw().rfind("HTTP/1.1 503", 0) == 0 &&
        w->raw().find("Retry-After: 1") != std::string::npos) {
      ++refused;
    }
  }
  EXPECT_EQ(streams, 56) << "an eighth of 64 kept for other calls";
  EXPECT_EQ(refused, 8);
  EXPECT_EQ(Fetch(admin, "GET", "/livez").status, 200);
  EXPECT_EQ(Fetch(admin, "GET", "/readyz").status, 200);
  EXPECT_EQ(Watchers(admin), 56);
  EXPECT_EQ(Fetch(admin, "PUT", "/v1/leases/l", {}, lease).status, 200)
      << "the holder renews";
  EXPECT_EQ(
      Fetch(admin, "GET", "/v1/fences/l?wait_above=0&timeout_ms=0").status, 503)
      << "a long poll counts with the streams";
}

// Issue 36, item 4: a client that closes its stream or long poll frees its
// slot at once, not at the server's next write (15 s for a stream, the
// whole timeout_ms for a long poll).
TEST(WatchTest, WatchersThatLeaveFreeTheirSlotsAtOnce) {
  TempDir dir;
  ServerProcess server(dir / "data");
  const auto data = server.data_port(), admin = server.admin_port();
  ASSERT_EQ(Put(data, "k", 5), 201);
  {
    std::vector<std::unique_ptr<Watcher>> watchers;
    for (int i = 0; i < 28; ++i) {
      watchers.push_back(std::make_unique<Watcher>(admin, "/v1/watch"));
      watchers.push_back(std::make_unique<Watcher>(
          admin, "/v1/fences/k?wait_above=5&timeout_ms=300000"));
    }
    ASSERT_TRUE(Within(10, [admin] { return Watchers(admin) == 56; }));
  }  // every client closes
  // Well before a keep-alive (15 s) or a long poll's timeout (300 s).
  EXPECT_TRUE(Within(10, [admin] { return Watchers(admin) == 0; }))
      << Watchers(admin);
  std::vector<std::unique_ptr<Watcher>> again;
  for (int i = 0; i < 56; ++i) {
    again.push_back(std::make_unique<Watcher>(admin, "/v1/watch"));
    ASSERT_TRUE(Answered(*again.back()));
    ASSERT_EQ(again.back()->raw().rfind("HTTP/1.1 200", 0), 0u)
        << i << " " << again.back()->raw();
  }
}

TEST(WatchTest, AWatcherComesBackWithLastEventIdOrAfterARestartToAReset) {
  TempDir dir;
  auto server = std::make_unique<ServerProcess>(dir / "data");
  for (int i = 1; i <= 3; ++i)
    ASSERT_EQ(Put(server->data_port(), "k" + std::to_string(i), 1), 201);
  std::vector<Event> seen;
  {
    Watcher first(server->admin_port(), "/v1/watch", "1");  // an old id
    seen = first.Events(1);
    ASSERT_EQ(seen.size(), 1u);
    EXPECT_EQ(seen[0].type, "reset");
  }
  ASSERT_EQ(Put(server->data_port(), "k4", 1), 201);
  ASSERT_EQ(Put(server->data_port(), "k5", 1), 201);
  // Back from the reset's id: exactly what came after it.
  Watcher back(server->admin_port(), "/v1/watch", std::to_string(seen[0].id));
  const std::vector<Event> missed = back.Events(2);
  ASSERT_EQ(missed.size(), 2u) << back.raw();
  EXPECT_NE(missed[0].data.find("\"k4\""), std::string::npos);
  EXPECT_NE(missed[1].data.find("\"k5\""), std::string::npos);
  const std::string last = std::to_string(missed[1].id);
  // The server stops: the stream ends cleanly, and the process exits.
  server->Signal(SIGTERM);
  EXPECT_TRUE(back.Ended());
  EXPECT_NE(back.raw().find("\r\n0\r\n\r\n"), std::string::npos);
  EXPECT_EQ(server->Wait(), 0);
  // After the restart the old id is a reset: its followers are gone.
  server = std::make_unique<ServerProcess>(dir / "data");
  Watcher again(server->admin_port(), "/v1/watch", last);
  ASSERT_EQ(Put(server->data_port(), "k6", 1), 201);
  const std::vector<Event> after = again.Events(2);
  ASSERT_EQ(after.size(), 2u) << again.raw();
  EXPECT_EQ(after[0].type, "reset");
  EXPECT_GT(after[1].id, missed[1].id) << "ids go on rising across a restart";
  EXPECT_NE(after[1].data.find("\"k6\""), std::string::npos);
}

// A watcher that never reads (a 4 KiB receive buffer, nothing read) while
// megabytes of events are published: it is dropped, every write is
// answered, and the server closes its connection. How much the kernel's
// buffers take first differs from machine to machine, so the writers go on
// until the drop is counted (at most 2 x 20,000 writes, ~40 MB of events).
TEST(WatchTest, AWatcherThatNeverReadsIsDroppedWhileWritesGoOn) {
  TempDir dir;
  ServerProcess server(dir / "data");
  const auto data = server.data_port(), admin = server.admin_port();
  Watcher stalled(admin, "/v1/watch", "", 4096);
  {
    Watcher opened(admin, "/v1/watch?prefix=none");
    ASSERT_TRUE(opened.Opened()) << opened.raw();
  }
  const std::string pad(900, 'x');
  std::vector<std::thread> writers;
  std::atomic<int> refused = 0, written = 0;
  std::atomic<bool> dropped = false;
  constexpr int kThreads = 2, kMaxWrites = 20000;
  for (int t = 0; t < kThreads; ++t) {
    writers.emplace_back([&, t] {
      testing::HttpClient client(data);
      for (int i = 0; i < kMaxWrites && !dropped; ++i) {
        const std::string key =
            pad + "/" + std::to_string(t) + "/" + std::to_string(i);
        if (client.Request("PUT", "/" + key, {{"Fencing-Token", "1"}}, "v")
                .status != 201) {
          ++refused;
        }
        ++written;
      }
    });
  }
  std::thread watch_metrics([&] {
    testing::HttpClient client(admin);
    while (!dropped && written < kThreads * kMaxWrites) {
      const std::string metrics = client.Request("GET", "/metrics").body;
      if (testing::MetricValue(metrics, "fencepost_watchers_dropped_total") >
          0) {
        dropped = true;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
  });
  for (auto& w : writers) w.join();
  dropped = true;
  watch_metrics.join();
  EXPECT_EQ(refused, 0);
  const std::string metrics = Fetch(admin, "GET", "/metrics").body;
  EXPECT_EQ(testing::MetricValue(metrics, "fencepost_watchers_dropped_total"),
            1);
  EXPECT_GE(testing::MetricValue(metrics, "fencepost_watch_events_total"),
            written.load());
  EXPECT_TRUE(stalled.Ended()) << "the server closed the dropped stream";
}

TEST(WatchTest, ALongPollIsAnsweredByAnotherClientsBump) {
  TempDir dir;
  ServerProcess server(dir / "data");
  const auto admin = server.admin_port();
  ASSERT_EQ(Put(server.data_port(), "orders/1", 41), 201);
  std::thread bump([admin] {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    Fetch(admin, "PUT", "/v1/fences/orders/1", {{"Fencing-Token", "42"}});
  });
  const auto polled =
      Fetch(admin, "GET", "/v1/fences/orders/1?wait_above=41&timeout_ms=60000");
  bump.join();
  EXPECT_EQ(polled.status, 200);
  EXPECT_NE(polled.body.find("\"token\":42"), std::string::npos);
  EXPECT_FALSE(polled.has("fencepost-watch"));
  const auto timed_out =
      Fetch(admin, "GET", "/v1/fences/orders/1?wait_above=42&timeout_ms=100");
  EXPECT_EQ(timed_out.status, 200);
  EXPECT_EQ(timed_out.header("fencepost-watch"), "timeout");
}

}  // namespace
}  // namespace fencepost
