#include "fence/log_syncs.h"

#include <algorithm>
#include <cerrno>
#include <utility>

namespace fencepost::fence {

LogSyncs::LogSyncs(Wal& wal, Fatal fatal) : fatal_(std::move(fatal)) {
  for (int i = 0; i < kSlots; ++i) {
    slot_files_.push_back(std::make_unique<Wal::SyncFiles>(wal));
  }
  ring_ = std::make_unique<SyncRing>(8);
}

int LogSyncs::FreeSlot() const {
  for (int i = 0; i < kSlots; ++i) {
    if (!slot_busy_[i]) return i;
  }
  return -1;
}

void LogSyncs::Start(std::uint64_t target) {
  const int slot = FreeSlot();
  Ticket ticket{next_ticket_++, target, slot, 0,
                std::chrono::steady_clock::now()};
  for (int i = 0; i < 2; ++i) {
    if ((unsynced_segments_ & (1u << i)) == 0) continue;
    if (!ring_->PrepareDataSync(slot_files_[slot]->fd(i), ticket.id)) {
      fatal_("cannot queue the write-ahead log's sync", EAGAIN);
    }
    ++ticket.pending;
  }
  unsynced_segments_ = 0;
  slot_busy_[slot] = true;
  syncs_.push_back(ticket);
  if (int e = ring_->Submit(); e != 0) {
    fatal_("cannot submit the write-ahead log's sync", e);
  }
}

std::uint64_t LogSyncs::Reap(bool wait,
                             const std::function<void(double)>& synced) {
  const int e = ring_->Reap(wait, [&](std::uint64_t id, int result) {
    if (result < 0) {
      fatal_(
          "the write-ahead log sync failed; the outcome of its writes is "
          "unknown",
          -result);
    }
    Ticket& ticket = syncs_[id - syncs_.front().id];
    if (--ticket.pending > 0) return;
    slot_busy_[ticket.slot] = false;
    const std::chrono::duration<double> took =
        std::chrono::steady_clock::now() - ticket.submitted_at;
    synced(took.count());
  });
  if (e != 0) fatal_("cannot wait for the write-ahead log's sync", e);
  std::uint64_t durable = 0;
  while (!syncs_.empty() && syncs_.front().pending == 0) {
    durable = std::max(durable, syncs_.front().target);
    syncs_.pop_front();
  }
  return durable;
}

}  // namespace fencepost::fence
