#pragma once

// clang-format off
// Boost 1.74's awaitable.hpp uses std::exchange without including <utility>.
#include <utility>
// clang-format on

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

#include "fence/commit_stats.h"
#include "fence/fence_record.h"
#include "fence/lease.h"
#include "fence/scope.h"
#include "fence/write.h"
#include "http/coro.h"
#include "storage/changes.h"

namespace fencepost::storage {

// Where the fences live, as the routes see them: the data directory's LMDB
// environments (LocalFences, the default), or an etcd cluster that several
// replicas share (EtcdFences, --fence-store etcd://).
//
// The one door to the fence store: the routes reach fences, values (with
// the embedded and etcd backends), leases, batches and the store's figures
// through it, never the engine behind it. Submit decides a fence write by
// fence/rules.h and applies it (a value with it, when the store keeps
// values) atomically and durably before `done` runs, with the outcomes of
// fence::Committer::Submit.
//
// Changes leave the store through one channel (TellChanges), as they
// become durable: fence raises, lease grants, renewals and releases, and
// each lease that ran out without a release, once, when the store notices
// it (the result of the call that noticed it says so too, in `expired`).
//
// --max-leases (given at construction) is the engine's to decide, in the
// step that commits a grant: a grant past it is refused with
// fence::LeaseOutcome::kTooManyLeases and changes nothing.
//
// Thread safety: see each implementation; the server calls every one on its
// io thread.
class Fences {
 public:
  struct Read {
    std::error_code error;
    std::optional<fence::FenceRecord> fence;  // nullopt: no such fence
  };
  struct ListRead {
    std::error_code error;
    fence::FenceList list;
  };

  // A lease as a read finds it, with the monotonic time (ns, the clock of
  // the entry's deadline) the read was made at. `expired`: this read noticed
  // that the lease ran out without a release (each expiry is noticed once).
  struct LeaseRead {
    std::error_code error;
    std::int64_t now_ns = 0;
    std::optional<fence::LeaseEntry> entry;  // nullopt: never granted
    std::optional<fence::LeaseRecord> expired;
  };
  struct LeaseList {
    std::error_code error;
    std::int64_t now_ns = 0;
    std::vector<std::pair<std::string, fence::LeaseEntry>> leases;
    std::optional<std::string> next;  // the last name, when there are more
    std::vector<std::pair<std::string, fence::LeaseRecord>> expired;
  };

  // A fence's turn among replicas (see CommitInTurn); revision 0: none.
  struct Turn {
    std::string fence;
    std::int64_t revision = 0;
  };

  virtual ~Fences() = default;
  // Where the store tells its changes (storage/changes.h); set once, before
  // the first write.
  void TellChanges(ChangeSink changes) { changes_ = std::move(changes); }
  // Tells what a write committed through Submit changed (ChangesOf), on
  // the thread that serves watchers: AsyncCommit calls it there, as the
  // write's outcome is handed back and before the caller goes on.
  void TellChangesOf(const WriteSubject& write,
                     const fence::WriteOutcome& outcome) const;
  virtual void Submit(fence::FenceWrite write, fence::WriteDone done) = 0;
  // For backends that keep values elsewhere (fs:, http://): commits `write`
  // (a fence write without a value) and, when replicas share the fences,
  // takes the fence's turn among them in the same step, so that no other
  // replica writes under that fence until EndTurn. The caller holds the
  // fence's local turn (FenceLocks) until then. Outcomes as Submit's, and
  // storage::Errc::kFenceHeld when another replica holds the turn.
  virtual Awaitable<std::pair<fence::WriteOutcome, Turn>> CommitInTurn(
      fence::FencedWrite write);
  // Ends `turn` after `hold` (zero: now); a no-op for an empty turn. A
  // replica that dies holding a turn holds it until its etcd lease runs out.
  virtual void EndTurn(Turn /*turn*/, std::chrono::milliseconds /*hold*/) {}
  // The fence named `name`.
  virtual Awaitable<Read> Get(std::string name) = 0;
  // Up to `limit` fences whose names start with `prefix`, after `after`.
  virtual Awaitable<ListRead> List(std::string prefix, std::string after,
                                   std::size_t limit) = 0;
  // The lease `name`, whose fence is `fence`.
  virtual Awaitable<LeaseRead> GetLease(std::string name,
                                        std::string fence) = 0;
  // Up to `limit` leases whose names start with `prefix`, after `after`,
  // in name order.
  virtual Awaitable<LeaseList> ListLeases(std::string prefix, std::string after,
                                          std::size_t limit) = 0;
  // The monotonic clock lease deadlines are on (ns).
  virtual std::int64_t SteadyNow() const { return fence::SteadyNowNs(); }
  // Why `batch` cannot be applied in one step by this store, with the key
  // of the write that shows it in `*key`; nullopt when it can.
  virtual std::optional<std::string> RefuseBatch(const fence::Batch& /*batch*/,
                                                 std::string* /*key*/) const {
    return std::nullopt;
  }
  // What the store tells of itself for /metrics (noticing expiries).
  struct Stats {
    std::optional<std::size_t> live_leases;
    struct Map {
      std::uint64_t used = 0, size = 0, max = 0;
    };
    std::optional<Map> map;  // LMDB's memory map, summed over shards
    // The committers' groups and log syncs, summed over shards.
    std::optional<fence::CommitStats> log;
  };
  virtual Stats Statistics() { return {}; }
  // Whether every lease record sits where its fence is under `scopes` (a
  // grant raises the fence in the same record): what is wrong, or "".
  // Called once at start.
  virtual std::string CheckLeases(const fence::Scopes& /*scopes*/) const {
    return {};
  }
  // How many fences there are, when that is cheap to know.
  virtual std::optional<std::uint64_t> Count() = 0;
  // Whether writes can be decided now (for /readyz). Never fails.
  virtual Awaitable<bool> Ready() = 0;
  // What a read sees, for the `consistency` of fence documents: "local"
  // (this process's durable state) or "linearizable" (every replica's).
  virtual std::string_view consistency() const = 0;
  // What the last failure to reach the store was, for log lines (empty
  // when there is nothing to add to the error itself).
  virtual std::string last_error() const { return {}; }
  // The --fence-scope prefixes the store has been served with, as recorded
  // (fence::PlanScopes), and their durable replacement. For start-up only:
  // they throw std::runtime_error with a readable message on failure.
  virtual Awaitable<fence::ScopeRecord> RecordedScopes() = 0;
  // Checks the format of the records the store holds, recording this
  // release's where none is recorded: "" when this release can serve them,
  // else why not (the start stops with exit 2). Throws std::runtime_error
  // when the store cannot be read. (A data directory's LMDB environments
  // check their own when they open: fence::Env.)
  virtual Awaitable<std::string> CheckFormat() { co_return std::string(); }
  virtual Awaitable<void> RecordScopes(fence::ScopeRecord record) = 0;
  // Why the store cannot serve `after` when it last served `before`
  // (fence::Shards::RefuseScopeChange), or "". For start-up only; throws
  // std::runtime_error when the store cannot be read.
  virtual std::string RefuseScopeChange(const fence::Scopes& /*before*/,
                                        const fence::Scopes& /*after*/) const {
    return {};
  }

 protected:
  // Tells `change` to the channel, if one is set.
  void Tell(Change change) const {
    if (changes_) changes_(std::move(change));
  }

 private:
  ChangeSink changes_;
};

}  // namespace fencepost::storage
