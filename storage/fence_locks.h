#pragma once

// clang-format off
// Boost 1.74's awaitable.hpp uses std::exchange without including <utility>.
#include <utility>
// clang-format on

#include <boost/asio/steady_timer.hpp>
#include <deque>
#include <string>
#include <unordered_map>

#include "http/coro.h"

namespace fencepost::storage {

// Serializes the writes of one fence for backends that store values outside
// LMDB: a fence's writes take turns, in arrival order, from the fence commit
// until their value is written, so no lower-token value can land after a
// higher one was acknowledged.
//
// Thread safety: every call on one io thread (the server's), which is also
// the executor the waiting coroutines resume on.
class FenceLocks {
 public:
  class Guard {
   public:
    Guard(FenceLocks* locks, std::string fence)
        : locks_(locks), fence_(std::move(fence)) {}
    Guard(Guard&& other) noexcept
        : locks_(std::exchange(other.locks_, nullptr)),
          fence_(std::move(other.fence_)) {}
    Guard& operator=(Guard&&) = delete;
    ~Guard() {
      if (locks_ != nullptr) locks_->Release(fence_);
    }

   private:
    FenceLocks* locks_;
    std::string fence_;
  };

  // Waits for the fence's turn; the turn lasts as long as the Guard, which
  // must not outlive this FenceLocks. Never fails. A waiting coroutine must
  // not be destroyed before its turn comes: its timer stays queued.
  Awaitable<Guard> Acquire(const std::string& fence);

 private:
  void Release(const std::string& fence);

  // A held fence and the timers of those waiting for it, oldest first; a
  // waiter's turn comes when its timer is cancelled.
  std::unordered_map<std::string, std::deque<boost::asio::steady_timer*>>
      waiters_;
};

}  // namespace fencepost::storage
