// LeaseKeeper's watch of its lease's fence, against a backend the test
// plays: the watch must keep asking after a wait that timed out, for as
// long as the lease is held, or a holder fenced out later in its term would
// run on until its next renewal.

#include "client/lease_keeper.h"

#include <gtest/gtest.h>

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>

#include "client/lease_backend.h"

namespace fencepost::client {
namespace {

using std::chrono::milliseconds;

// What the backend's fence watches share with the test: how many waits
// began and ended, and whether the fence went above the token.
struct FenceState {
  std::mutex mu;
  std::condition_variable cv;
  int waits_begun = 0;
  int timed_out = 0;
  bool above = false;
  bool closed = false;  // the test is over: every wait returns at once

  // Waits (at most 10 s) until `ready()` holds.
  template <class Ready>
  bool Await(Ready ready) {
    std::unique_lock lock(mu);
    return cv.wait_for(lock, std::chrono::seconds(10), ready);
  }
};

// The first wait times out at once, as a long poll does when nothing
// happened within its timeout; every later one waits until the fence goes
// above the token.
class ScriptedWatch : public FenceWatch {
 public:
  explicit ScriptedWatch(std::shared_ptr<FenceState> state)
      : state_(std::move(state)) {}
  Outcome Wait(milliseconds, std::string* detail) override {
    std::unique_lock lock(state_->mu);
    const bool first = state_->waits_begun++ == 0;
    state_->cv.notify_all();
    if (first) {
      ++state_->timed_out;
      state_->cv.notify_all();
      return Outcome::kTimedOut;
    }
    state_->cv.wait(lock, [&] { return state_->above || state_->closed; });
    if (!state_->above) return Outcome::kTimedOut;
    *detail = "the fence went above the token";
    return Outcome::kAbove;
  }

 private:
  std::shared_ptr<FenceState> state_;
};

// Holds the lease as token 7 and renews it; has a fence watch.
class WatchedBackend : public LeaseBackend {
 public:
  explicit WatchedBackend(std::shared_ptr<FenceState> state)
      : state_(std::move(state)) {}
  const LeaseSpec& spec() const override { return spec_; }
  std::string Describe() const override { return "a scripted backend"; }
  LeaseAttempt Acquire(milliseconds) override { return Held(); }
  LeaseAttempt Renew(std::uint64_t, milliseconds) override { return Held(); }
  std::string Release(std::uint64_t, milliseconds) override { return ""; }
  std::unique_ptr<FenceWatch> WatchFence(std::uint64_t) const override {
    return std::make_unique<ScriptedWatch>(state_);
  }

 private:
  LeaseAttempt Held() const {
    LeaseAttempt held;
    held.outcome = LeaseAttempt::Outcome::kHeld;
    held.token = 7;
    held.sent_at = std::chrono::steady_clock::now();
    held.ttl = spec_.ttl;
    return held;
  }

  // A minute's TTL: no renewal and no expiry within the test, so only the
  // watch can tell the keeper it lost the lease.
  LeaseSpec spec_{"leader", "me", milliseconds(60000)};
  std::shared_ptr<FenceState> state_;
};

TEST(LeaseKeeperTest, AFenceRaisedAfterAPollTimedOutStillStopsTheHolder) {
  auto state = std::make_shared<FenceState>();
  WatchedBackend backend(state);
  const LeaseAttempt grant = backend.Acquire(milliseconds(1000));
  LeaseKeeper keeper(backend, grant, {});
  ASSERT_TRUE(state->Await([&] { return state->timed_out == 1; }))
      << "the keeper never watched its fence";
  // The keeper must ask again after the wait that timed out.
  EXPECT_TRUE(state->Await([&] { return state->waits_begun >= 2; }))
      << "the keeper stopped watching its fence after a wait timed out";
  {
    std::lock_guard lock(state->mu);
    state->above = true;  // another holder was granted the lease
    state->cv.notify_all();
  }
  EXPECT_TRUE(keeper.lost().wait_for(std::chrono::seconds(10)))
      << "a fence raised after the first poll timed out did not stop the "
         "holder";
  EXPECT_EQ(keeper.reason(), "the fence went above the token");
  {
    std::lock_guard lock(state->mu);
    state->closed = true;
    state->cv.notify_all();
  }
  keeper.Stop();
}

}  // namespace
}  // namespace fencepost::client
