#include "fence/committer.h"

#include <chrono>
#include <cstdlib>

#include "fence/errc.h"
#include "fence/fence_store.h"

namespace fencepost::fence {
namespace {

std::int64_t NowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

}  // namespace

Committer::Committer(Env& env, Options options)
    : env_(env), options_(std::move(options)), thread_([this] { Run(); }) {}

Committer::~Committer() { Stop(); }

void Committer::Submit(FenceWrite write, Done done) {
  {
    std::lock_guard lock(mu_);
    queue_.push_back({std::move(write), std::move(done)});
  }
  cv_.notify_one();
}

void Committer::Stop() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  cv_.notify_one();
  if (thread_.joinable()) thread_.join();
}

std::uint64_t Committer::commits() const {
  std::lock_guard lock(mu_);
  return commits_;
}

void Committer::Run() {
  std::vector<Pending> group;
  while (true) {
    {
      std::unique_lock lock(mu_);
      cv_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
      if (queue_.empty()) return;
      std::size_t bytes = 0;
      while (!queue_.empty() && group.size() < options_.max_batch_writes &&
             (group.empty() ||
              bytes + queue_.front().write.bytes <= options_.max_batch_bytes)) {
        bytes += queue_.front().write.bytes;
        group.push_back(std::move(queue_.front()));
        queue_.pop_front();
      }
    }
    CommitGroup(group);
    group.clear();
  }
}

void Committer::CommitGroup(std::vector<Pending>& group) {
  std::vector<WriteOutcome> outcomes;
  int rc;
  while (true) {
    rc = TryGroup(group, &outcomes);
    if (rc != MDB_MAP_FULL || !env_.Grow()) break;
  }
  if (rc == 0) {
    {
      std::lock_guard lock(mu_);
      ++commits_;
    }
    for (std::size_t i = 0; i < group.size(); ++i) {
      group[i].done(std::move(outcomes[i]));
    }
    return;
  }
  if (group.size() == 1) {
    WriteOutcome failed;
    failed.error = FromLmdb(rc);
    group.front().done(std::move(failed));
    return;
  }
  for (Pending& pending : group) {
    std::vector<Pending> alone;
    alone.push_back(std::move(pending));
    CommitGroup(alone);
  }
}

int Committer::TryGroup(std::vector<Pending>& group,
                        std::vector<WriteOutcome>* outcomes) {
  MDB_txn* txn = nullptr;
  if (int rc = mdb_txn_begin(env_.raw(), nullptr, 0, &txn); rc != 0) {
    if (rc == MDB_MAP_RESIZED) {
      // Another process grew the map; adopt its size and try again.
      mdb_env_set_mapsize(env_.raw(), 0);
      return MDB_MAP_FULL;
    }
    Fatal("cannot begin a write transaction", rc);
  }
  const std::int64_t now_ns = NowNs();
  outcomes->assign(group.size(), WriteOutcome{});
  for (std::size_t i = 0; i < group.size(); ++i) {
    if (int rc = ApplyOne(txn, group[i], now_ns, &(*outcomes)[i]); rc != 0) {
      mdb_txn_abort(txn);
      return rc;
    }
  }
  // On failure mdb_txn_commit frees the transaction itself.
  const int rc = mdb_txn_commit(txn);
  if (rc == MDB_MAP_FULL || rc == MDB_TXN_FULL) return rc;
  if (rc != 0) Fatal("commit failed; the outcome of its writes is unknown", rc);
  return 0;
}

int Committer::ApplyOne(MDB_txn* txn, Pending& pending, std::int64_t now_ns,
                        WriteOutcome* outcome) {
  const FenceWrite& write = pending.write;
  Slot slot;
  std::optional<FenceRecord> fence;
  if (int rc = ReadFence(txn, env_.fences(), write.fence, &slot, &fence);
      rc != 0) {
    return rc;
  }
  if (fence) {
    outcome->previous = fence->token;
    outcome->current = fence->token;
    outcome->updated_at_ns = fence->updated_at_ns;
  }
  if (write.token) {
    outcome->decision = Decide(outcome->previous, *write.token);
  }
  if (outcome->decision.accepted) {
    if (int rc = WriteFence(txn, env_.fences(), slot, write.fence, *write.token,
                            now_ns);
        rc != 0) {
      return rc;
    }
    outcome->current = *write.token;
    outcome->updated_at_ns = now_ns;
    outcome->verdict = WriteOutcome::Verdict::kAccepted;
  } else if (write.observe) {
    outcome->verdict = WriteOutcome::Verdict::kObserved;
  } else {
    outcome->verdict = WriteOutcome::Verdict::kRejected;
    return 0;
  }
  return write.apply ? write.apply(txn) : 0;
}

void Committer::Fatal(const std::string& what, int rc) {
  const std::string message = what + ": " + mdb_strerror(rc);
  if (options_.on_fatal) options_.on_fatal(message);
  std::abort();
}

}  // namespace fencepost::fence
