#include "client/lease_keeper.h"

#include <algorithm>
#include <memory>
#include <stdexcept>
#include <thread>

namespace fencepost::client {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

// The lesser of the asked and the granted TTL: a system that granted less
// expires the lease sooner.
milliseconds HeldFor(const LeaseBackend& backend, const LeaseAttempt& grant) {
  if (grant.outcome != LeaseAttempt::Outcome::kHeld) {
    throw std::invalid_argument("a lease keeper needs a held lease");
  }
  const milliseconds asked = backend.spec().ttl;
  return grant.ttl > milliseconds(0) ? std::min(asked, grant.ttl) : asked;
}

LeaseKeeper::Options Normalize(LeaseKeeper::Options options, milliseconds ttl) {
  if (ttl <= milliseconds(0)) {
    throw std::invalid_argument("the lease TTL must be positive");
  }
  if (options.renew_period <= milliseconds(0)) {
    options.renew_period = std::max(ttl / 3, milliseconds(1));
  }
  if (options.safety_margin <= milliseconds(0)) {
    options.safety_margin = std::max(ttl / 10, milliseconds(50));
  }
  if (options.safety_margin >= ttl) {
    throw std::invalid_argument("the safety margin must be below the TTL");
  }
  if (options.timeout <= milliseconds(0)) options.timeout = milliseconds(10000);
  return options;
}

}  // namespace

// The keeper and its watch's thread: the thread tells the keeper through
// `keeper` while it is set; Stop() clears it under `mu`.
struct LeaseKeeper::WatchLink {
  std::mutex mu;
  std::condition_variable cv;
  LeaseKeeper* keeper = nullptr;
};

LeaseKeeper::LeaseKeeper(LeaseBackend& backend, const LeaseAttempt& grant,
                         Options options, LostCallback on_lost)
    : backend_(backend),
      token_(grant.token),
      ttl_(HeldFor(backend, grant)),
      options_(Normalize(options, ttl_)),
      retry_interval_(std::max(options_.renew_period / 4, milliseconds(10))),
      on_lost_(std::move(on_lost)),
      last_sent_(grant.sent_at),
      next_attempt_(grant.sent_at + options_.renew_period),
      watch_(std::make_shared<WatchLink>()),
      thread_([this] { Loop(); }) {
  StartWatch();
}

void LeaseKeeper::StartWatch() {
  std::unique_ptr<FenceWatch> watch = backend_.WatchFence(token_);
  if (!watch) return;
  {
    std::lock_guard lock(watch_->mu);
    watch_->keeper = this;
  }
  std::thread([link = watch_, watch = std::move(watch)] {
    constexpr milliseconds kWait{10000}, kAfterFailure{1000};
    std::unique_lock lock(link->mu);
    while (link->keeper != nullptr) {
      lock.unlock();
      std::string detail;
      const FenceWatch::Outcome outcome = watch->Wait(kWait, &detail);
      lock.lock();
      if (link->keeper == nullptr) break;
      if (outcome == FenceWatch::Outcome::kAbove) {
        LeaseKeeper& keeper = *link->keeper;
        std::lock_guard keeper_lock(keeper.mu_);
        keeper.fenced_ = detail;
        keeper.cv_.notify_all();
        break;
      }
      if (outcome == FenceWatch::Outcome::kFailed) {
        link->cv.wait_for(lock, kAfterFailure,
                          [&] { return link->keeper == nullptr; });
      }
    }
  }).detach();
}

LeaseKeeper::~LeaseKeeper() { Stop(); }

std::string LeaseKeeper::reason() const {
  std::lock_guard lock(mu_);
  return reason_;
}

Clock::time_point LeaseKeeper::held_until() const {
  std::lock_guard lock(mu_);
  return last_sent_ + ttl_ - options_.safety_margin;
}

void LeaseKeeper::Stop() {
  {
    std::lock_guard lock(watch_->mu);
    watch_->keeper = nullptr;
    watch_->cv.notify_all();
  }
  {
    std::lock_guard lock(mu_);
    stop_requested_ = true;
    cv_.notify_all();
  }
  std::lock_guard lock(join_mu_);
  // From the callback (the keeper's own thread) it only asks to stop.
  if (thread_.joinable() && thread_.get_id() != std::this_thread::get_id()) {
    thread_.join();
  }
}

std::optional<std::string> LeaseKeeper::Release() {
  Stop();
  {
    std::lock_guard lock(mu_);
    if (lost_.stopped() || released_) return std::nullopt;
    released_ = true;
  }
  return backend_.Release(token_, options_.timeout);
}

void LeaseKeeper::Lose(std::unique_lock<std::mutex>& lock, std::string reason) {
  if (lost_.stopped()) return;
  reason_ = std::move(reason);
  const std::string copy = reason_;
  lost_.Fire();
  const bool call = !stop_requested_ && on_lost_;
  lock.unlock();
  if (call) on_lost_(copy);
  lock.lock();
}

void LeaseKeeper::Loop() {
  std::unique_lock lock(mu_);
  while (!stop_requested_) {
    if (!fenced_.empty()) {
      Lose(lock, fenced_);
      return;
    }
    const Clock::time_point deadline =
        last_sent_ + ttl_ - options_.safety_margin;
    const Clock::time_point now = Clock::now();
    if (now >= deadline) {
      Lose(lock,
           "no renewal succeeded within the TTL less the safety margin (" +
               std::to_string(ttl_.count() - options_.safety_margin.count()) +
               " ms on the client's clock)");
      return;
    }
    if (now < next_attempt_) {
      cv_.wait_until(lock, std::min(next_attempt_, deadline),
                     [&] { return stop_requested_ || !fenced_.empty(); });
      continue;
    }
    lock.unlock();
    std::string lost = Renew(deadline);
    lock.lock();
    if (!lost.empty()) {
      Lose(lock, std::move(lost));
      return;
    }
  }
}

std::string LeaseKeeper::Renew(Clock::time_point deadline) {
  // Rounded down, so the request ends by the deadline.
  const auto left =
      std::chrono::duration_cast<milliseconds>(deadline - Clock::now());
  if (left <= milliseconds(0)) return "";  // the loop sees the deadline
  const LeaseAttempt answer =
      backend_.Renew(token_, std::min(options_.timeout, left));
  const bool in_time = Clock::now() <= deadline;
  if (answer.outcome == LeaseAttempt::Outcome::kRefused) {
    return answer.detail.empty() ? "the renewal was refused" : answer.detail;
  }
  if (answer.outcome == LeaseAttempt::Outcome::kHeld &&
      answer.token != token_) {
    return "the renewal was answered with token " +
           std::to_string(answer.token) + " instead of " +
           std::to_string(token_);
  }
  std::lock_guard lock(mu_);
  if (answer.outcome == LeaseAttempt::Outcome::kHeld && in_time) {
    last_sent_ = std::max(last_sent_, answer.sent_at);
    next_attempt_ = answer.sent_at + options_.renew_period;
  } else {
    next_attempt_ = Clock::now() + retry_interval_;
  }
  return "";
}

}  // namespace fencepost::client
