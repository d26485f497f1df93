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
  options_.loop.watch(ring_->event_fd(), [this, alive] {
    if (!alive.lock()) return;
    Consume(ring_->event_fd());
    Pump();
  });
  options_.loop.watch(timer_fd_, [this, alive] {
    if (!alive.lock()) return;
    Consume(timer_fd_);
    Pump();
  });
}

void Committer::Run() {
  pollfd fds[2] = {{ring_->event_fd(), POLLIN, 0}, {timer_fd_, POLLIN, 0}};
  while (true) {
    {
      std::lock_guard lock(mu_);
      if (stopping_) return;
    }
    if (::poll(fds, 2, -1) < 0 && errno != EINTR) {
      Fatal("the committer cannot wait for its syncs", errno);
    }
    if (fds[0].revents != 0) Consume(ring_->event_fd());
    if (fds[1].revents != 0) Consume(timer_fd_);
    Pump();
  }
}

void Committer::Wake() {
  if (!options_.loop.post) {
    Signal(ring_->event_fd());
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

int Committer::FreeSlot() const {
  for (int i = 0; i < kSyncSlots; ++i) {
    if (!slot_busy_[i]) return i;
  }
  return -1;
}

bool Committer::CommitNext() {
  if (FreeSlot() < 0) return false;  // the group gathers meanwhile
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
      const std::size_t size = PayloadBytes(queue_.front().write);
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

void Committer::StartSync() {
  const int slot = FreeSlot();
  SyncTicket ticket{next_ticket_++, written_seq_, slot, 0,
                    std::chrono::steady_clock::now()};
  for (int i = 0; i < 2; ++i) {
    if ((unsynced_segments_ & (1u << i)) == 0) continue;
    if (!ring_->PrepareDataSync(slot_files_[slot]->fd(i), ticket.id)) {
      Fatal("cannot queue the write-ahead log's sync", EAGAIN);
    }
    ++ticket.pending;
  }
  unsynced_segments_ = 0;
  slot_busy_[slot] = true;
  syncs_.push_back(ticket);
  if (int e = ring_->Submit(); e != 0) {
    Fatal("cannot submit the write-ahead log's sync", e);
  }
}

void Committer::Reap(bool wait) {
  const int e = ring_->Reap(wait, [this](std::uint64_t id, int result) {
    if (result < 0) {
      Fatal(
          "the write-ahead log sync failed; the outcome of its writes is "
          "unknown",
          -result);
    }
    SyncTicket& ticket = syncs_[id - syncs_.front().id];
    if (--ticket.pending > 0) return;
    slot_busy_[ticket.slot] = false;
    const std::chrono::duration<double> took =
        std::chrono::steady_clock::now() - ticket.submitted_at;
    std::lock_guard lock(stats_mu_);
    stats_.sync_seconds.Observe(took.count());
  });
  if (e != 0) Fatal("cannot wait for the write-ahead log's sync", e);
  while (!syncs_.empty() && syncs_.front().pending == 0) {
    durable_seq_ = std::max(durable_seq_, syncs_.front().target);
    syncs_.pop_front();
  }
  AnswerDurable();
}

void Committer::Drain() {
  while (!decided_.empty() && !syncs_.empty()) Reap(true);
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
    if (!syncs_.empty()) Reap(true);
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
    Signal(ring_->event_fd());
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
  {
    std::lock_guard lock(mu_);
    committer_done_ = true;
  }
  apply_cv_.notify_all();
  if (applier_.joinable()) {
    applier_.join();
    // Everything logged is in LMDB now.
    if (int e = wal_->MarkApplied(); e != 0) {
      Fatal("cannot mark the write-ahead log applied", e);
    }
  }
}

std::uint64_t Committer::commits() const {
  std::lock_guard lock(mu_);
  return commits_;
}

CommitStats Committer::stats() const {
  std::lock_guard lock(stats_mu_);
  return stats_;
}

const std::string& Committer::sync_fallback() const {
  return ring_->fallback();
}

}  // namespace fencepost::fence
