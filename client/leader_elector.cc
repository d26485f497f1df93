#include "client/leader_elector.h"

#include <unistd.h>

#include <algorithm>
#include <climits>
#include <cstdio>
#include <exception>
#include <random>
#include <stdexcept>

#include "client/fencepost_leases.h"
#include "client/lease_keeper.h"

namespace fencepost::client {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

std::mt19937_64& Random() {
  thread_local std::mt19937_64 engine(std::random_device{}());
  return engine;
}

LeaderElector::Options Normalize(LeaderElector::Options options) {
  if (options.backend) {
    options.name = options.backend->spec().name;
    options.holder = options.backend->spec().holder;
    options.ttl = options.backend->spec().ttl;
  }
  if (options.name.empty()) {
    throw std::invalid_argument("the lease needs a name");
  }
  if (options.ttl <= milliseconds(0)) {
    throw std::invalid_argument("the lease TTL must be positive");
  }
  if (options.holder.empty()) options.holder = DefaultHolderId();
  if (options.retry_period <= milliseconds(0)) {
    options.retry_period = std::max(options.ttl / 3, milliseconds(1));
  }
  if (options.safety_margin <= milliseconds(0)) {
    options.safety_margin = std::max(options.ttl / 10, milliseconds(50));
  }
  if (options.safety_margin >= options.ttl) {
    throw std::invalid_argument("the safety margin must be below the TTL");
  }
  if (options.client.timeout <= milliseconds(0)) {
    throw std::invalid_argument("the request timeout must be positive");
  }
  if (!options.backend) Url::Parse(options.client.url);  // throws if bad
  return options;
}

}  // namespace

std::string DefaultHolderId() {
  char host[HOST_NAME_MAX + 1] = {};
  if (gethostname(host, sizeof host - 1) != 0 || host[0] == '\0') {
    std::snprintf(host, sizeof host, "unknown");
  }
  char suffix[16];
  std::snprintf(suffix, sizeof suffix, "%08x",
                static_cast<unsigned>(std::random_device{}()));
  return std::string(host) + "-" + std::to_string(getpid()) + "-" + suffix;
}

LeaderElector::LeaderElector(Options options, ElectedCallback on_elected,
                             LostCallback on_lost, ErrorCallback on_error)
    : options_(Normalize(std::move(options))),
      backend_(options_.backend ? options_.backend
                                : std::make_shared<FencepostLeases>(
                                      options_.client,
                                      LeaseSpec{options_.name, options_.holder,
                                                options_.ttl})),
      on_elected_(std::move(on_elected)),
      on_lost_(std::move(on_lost)),
      on_error_(std::move(on_error)) {}

LeaderElector::~LeaderElector() { Stop(); }

void LeaderElector::Run() {
  {
    std::lock_guard lock(mu_);
    if (running_) throw std::logic_error("LeaderElector::Run runs already");
    if (stop_requested_) return;
    running_ = true;
    run_thread_ = std::this_thread::get_id();
  }
  while (const std::optional<LeaseAttempt> grant = Campaign()) {
    Lead(*grant);
  }
  std::lock_guard lock(mu_);
  running_ = false;
  cv_.notify_all();
}

void LeaderElector::Stop() {
  std::unique_lock lock(mu_);
  stop_requested_ = true;
  if (term_stop_ != nullptr) term_stop_->Fire();
  cv_.notify_all();
  const auto self = std::this_thread::get_id();
  if (self == run_thread_ || self == work_thread_) return;
  cv_.wait(lock, [&] { return !running_; });
}

bool LeaderElector::StopRequested() {
  std::lock_guard lock(mu_);
  return stop_requested_;
}

milliseconds LeaderElector::Jittered(milliseconds period) {
  std::uniform_real_distribution<double> factor(0.5, 1.5);
  return milliseconds(std::max<long long>(
      1, static_cast<long long>(static_cast<double>(period.count()) *
                                factor(Random()))));
}

std::optional<LeaseAttempt> LeaderElector::Campaign() {
  while (!StopRequested()) {
    LeaseAttempt attempt = backend_->Acquire(options_.client.timeout);
    if (attempt.outcome == LeaseAttempt::Outcome::kHeld) return attempt;
    if (attempt.outcome == LeaseAttempt::Outcome::kFailed && on_error_) {
      on_error_("acquire: " + attempt.detail);
    }
    std::unique_lock lock(mu_);
    cv_.wait_for(lock, Jittered(options_.retry_period),
                 [&] { return stop_requested_; });
  }
  return std::nullopt;
}

void LeaderElector::Lead(const LeaseAttempt& grant) {
  StopSignal stop;
  {
    std::lock_guard lock(mu_);
    work_done_ = false;
    term_stop_ = &stop;
    if (stop_requested_) stop.Fire();
  }
  LeaseKeeper::Options keeper_options;
  keeper_options.safety_margin = options_.safety_margin;
  keeper_options.timeout = options_.client.timeout;
  LeaseKeeper keeper(*backend_, grant, keeper_options, [&](const std::string&) {
    stop.Fire();
    std::lock_guard lock(mu_);
    cv_.notify_all();
  });
  std::string failure;
  std::thread work([&] {
    {
      std::lock_guard lock(mu_);
      work_thread_ = std::this_thread::get_id();
    }
    try {
      on_elected_(grant.token, stop);
    } catch (const std::exception& e) {
      failure = std::string("the work threw: ") + e.what();
    } catch (...) {
      failure = "the work threw";
    }
    std::lock_guard lock(mu_);
    work_done_ = true;
    work_thread_ = {};
    cv_.notify_all();
  });
  {
    std::unique_lock lock(mu_);
    cv_.wait(lock, [&] {
      return stop_requested_ || work_done_ || keeper.lost().stopped();
    });
  }
  stop.Fire();
  work.join();
  {
    std::lock_guard lock(mu_);
    term_stop_ = nullptr;
  }
  keeper.Stop();
  std::string reason = keeper.reason();
  if (reason.empty()) {
    keeper.Release();
    reason = !failure.empty()  ? failure
             : StopRequested() ? "stopped"
                               : "the work returned";
  }
  if (on_lost_) on_lost_(grant.token, reason);
  if (reason == "the work returned") {
    // A work that returns at once must not turn into a loop of grants.
    std::unique_lock lock(mu_);
    cv_.wait_for(lock, Jittered(options_.retry_period),
                 [&] { return stop_requested_; });
  }
}

}  // namespace fencepost::client
