#include "client/stop_signal.h"

namespace fencepost::client {

bool StopSignal::wait_until(
    std::chrono::steady_clock::time_point deadline) const {
  std::unique_lock lock(mu_);
  return cv_.wait_until(lock, deadline, [&] { return stopped(); });
}

void StopSignal::wait() const {
  std::unique_lock lock(mu_);
  cv_.wait(lock, [&] { return stopped(); });
}

void StopSignal::Fire() {
  // Both under the lock: a waiter between its check and its sleep cannot
  // miss the wake-up, and a waiter that wakes and destroys the signal
  // cannot do so while notify_all still runs.
  std::lock_guard lock(mu_);
  stopped_.store(true, std::memory_order_release);
  cv_.notify_all();
}

}  // namespace fencepost::client
