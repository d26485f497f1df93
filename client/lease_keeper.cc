#include "client/lease_keeper.h"

#include <algorithm>
#include <stdexcept>

#include "client/documents.h"

namespace fencepost::client {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

LeaseKeeper::Options Normalize(LeaseKeeper::Options options) {
  if (options.ttl <= milliseconds(0)) {
    throw std::invalid_argument("the lease TTL must be positive");
  }
  if (options.renew_period <= milliseconds(0)) {
    options.renew_period = options.ttl / 3;
  }
  if (options.safety_margin <= milliseconds(0)) {
    options.safety_margin = std::max(options.ttl / 10, milliseconds(50));
  }
  if (options.safety_margin >= options.ttl) {
    throw std::invalid_argument("the safety margin must be below the TTL");
  }
  return options;
}

std::string Holder(const Problem& problem) {
  return problem.holder ? " (held by " + *problem.holder + ")" : "";
}

}  // namespace

LeaseKeeper::LeaseKeeper(Options options, std::uint64_t token,
                         Clock::time_point sent_at, LostCallback on_lost)
    : options_(Normalize(std::move(options))),
      token_(token),
      base_timeout_(options_.client.timeout),
      retry_interval_(std::max(options_.renew_period / 4, milliseconds(10))),
      client_(options_.client),
      on_lost_(std::move(on_lost)),
      last_sent_(sent_at),
      next_attempt_(sent_at + options_.renew_period),
      thread_([this] { Loop(); }) {}

LeaseKeeper::~LeaseKeeper() { Stop(); }

std::string LeaseKeeper::reason() const {
  std::lock_guard lock(mu_);
  return reason_;
}

Clock::time_point LeaseKeeper::held_until() const {
  std::lock_guard lock(mu_);
  return last_sent_ + options_.ttl - options_.safety_margin;
}

void LeaseKeeper::Stop() {
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

std::optional<Result> LeaseKeeper::Release() {
  Stop();
  {
    std::lock_guard lock(mu_);
    if (lost_.stopped() || released_) return std::nullopt;
    released_ = true;
  }
  client_.set_timeout(base_timeout_);
  return client_.ReleaseLease(options_.name, options_.holder, token_);
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
    const Clock::time_point deadline =
        last_sent_ + options_.ttl - options_.safety_margin;
    const Clock::time_point now = Clock::now();
    if (now >= deadline) {
      Lose(lock,
           "no renewal succeeded within the TTL less the safety margin (" +
               std::to_string(options_.ttl.count() -
                              options_.safety_margin.count()) +
               " ms on the client's clock)");
      return;
    }
    if (now < next_attempt_) {
      cv_.wait_until(lock, std::min(next_attempt_, deadline),
                     [&] { return stop_requested_; });
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
  const Clock::time_point sent = Clock::now();
  // Rounded down, so the request ends by the deadline.
  const auto left = std::chrono::duration_cast<milliseconds>(deadline - sent);
  if (left <= milliseconds(0)) return "";  // the loop sees the deadline
  client_.set_timeout(std::min(base_timeout_, left));
  const Result result =
      client_.AcquireLease(options_.name, options_.holder, options_.ttl);
  const int status = result.ok() ? result.response.status : 0;
  const bool in_time = Clock::now() <= deadline;
  if (status == 200 && in_time) {
    const std::optional<Lease> lease = ParseLease(result.response.body);
    if (lease && lease->holder != options_.holder) {
      return "the renewal was answered with holder " +
             lease->holder.value_or("null");
    }
    if (lease && lease->token != token_) {
      return "the renewal was answered with token " +
             std::to_string(lease->token) + " instead of " +
             std::to_string(token_);
    }
    if (lease) {
      std::lock_guard lock(mu_);
      last_sent_ = sent;
      next_attempt_ = sent + options_.renew_period;
      return "";
    }
  }
  if (status == 409) {
    const std::optional<Problem> problem = ParseProblem(result.response.body);
    return "the renewal was refused" + (problem ? Holder(*problem) : "");
  }
  if (status >= 400 && status < 500 && status != 408 && status != 429) {
    const std::optional<Problem> problem = ParseProblem(result.response.body);
    return "the renewal was refused with HTTP " + std::to_string(status) +
           (problem && !problem->detail.empty() ? ": " + problem->detail : "");
  }
  std::lock_guard lock(mu_);
  next_attempt_ = Clock::now() + retry_interval_;
  return "";
}

}  // namespace fencepost::client
