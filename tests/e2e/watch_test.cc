// Watches through the real binary over 127.0.0.1: the event stream's
// contents and prefix, coming back with Last-Event-ID (and a reset after a
// restart), a watcher that never reads dropped while writes go on, the long
// poll answered by another client's bump, and streams ended cleanly when
// the server stops.

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

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

TEST(WatchTest, TheStreamCarriesFencesLeasesAndRejectionsUnderItsPrefix) {
  TempDir dir;
  ServerProcess server(dir / "data");
  const auto data = server.data_port(), admin = server.admin_port();
  Watcher watcher(admin, "/v1/watch?prefix=p/");
  // The stream is open once its head has come.
  watcher.Events(0);
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
// answered, and the server closes its connection.
TEST(WatchTest, AWatcherThatNeverReadsIsDroppedWhileWritesGoOn) {
  TempDir dir;
  ServerProcess server(dir / "data");
  const auto data = server.data_port(), admin = server.admin_port();
  Watcher stalled(admin, "/v1/watch", "", 4096);
  {
    Watcher opened(admin, "/v1/watch?prefix=none");
    opened.Events(0);
  }
  const std::string pad(900, 'x');
  std::vector<std::thread> writers;
  std::atomic<int> refused = 0;
  constexpr int kThreads = 2, kWrites = 3000;  // ~7 MB of fence events
  for (int t = 0; t < kThreads; ++t) {
    writers.emplace_back([&, t] {
      testing::HttpClient client(data);
      for (int i = 0; i < kWrites; ++i) {
        const std::string key =
            pad + "/" + std::to_string(t) + "/" + std::to_string(i);
        if (client.Request("PUT", "/" + key, {{"Fencing-Token", "1"}}, "v")
                .status != 201) {
          ++refused;
        }
      }
    });
  }
  for (auto& w : writers) w.join();
  EXPECT_EQ(refused, 0);
  const std::string metrics = Fetch(admin, "GET", "/metrics").body;
  EXPECT_EQ(testing::MetricValue(metrics, "fencepost_watchers_dropped_total"),
            1);
  EXPECT_GE(testing::MetricValue(metrics, "fencepost_watch_events_total"),
            kThreads * kWrites);
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
