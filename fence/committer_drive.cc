// How a committer is driven: the event loop (or its own thread) that
// decides groups, logs them, submits their syncs through io_uring and
// answers them once their syncs complete, with no other thread between a
// request and its answer.

#include <poll.h>
#include <sys/timerfd.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdint>
#include <stdexcept>
#include <string>

#include "fence/committer.h"

namespace fencepost::fence {
namespace {

// How often the committer looks for leases that ran out unnoticed.
constexpr std::int64_t kLeaseSweepNs = 1'000'000'000;

void Signal(int event_fd) {
  const std::uint64_t one = 1;
  // Cannot fail short of a counter at its maximum, which a reader resets.
  [[maybe_unused]] ssize_t n = ::write(event_fd, &one, sizeof one);
}

void Consume(int fd) {
  std::uint64_t count = 0;
  [[maybe_unused]] ssize_t n = ::read(fd, &count, sizeof count);
}

// The value bytes `write` carries, which bound a group (max_batch_bytes).
std::size_t ValueBytes(const FenceWrite& write) {
  const auto bytes = [](const FencedWrite& w) {
    return w.value ? w.value->key.size() + w.value->body.size() : 0;
  };
  if (const auto* w = std::get_if<FencedWrite>(&write)) return bytes(*w);
  std::size_t n = 0;
  if (const auto* b = std::get_if<Batch>(&write)) {
    for (const FencedWrite& w : b->writes) n += bytes(w);
  }
  return n;
}

}  // namespace

void Committer::StartDriving() {
  next_sweep_ = options_.steady_now();
  timer_fd_ = ::timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC | TFD_NONBLOCK);
  const itimerspec tick{{1, 0}, {1, 0}};
  if (timer_fd_ < 0 || ::timerfd_settime(timer_fd_, 0, &tick, nullptr) != 0) {
    throw std::runtime_error("cannot create the committer's timer in " +
                             env_.dir());
  }
  if (!options_.loop.post) {
    thread_ = std::thread([this] { Run(); });
    return;
  }
  std::weak_ptr<int> alive = alive_;
  options_.loop.watch(log_syncs_->event_fd(), [this, alive] {
    if (!alive.lock()) return;
    Consume(log_syncs_->event_fd());
    Pump();
  });
  options_.loop.watch(timer_fd_, [this, alive] {
    if (!alive.lock()) return;
    Consume(timer_fd_);
    Pump();
  });
}

void Committer::Run() {
  pollfd fds[2] = {{log_syncs_->event_fd(), POLLIN, 0}, {timer_fd_, POLLIN, 0}};
  while (true) {
    {
      std::lock_guard lock(mu_);
      if (stopping_) return;
    }
    if (::poll(fds, 2, -1) < 0 && errno != EINTR) {
      Fatal("the committer cannot wait for its syncs", errno);
    }
    if (fds[0].revents != 0) Consume(log_syncs_->event_fd());
    if (fds[1].revents != 0) Consume(timer_fd_);
    Pump();
  }
}

void Committer::Wake() {
  if (!options_.loop.post) {
    Signal(log_syncs_->event_fd());
    return;
  }
  // One pump posted at a time: the writes queued meanwhile join its group.
  if (pump_posted_.exchange(true)) return;
  std::weak_ptr<int> alive = alive_;
  options_.loop.post([this, alive] {
    if (alive.lock()) Pump();
  });
}

void Committer::Pump() {
  std::lock_guard drive(drive_mu_);
  pump_posted_ = false;
  if (stopped_) return;
  // Completions are peeked at without a system call, so a pump posted for
  // new writes reaps them too; the eventfd is read only when it woke us.
  Reap(false);
  while (CommitNext()) {
  }
  SweepLeases();
}

bool Committer::CommitNext() {
  if (!log_syncs_->slot_free()) return false;  // the group gathers meanwhile
  std::vector<Pending> group;
  {
    std::lock_guard lock(mu_);
    std::size_t bytes = 0;
    while (!queue_.empty() && group.size() < options_.max_batch_writes) {
      // Lease decisions read the lease table, which groups update when
      // they are answered: a lease operation joins a group only once every
      // group before is answered. Meanwhile it waits in the queue, not on
      // the loop: the completion that answers the last one pumps again.
      if (std::holds_alternative<LeaseOp>(queue_.front().write) &&
          !decided_.empty()) {
        break;
      }
      const std::size_t size = ValueBytes(queue_.front().write);
      if (!group.empty() && bytes + size > options_.max_batch_bytes) break;
      bytes += size;
      group.push_back(std::move(queue_.front()));
      queue_.pop_front();
    }
  }
  if (group.empty()) return false;
  CommitGroup(group);
  return true;
}

void Committer::Reap(bool wait) {
  const std::uint64_t durable = log_syncs_->Reap(wait, [this](double seconds) {
    std::lock_guard lock(stats_mu_);
    stats_.sync_seconds.Observe(seconds);
  });
  durable_seq_ = std::max(durable_seq_, durable);
  AnswerDurable();
}

void Committer::Drain() {
  while (!decided_.empty() && log_syncs_->in_flight()) Reap(true);
  AnswerDurable();
}

void Committer::DrainQueue() {
  while (true) {
    Reap(false);
    while (CommitNext()) {
    }
    bool queued = false;
    {
      std::lock_guard lock(mu_);
      queued = !queue_.empty();
    }
    if (!queued && decided_.empty()) return;
    if (log_syncs_->in_flight()) Reap(true);
  }
}

void Committer::SweepLeases() {
  // Not while a lease change is decided but not yet in the table: a
  // renewal being synced would read as a lease that ran out.
  if (!options_.on_lease_expired || options_.steady_now() < next_sweep_ ||
      lease_groups_unanswered_ != 0) {
    return;
  }
  NoticeExpiredLeases();
  next_sweep_ = options_.steady_now() + kLeaseSweepNs;
}

void Committer::NoticeExpiredLeases() {
  for (const auto& [name, lease] :
       env_.lease_table().NoticeExpired(options_.steady_now())) {
    options_.on_lease_expired(name, lease);
  }
}

void Committer::Stop() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  if (thread_.joinable()) {
    Signal(log_syncs_->event_fd());
    thread_.join();
  }
  {
    std::lock_guard drive(drive_mu_);
    if (!stopped_) {
      DrainQueue();
      stopped_ = true;
      if (timer_fd_ >= 0) ::close(timer_fd_);
      timer_fd_ = -1;
    }
  }
  // Everything logged is in LMDB once the applier has finished.
  if (applier_->Finish()) {
    if (int e = wal_->MarkApplied(); e != 0) {
      Fatal("cannot mark the write-ahead log applied", e);
    }
  }
}

std::uint64_t Committer::commits() const { return commits_; }

CommitStats Committer::stats() const {
  std::lock_guard lock(stats_mu_);
  return stats_;
}

const std::string& Committer::sync_fallback() const {
  return log_syncs_->fallback();
}

}  // namespace fencepost::fence
