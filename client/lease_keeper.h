#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include "client/lease_backend.h"
#include "client/stop_signal.h"

namespace fencepost::client {

// Keeps one held lease alive: renews it through its LeaseBackend on its own
// thread every renew_period and fires lost() the moment the lease can no
// longer be trusted to be held:
//  - at once when the backend says it is lost (a renewal refused, answered
//    with another holder or token, a session expired);
//  - when no renewal succeeded before `S + ttl - safety_margin`, where S is
//    when the last successful acquire or renewal was sent, on this
//    process's steady clock, and ttl the lesser of the spec's and the
//    granted one. The system measures expiry from when it handled that
//    request, which is later than S, so the lease is still held there at
//    that instant unless the two clocks' rates differ by more than the
//    margin.
// A renewal that gets no answer is retried until that instant; no
// request's deadline runs past it.
//  - at once, too, when the backend has a watch of the lease's fence
//    (LeaseBackend::WatchFence: fencepost's own leases) and the fence goes
//    above the token: another holder was granted the lease or the fence was
//    bumped. The watch runs on a thread of its own, which Stop() does not
//    wait for (it may be in a long poll): from then on it touches nothing
//    of the keeper, and it ends after its current wait. The renewals stay
//    the backstop while the watch gets no answer.
//
// Thread safety: all members may be called from any thread. The callback
// runs on the keeper's own thread. The backend must outlive the keeper and
// is not used by anyone else until Stop() returned.
class LeaseKeeper {
 public:
  struct Options {
    std::chrono::milliseconds renew_period{0};   // 0: ttl / 3
    std::chrono::milliseconds safety_margin{0};  // 0: max(ttl / 10, 50 ms)
    std::chrono::milliseconds timeout{10000};    // the longest request
  };
  // Called once, on the keeper's thread, right after lost() fired.
  using LostCallback = std::function<void(const std::string& reason)>;

  // Starts renewing the lease `grant` (a kHeld answer of backend.Acquire).
  // Throws std::invalid_argument for a grant that is not kHeld or a margin
  // not below the TTL.
  LeaseKeeper(LeaseBackend& backend, const LeaseAttempt& grant, Options options,
              LostCallback on_lost = {});
  // Stop(): never releases.
  ~LeaseKeeper();
  LeaseKeeper(const LeaseKeeper&) = delete;
  LeaseKeeper& operator=(const LeaseKeeper&) = delete;

  std::uint64_t token() const { return token_; }
  const StopSignal& lost() const { return lost_; }
  // Why the lease was lost; "" until lost() fires.
  std::string reason() const;
  // Until when the lease is held for sure, if lost() has not fired: the
  // last successful request's send time + ttl - safety_margin.
  std::chrono::steady_clock::time_point held_until() const;

  // Stops renewing and waits for the keeper's thread (called from the
  // callback, it only asks it to stop). Idempotent. After it lost() no
  // longer fires.
  void Stop();
  // Stop(), then, unless lost() fired or it was released before, releases
  // the lease. nullopt when nothing was sent; else "" when released, or why
  // not.
  std::optional<std::string> Release();

 private:
  void Loop();
  // Starts the fence watch's thread, if the backend has one.
  void StartWatch();
  // One renewal; returns the reason the lease is lost, or "".
  std::string Renew(std::chrono::steady_clock::time_point deadline);
  void Lose(std::unique_lock<std::mutex>& lock, std::string reason);

  LeaseBackend& backend_;
  const std::uint64_t token_;
  const std::chrono::milliseconds ttl_;
  const Options options_;
  const std::chrono::milliseconds retry_interval_;
  LostCallback on_lost_;
  StopSignal lost_;

  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool stop_requested_ = false;
  bool released_ = false;
  std::string reason_;
  std::string fenced_;  // why the watch saw the lease lost; "" until then
  std::chrono::steady_clock::time_point last_sent_;
  std::chrono::steady_clock::time_point next_attempt_;
  struct WatchLink;  // what the watch's thread shares with the keeper
  std::shared_ptr<WatchLink> watch_;
  std::mutex join_mu_;
  std::thread thread_;  // last: started once everything above is set
};

}  // namespace fencepost::client
