#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>

namespace fencepost::client {

// A one-shot signal telling work to stop. It fires once and stays fired;
// waiting on it sleeps on a condition variable.
//
// Thread safety: every member may be called from any thread (not from an
// asynchronous signal handler).
class StopSignal {
 public:
  StopSignal() = default;
  StopSignal(const StopSignal&) = delete;
  StopSignal& operator=(const StopSignal&) = delete;

  bool stopped() const { return stopped_.load(std::memory_order_acquire); }

  // Waits until the signal fires or `timeout` passes; returns stopped().
  template <class Rep, class Period>
  bool wait_for(std::chrono::duration<Rep, Period> timeout) const {
    if (timeout <= timeout.zero()) return stopped();
    if (timeout >= std::chrono::hours(24 * 365 * 100)) {
      wait();
      return true;
    }
    return wait_until(
        std::chrono::steady_clock::now() +
        std::chrono::ceil<std::chrono::steady_clock::duration>(timeout));
  }
  // Waits until the signal fires or `deadline` passes; returns stopped().
  bool wait_until(std::chrono::steady_clock::time_point deadline) const;
  // Waits until the signal fires.
  void wait() const;

  // Fires the signal and wakes every waiter; later calls do nothing.
  void Fire();

 private:
  mutable std::mutex mu_;
  mutable std::condition_variable cv_;
  std::atomic<bool> stopped_{false};
};

}  // namespace fencepost::client
