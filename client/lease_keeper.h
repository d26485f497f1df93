#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include "client/client.h"
#include "client/stop_signal.h"

namespace fencepost::client {

// Keeps one held lease alive: renews it on its own thread (PUT
// /v1/leases/{name} by the same holder) and fires lost() the moment the
// lease can no longer be trusted to be held:
//  - at once when a renewal is refused (409, or any 4xx but 408 and 429)
//    or answered with another holder or another token;
//  - when no renewal succeeded before `S + ttl - safety_margin`, where S is
//    when the last successful acquire or renewal was sent, on this
//    process's steady clock. The server measures expiry from when it
//    handled that request, which is later than S, so the lease is still
//    live on the server at that instant unless the two clocks' rates
//    differ by more than the margin.
// A renewal that fails without an answer (unreachable, timeout, 5xx, 408,
// 429) is retried until that instant; no request's deadline runs past it.
//
// Thread safety: all members may be called from any thread. The callback
// runs on the keeper's own thread.
class LeaseKeeper {
 public:
  struct Options {
    Client::Options client;  // the admin port
    std::string name;
    std::string holder;
    std::chrono::milliseconds ttl{10000};
    std::chrono::milliseconds renew_period{0};   // 0: ttl / 3
    std::chrono::milliseconds safety_margin{0};  // 0: max(ttl / 10, 50 ms)
  };
  // Called once, on the keeper's thread, right after lost() fired.
  using LostCallback = std::function<void(const std::string& reason)>;

  // Starts renewing the lease granted with `token` by a request sent at
  // `sent_at` (taken just before sending, never after). Throws
  // std::invalid_argument for a bad URL, a non-positive ttl or a margin not
  // below it, and what Client's constructor throws.
  LeaseKeeper(Options options, std::uint64_t token,
              std::chrono::steady_clock::time_point sent_at,
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
  // the lease (DELETE with the token). nullopt when nothing was sent; else
  // the release's result (204 released, 409 no longer held).
  std::optional<Result> Release();

 private:
  void Loop();
  // One renewal; returns the reason the lease is lost, or "".
  std::string Renew(std::chrono::steady_clock::time_point deadline);
  void Lose(std::unique_lock<std::mutex>& lock, std::string reason);

  const Options options_;
  const std::uint64_t token_;
  const std::chrono::milliseconds base_timeout_;
  const std::chrono::milliseconds retry_interval_;
  Client client_;  // only the keeper's thread uses it until Stop()
  LostCallback on_lost_;
  StopSignal lost_;

  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool stop_requested_ = false;
  bool released_ = false;
  std::string reason_;
  std::chrono::steady_clock::time_point last_sent_;
  std::chrono::steady_clock::time_point next_attempt_;
  std::mutex join_mu_;
  std::thread thread_;  // last: started once everything above is set
};

}  // namespace fencepost::client
