#pragma once

// clang-format off
// Boost 1.74's awaitable.hpp uses std::exchange without including <utility>.
#include <utility>
// clang-format on

#include <chrono>
#include <optional>
#include <string>
#include <system_error>
#include <unordered_map>

#include "fence/rules.h"
#include "fence/write.h"
#include "http/coro.h"
#include "storage/backend.h"
#include "storage/fence_locks.h"
#include "storage/fences.h"

namespace fencepost::storage {

// What a store that keeps values outside the fence store (a directory, an
// HTTP store, a bucket) does for ValueGate: the requests of one store, and
// no protocol. Each call runs inside the write's fence turn; none decides a
// verdict (the gate and fence/rules.h do).
class ValueStore {
 public:
  // The value a write would replace, or why the store cannot take it.
  struct Current {
    // The write cannot be stored (a bad path, say), or the value could not
    // be read: the write fails with it, and nothing changes.
    std::error_code error;
    fence::ValueNow value;  // exists false: no value (or not read)
  };
  // What became of a value the store was asked to write.
  struct Stored {
    fence::Landing landing = fence::Landing::kApplied;
    std::error_code error;  // with kNotApplied and kUnknown
    std::string etag;       // an applied put's new tag; empty: none
    bool created = false;   // the write made a value that did not exist
    // A forwarding store's answer, ready to relay (WriteResult::upstream).
    std::optional<HttpResponse> upstream;
    std::string detail;  // with an error: what failed, for the log line
    // The store's own error answer (with Errc::kStoreRefused).
    std::optional<StoreError> store_error;
  };

  virtual ~ValueStore() = default;
  // Before the fence commit: checks that could refuse `request` (nothing
  // has changed yet) and, with `read_value` (a conditional write), the
  // value it replaces. The default refuses nothing and reads nothing.
  virtual Awaitable<Current> Prepare(const WriteRequest& request,
                                     bool read_value);
  // After the fence commit, for a conditional write: the value as it is now
  // (another replica sharing the store may have written it since Prepare).
  // The default is Prepare with `read_value`.
  virtual Awaitable<Current> Reread(const WriteRequest& request);
  // Writes (or deletes) `request`'s value: sends it once, never again after
  // it may have reached the store. `seen`: for a conditional write, the
  // value as the precondition was last decided over (Reread), which a store
  // that checks preconditions itself can be asked to hold still.
  virtual Awaitable<Stored> Store(const WriteRequest& request,
                                  const fence::ValueNow* seen) = 0;
};

// The one protocol for values kept elsewhere (fs:, http://, s3://): per
// fence, a write
//  1. waits for the fence's turn (FenceLocks): one write of a fence at a
//     time, in arrival order, from its commit until its value's outcome is
//     known;
//  2. while the fence is held closed after an unknown outcome, is refused:
//     a stale token with its 409 (fence::RejectWhileHeld), any other write
//     with Errc::kFenceHeld and WriteResult::retry_after;
//  3. is checked by the store (ValueStore::Prepare; a refusal changes
//     nothing), and its fence committed durably, taking the fence's turn
//     among replicas (Fences::CommitInTurn): the verdict on the token and
//     the precondition is the rulebook's (fence::DecideWrite);
//  4. if applied (the raise is told by the fence store as it becomes
//     durable: Fences::TellChanges, whatever becomes of the value), then,
//     for a conditional write, has its precondition decided again over the
//     value as it is now (fence::RecheckPrecondition), and only then has
//     its value stored (ValueStore::Store; fence::AfterLanding);
//  5. ends its turn; an unknown outcome holds the fence closed for
//     `settle` (fence::HoldsFence), here and among replicas.
// A write that reaches the store therefore always carries the highest token
// its fence has accepted, and a failure after the commit leaves the fence
// advanced, which is always safe.
//
// Errors: those of Fences::CommitInTurn and of the store's Current and
// Stored, and Errc::kFenceHeld.
//
// Thread safety: every call on the server's one io thread, the executor of
// the awaiting coroutines.
class ValueGate {
 public:
  struct Options {
    // How long an unknown outcome holds its fence closed.
    std::chrono::milliseconds settle{0};
    // Hold every fence this long from the start: writes the last process
    // sent may still land (after a crash, a write sent just before it may
    // be on the wire for the whole upstream timeout and then settle; after
    // a clean stop, what was left of that process's own holds).
    std::chrono::milliseconds hold_at_start{0};
    // Test-only: never hold a fence (to show the overwrite a hold
    // prevents).
    bool disable_holds = false;
  };

  // `fences` and `store` must outlive the gate.
  ValueGate(Fences& fences, ValueStore& store, Options options);

  // Backend::Write's contract, for a store that keeps values elsewhere.
  Awaitable<WriteResult> Write(WriteRequest request);
  // How long the longest hold still has to run from now (0: none), the
  // start's included: a clean stop hands it on to the next process.
  std::chrono::milliseconds HoldLeft() const;

 private:
  // Seconds `fence` stays held closed from now (Retry-After), 0 when not.
  int HeldSeconds(const std::string& fence);
  // Steps 3 to 5 for a write that is not held.
  Awaitable<WriteResult> CommitAndStore(const WriteRequest& request);

  Fences& fences_;
  ValueStore& store_;
  Options options_;
  FenceLocks locks_;
  std::unordered_map<std::string, std::chrono::steady_clock::time_point>
      held_until_;
  std::chrono::steady_clock::time_point all_held_until_{};
};

}  // namespace fencepost::storage
