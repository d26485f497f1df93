#include "fence/committer.h"

#include <cstdlib>
#include <utility>

#include "fence/errc.h"
#include "fence/recovery.h"

namespace fencepost::fence {

Committer::Committer(Env& env, Options options)
    : env_(env), options_(std::move(options)) {
  applier_ = std::make_unique<Applier>(
      env_, options_.max_unapplied_bytes / 2, options_.checkpoint_without_sync,
      [this](const std::string& what, int rc) { Fatal(what, rc); });
  wal_ = std::make_unique<Wal>(Wal::Options{env_.dir(), options_.segment_bytes,
                                            applier_->applied_seq()});
  Recovered recovered = Replay(env_, *wal_, *applier_);
  LoadLeases(env_, recovered.unapplied, options_.steady_now);
  replayed_ = recovered.replayed;
  next_seq_ = recovered.next_seq;
  written_seq_ = durable_seq_ = next_seq_ - 1;
  published_seq_ = next_seq_ - 1;
  log_syncs_ = std::make_unique<LogSyncs>(
      *wal_, [this](const std::string& what, int rc) { Fatal(what, rc); });
  applier_->Start(std::move(recovered.unapplied));
  StartDriving();
}

Committer::~Committer() { Stop(); }

void Committer::Submit(FenceWrite write, Done done) {
  enum { kQueued, kFirst, kOverloaded } result = kOverloaded;
  {
    std::lock_guard lock(mu_);
    if (queue_.size() < options_.max_queue_writes || stopping_) {
      queue_.push_back({std::move(write), std::move(done)});
      // The driver takes the whole queue when it runs: only the first
      // write of a busy moment needs to wake it.
      result = queue_.size() == 1 ? kFirst : kQueued;
    }
  }
  if (result == kFirst) Wake();
  if (result != kOverloaded) return;
  WriteOutcome overloaded;
  overloaded.error = Errc::kOverloaded;
  done(std::move(overloaded));
}

void Committer::WaitForApplier(const Applier::Ready& ready) {
  if (applier_->Holds(ready)) return;
  Drain();
  applier_->WaitUntil(ready);
}

void Committer::CommitGroup(std::vector<Pending>& group) {
  // Records published to the overlay are found there from now on.
  while (!recent_.empty() && recent_.front().last_seq <= published_seq_) {
    recent_.pop_front();
  }
  // Near --max-map-size the reservations of unapplied records would refuse
  // writes that fit: let the applier drain first, so a 507 is decided on
  // the map as it is (and stays 507 while nothing frees space).
  std::size_t need = 0;
  for (const Pending& p : group) need += MapReservation(p.write);
  if (env_.used_bytes() + applier_->reserved() + need > env_.max_map_size()) {
    WaitForApplier([](const Applier::Backlog& b) {
      return b.queued == 0 && b.unapplied_bytes == 0;
    });
  }
  Group g;
  Fold::State seen;
  DecideGroup(group, g, &seen);
  g.decided_at = std::chrono::steady_clock::now();
  const int segment = LogGroup(g, seen);
  g.leases = std::move(seen.leases);
  if (!g.leases.empty()) ++lease_groups_unanswered_;
  g.durable_at = next_seq_ - 1;
  g.pending = std::move(group);
  group.clear();
  decided_.push_back(std::move(g));
  if (segment < 0) {
    AnswerDurable();  // nothing to sync: it may be answerable now
    return;
  }
  written_seq_ = next_seq_ - 1;
  log_syncs_->Written(segment);
  if (options_.answer_before_sync) {
    durable_seq_ = written_seq_;  // the broken promise, on purpose
    AnswerDurable();
  }
  log_syncs_->Start(written_seq_);
}

int Committer::LogGroup(Group& g, Fold::State& seen) {
  if (g.records.empty()) return -1;
  std::string bytes;
  std::size_t unapplied = 0;
  for (const WalRecord& r : g.records) {
    EncodeRecord(r, &bytes);
    unapplied += HeldBytes(r);
  }
  // Bounded memory and replay at start: wait for the applier when it is
  // too far behind. Groups still being synced count as unapplied from
  // here on.
  WaitForApplier([&](const Applier::Backlog& b) {
    return b.unapplied_bytes == 0 ||
           b.unapplied_bytes + unapplied <= options_.max_unapplied_bytes;
  });
  // Recovery reads each segment's run from its start: a record left
  // undurable in the segment the writer leaves, with later ones durable
  // in the next, would read as a gap. Leave only a durable segment.
  const std::uint64_t applied = applier_->applied_seq();
  if (wal_->Switches(bytes.size(), applied)) Drain();
  applier_->Owe(unapplied);
  int segment = -1;
  if (int e = wal_->Write(bytes, g.records.back().seq, applied, &segment);
      e != 0) {
    Fatal(
        "the write-ahead log write failed; the outcome of its writes is "
        "unknown",
        e);
  }
  next_seq_ = g.records.back().seq + 1;
  recent_.push_back({g.records.back().seq,
                     {std::move(seen.fences), std::move(seen.values), {}}});
  return segment;
}

void Committer::AnswerDurable() {
  while (!decided_.empty() && decided_.front().durable_at <= durable_seq_) {
    Group g = std::move(decided_.front());
    decided_.pop_front();
    const std::chrono::duration<double> waited =
        std::chrono::steady_clock::now() - g.decided_at;
    {
      std::lock_guard lock(stats_mu_);
      stats_.group_writes.Observe(static_cast<double>(g.pending.size()));
      stats_.group_wait_seconds.Observe(waited.count());
    }
    Answer(g);
  }
}

void Committer::Answer(Group& g) {
  if (!g.records.empty()) {
    env_.overlay().Publish(g.records, g.created);
    for (auto& [name, entry] : g.leases) {
      env_.lease_table().Set(name, std::move(entry));
    }
    // The table counts the group's grants now (LeaseLimit).
    if (g.reserved_leases > 0) {
      options_.lease_limit->Unreserve(g.reserved_leases);
    }
    if (!g.leases.empty()) --lease_groups_unanswered_;
    published_seq_ = g.records.back().seq;
    ++commits_;
    applier_->Add(g.records);
  }
  for (std::size_t i = 0; i < g.pending.size(); ++i) {
    g.pending[i].done(std::move(g.outcomes[i]));
  }
}

void Committer::Fatal(const std::string& what, int rc) {
  // mdb_strerror also names plain errno values.
  const std::string message = what + ": " + env_.Explain(rc);
  if (options_.on_fatal) options_.on_fatal(message);
  std::abort();
}

}  // namespace fencepost::fence
