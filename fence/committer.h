#pragma once

#include <lmdb.h>

#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <system_error>
#include <thread>
#include <vector>

#include "fence/accept.h"
#include "fence/env.h"
#include "fence/token.h"

namespace fencepost::fence {

// A write presented to a fence.
struct FenceWrite {
  std::string fence;
  // The presented token; nullopt only for an observe-mode write that came
  // without one.
  std::optional<Token> token;
  // Observe mode: apply the write even when the accept rule would reject it.
  // The fence itself still only moves up.
  bool observe = false;
  // Runs inside the write transaction when the write is applied (accepted, or
  // observed), so the value lands atomically with the fence. Returns 0 or an
  // LMDB error code. It may run more than once when a batch is retried, so it
  // must only write, never count. May be empty (a bump, or a backend that
  // stores values elsewhere).
  std::function<int(MDB_txn*)> apply;
  // Bytes `apply` writes, to bound the size of one transaction.
  std::size_t bytes = 0;
};

struct WriteOutcome {
  enum class Verdict {
    kAccepted,  // the accept rule accepted it; the fence is at `current`
    kRejected,  // stale: nothing changed
    kObserved,  // observe mode applied a write enforce would have rejected
    kFailed,    // nothing changed; see `error`
  };
  Verdict verdict = Verdict::kFailed;
  Decision decision;
  std::optional<Token> previous;  // the fence before the write
  std::optional<Token> current;   // the fence after it
  std::int64_t updated_at_ns = 0;
  std::error_code error;
};

// Commits fence writes in groups: every write that arrives while the previous
// group is being synced joins the next group, which is one LMDB transaction
// and one durable commit. Writes in a group are applied in arrival order, so
// each sees the ones before it, and the accept rule holds exactly as if they
// were committed one by one. A rejected write writes nothing and so affects no
// other write of its group. `done` runs only after the group is durable.
//
// When a group hits MDB_MAP_FULL the map grows (Env::Grow) and the group is
// retried; past --max-map-size, or on any other error, each write of the group
// is retried alone, so one failing write fails only itself. A failed commit
// (an fsync error, say) may have lost data that LMDB cannot tell us about:
// `on_fatal` is called and must not return.
//
// Thread safety: Submit may be called from any thread. `done` callbacks run
// on the committer's own thread and must not block.
class Committer {
 public:
  using Done = std::function<void(WriteOutcome)>;
  struct Options {
    std::size_t max_batch_writes = 512;
    std::size_t max_batch_bytes = 32u << 20;
    std::function<void(const std::string&)> on_fatal;
  };

  Committer(Env& env, Options options);
  ~Committer();  // Stop()
  Committer(const Committer&) = delete;
  Committer& operator=(const Committer&) = delete;

  void Submit(FenceWrite write, Done done);
  // Commits everything queued, then joins the thread. Idempotent.
  void Stop();

  std::uint64_t commits() const;

 private:
  struct Pending {
    FenceWrite write;
    Done done;
  };

  void Run();
  void CommitGroup(std::vector<Pending>& group);
  // One transaction over `group`; fills `outcomes`. Returns an LMDB code.
  int TryGroup(std::vector<Pending>& group,
               std::vector<WriteOutcome>* outcomes);
  int ApplyOne(MDB_txn* txn, Pending& pending, std::int64_t now_ns,
               WriteOutcome* outcome);
  [[noreturn]] void Fatal(const std::string& what, int rc);

  Env& env_;
  Options options_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Pending> queue_;
  bool stopping_ = false;
  std::uint64_t commits_ = 0;
  std::thread thread_;
};

}  // namespace fencepost::fence
