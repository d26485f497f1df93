// EtcdWatch against a fake of etcd's watch stream (FakeEtcdWatch) on
// 127.0.0.1: a stream that breaks is opened again from the revision after
// the last one told, so each change is told once; one whose history was
// compacted meanwhile resets the watchers (WatchHub), and a watcher coming
// back from before the compaction is told the reset, not a replay that
// skips what the compaction took. The real-etcd suite (ReplicaWatchTest)
// covers etcd itself.

#include "storage/etcd_watch.h"

#include <gtest/gtest.h>

#include <chrono>
#include <functional>
#include <string>
#include <vector>

#include "storage/etcd_records.h"
#include "storage/watch_hub.h"
#include "tests/storage/fake_etcd_watch.h"

namespace fencepost::storage {
namespace {

namespace asio = boost::asio;
using testing::FakeEtcdWatch;

// Runs `io` until `done` holds or 10 s pass; whether it held.
bool RunUntil(asio::io_context& io, const std::function<bool()>& done) {
  const auto until =
      std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (!done() && std::chrono::steady_clock::now() < until) {
    if (io.stopped()) io.restart();
    io.run_for(std::chrono::milliseconds(10));
  }
  return done();
}

class EtcdWatchTest : public ::testing::Test {
 protected:
  EtcdWatchTest() {
    spec_.endpoints = {{"127.0.0.1", etcd_.port()}};
    spec_.prefix = "fp";
    EtcdWatch::Handlers handlers;
    handlers.fence = [this](const fence::FenceRecord& fence) {
      told_.push_back(fence.name + "@" + std::to_string(fence.token));
      hub_.Publish("fence", fence.name, "{}");
    };
    handlers.reset = [this] {
      told_.push_back("reset");
      hub_.Reset();
    };
    watch_ = std::make_unique<EtcdWatch>(io_, spec_, nullptr, handlers);
  }
  ~EtcdWatchTest() override {
    watch_->Stop();
    // The stream closes (the fake sees it) before the io_context goes.
    RunUntil(io_, [this] { return etcd_.open_streams() == 0; });
  }
  // A fence raised by some replica: fp/fences/NAME at `token`.
  void Raise(const std::string& name, fence::Token token) {
    etcd_.Put("fp/fences/" + name, etcd::FormatFence(token, 1000 + token));
  }
  // Starts the watch and waits until its stream is open.
  void Start() {
    watch_->Start();
    ASSERT_TRUE(RunUntil(io_, [this] { return etcd_.open_streams() == 1; }));
  }
  // Waits until `n` changes have been told.
  bool Told(std::size_t n) {
    return RunUntil(io_, [this, n] { return told_.size() >= n; });
  }

  asio::io_context io_;
  FakeEtcdWatch etcd_{io_};
  EtcdSpec spec_;
  WatchHub hub_{WatchHub::Options{100, 1u << 20, 100}};
  std::vector<std::string> told_;
  std::unique_ptr<EtcdWatch> watch_;
};

// Issue 36, item 20: the stream is opened again at the revision after the
// last one seen. At that revision itself, its change is told twice; two
// after it, the change at the next one is lost.
TEST_F(EtcdWatchTest, AStreamThatBreaksGoesOnWithEachChangeToldOnce) {
  Start();
  Raise("a", 1);
  Raise("b", 1);
  ASSERT_TRUE(Told(2));
  const std::int64_t last_seen = etcd_.revision();
  etcd_.Break();
  // Changes while no stream is open: told from the history on reopening.
  Raise("c", 1);
  Raise("d", 1);
  ASSERT_TRUE(Told(4));
  ASSERT_TRUE(RunUntil(io_, [this] { return etcd_.open_streams() == 1; }));
  ASSERT_EQ(etcd_.starts().size(), 2u);
  EXPECT_EQ(etcd_.starts()[1], last_seen + 1);
  // And once more, with nothing missed in between; then a last change, so
  // anything told twice would have come before it.
  etcd_.Break();
  ASSERT_TRUE(RunUntil(io_, [this] { return etcd_.open_streams() == 1; }));
  Raise("e", 1);
  ASSERT_TRUE(Told(5));
  etcd_.Break();
  ASSERT_TRUE(RunUntil(io_, [this] { return etcd_.open_streams() == 1; }));
  Raise("f", 1);
  ASSERT_TRUE(RunUntil(io_, [this] { return told_.back() == "f@1"; }));
  EXPECT_EQ(told_, (std::vector<std::string>{"a@1", "b@1", "c@1", "d@1", "e@1",
                                             "f@1"}));
}

// Issue 36, item 6: while the stream was broken, etcd compacted away the
// changes the watch had not seen. The watchers are reset, and a watcher that
// comes back with the id of an event from before the compaction gets a
// reset first, not a replay without one (which would hide the changes
// the compaction took).
TEST_F(EtcdWatchTest,
       ACompactionWhileBrokenResetsWatchersComingBackFromBefore) {
  Start();
  Raise("a", 1);
  Raise("b", 1);
  ASSERT_TRUE(Told(2));
  const std::uint64_t first_id = hub_.last_id() - 1, last_id = hub_.last_id();
  auto live = hub_.Subscribe("", last_id);
  etcd_.Break();
  Raise("a", 2);  // never seen by the watch: compacted before it reconnects
  etcd_.Compact(etcd_.revision());
  ASSERT_TRUE(Told(3));
  EXPECT_EQ(told_[2], "reset");
  ASSERT_EQ(live->pending.size(), 1u);
  EXPECT_EQ(live->pending[0]->type, "reset");
  EXPECT_GT(live->pending[0]->id, last_id);
  // The watch goes on from now.
  ASSERT_TRUE(RunUntil(io_, [this] { return etcd_.open_streams() == 1; }));
  EXPECT_EQ(etcd_.starts().back(), 0);
  Raise("c", 1);
  ASSERT_TRUE(Told(4));
  EXPECT_EQ(told_[3], "c@1");
  for (std::uint64_t before : {first_id, last_id}) {
    auto back = hub_.Subscribe("", before);
    ASSERT_FALSE(back->pending.empty()) << before;
    EXPECT_EQ(back->pending[0]->type, "reset") << before;
    EXPECT_EQ(back->pending.size(), 1u) << before;
  }
}

}  // namespace
}  // namespace fencepost::storage
