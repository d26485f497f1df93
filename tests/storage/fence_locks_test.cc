// FenceLocks: one fence's writes take turns in arrival order; other fences
// are not held up; a turn lasts exactly as long as its Guard.

// clang-format off
// Boost 1.74's awaitable.hpp uses std::exchange without including <utility>.
#include <utility>
// clang-format on

#include "storage/fence_locks.h"

#include <gtest/gtest.h>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <map>
#include <string>
#include <vector>

namespace fencepost::storage {
namespace {

namespace asio = boost::asio;
using Log = std::vector<std::string>;

// Takes `fence`'s turn, logs "NAME in", holds the turn until `gate` opens,
// logs "NAME out" and releases.
Awaitable<void> Hold(FenceLocks& locks, std::string fence, std::string name,
                     asio::steady_timer& gate, Log& log) {
  FenceLocks::Guard guard = co_await locks.Acquire(fence);
  log.push_back(name + " in");
  boost::system::error_code ec;
  co_await gate.async_wait(asio::redirect_error(kUseAwaitable, ec));
  log.push_back(name + " out");
}

class FenceLocksTest : public ::testing::Test {
 protected:
  // Starts a holder named `name` of `fence` and runs what is ready.
  void Start(const std::string& fence, const std::string& name) {
    auto [it, added] =
        gates_.try_emplace(name, io_, asio::steady_timer::time_point::max());
    asio::co_spawn(io_, Hold(locks_, fence, name, it->second, log_),
                   asio::detached);
    io_.restart();  // poll() stops the context once it runs out of work
    io_.poll();
  }
  // Lets `name` release its turn once it has it (at once if it holds it).
  void Open(const std::string& name) {
    gates_.at(name).expires_at(asio::steady_timer::time_point::min());
    io_.restart();  // poll() stops the context once it runs out of work
    io_.poll();
  }

  asio::io_context io_;
  FenceLocks locks_;
  std::map<std::string, asio::steady_timer> gates_;
  Log log_;
};

TEST_F(FenceLocksTest, OneFenceTakesTurnsInArrivalOrder) {
  Start("k", "A");
  Start("k", "B");
  Start("k", "C");
  EXPECT_EQ(log_, (Log{"A in"})) << "B and C wait for A";
  Open("C");
  EXPECT_EQ(log_, (Log{"A in"})) << "C, ready to finish, still waits its turn";
  Open("A");
  EXPECT_EQ(log_, (Log{"A in", "A out", "B in"}))
      << "the turn goes to the oldest waiter, B, not to C";
  Open("B");
  EXPECT_EQ(log_, (Log{"A in", "A out", "B in", "B out", "C in", "C out"}));
}

TEST_F(FenceLocksTest, OtherFencesAreNotHeldUp) {
  Start("k", "A");
  Start("other", "D");
  Start("k", "B");
  EXPECT_EQ(log_, (Log{"A in", "D in"}));
  Open("D");
  EXPECT_EQ(log_, (Log{"A in", "D in", "D out"})) << "D's release frees no k";
  Open("A");
  Open("B");
  EXPECT_EQ(log_.back(), "B out");
}

TEST_F(FenceLocksTest, AReleasedFenceIsFreeAtOnce) {
  Start("k", "A");
  Open("A");
  ASSERT_EQ(log_, (Log{"A in", "A out"}));
  Start("k", "B");
  EXPECT_EQ(log_, (Log{"A in", "A out", "B in"}))
      << "no turn is left behind by the last holder";
  Open("B");
  Start("k", "C");
  EXPECT_EQ(log_.back(), "C in");
  Open("C");
}

}  // namespace
}  // namespace fencepost::storage
