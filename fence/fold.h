#pragma once

// The group fold: a group of writes decided in order, each against the
// fences, values and leases as the writes before it in the group left them,
// a batch applied all together or not at all. Every engine (the LMDB
// committer, the etcd store) decides through one Fold and only loads what
// the group has not touched yet and persists the changes it returns; the
// verdicts themselves are fence/rules.h's.

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <system_error>
#include <vector>

#include "fence/lease.h"
#include "fence/rules.h"
#include "fence/token.h"
#include "fence/write.h"

namespace fencepost::fence {

// A fence as a decision sees it.
struct FenceNow {
  std::optional<Token> token;      // nullopt: no fence yet
  std::int64_t updated_at_ns = 0;  // of the raise that set `token`
  // Loaded from storage, which holds no record of it (the LMDB engine's
  // Overlay tells readers so).
  bool created = false;
};

// What an applied decision makes durable, for the engine to persist.
struct Change {
  enum class Op { kNone, kPut, kDelete, kLease };
  std::string fence;
  // The fence raised to this token (at `updated_at_ns`); unset: the fence
  // stays (a write at its own token, an observed write, a renewal).
  std::optional<Token> fence_token;
  std::int64_t updated_at_ns = 0;
  Op op = Op::kNone;
  std::string key;  // the value's key, or (kLease) the lease's name
  std::string body;
  std::string content_type;          // a put's, as sent
  std::optional<Token> value_token;  // the token a put or delete came with
  std::optional<LeaseRecord> lease;  // kLease: the record to store
  // The fence was loaded with `created` (no record in storage).
  bool fence_created = false;
  // The value it replaces was loaded (Source::LoadValue with its tag, for
  // a precondition), not taken from a write before it in the group.
  bool value_loaded = false;
  // A put's tag as the writes after it in the group see it (Source::Admit).
  std::string tag;
  // More changes of the same batch follow this one.
  bool batch_continues = false;
};

// What the rules need of the lease `entry` at steady `now`: its record,
// whether it is live and for how long (LeaseState without `other`).
LeaseState LeaseStateOf(const LeaseEntry& entry, std::int64_t now);
// `entry`, the lease `name`, as the live lease that blocks another.
LeaseState::Blocking BlockingOf(std::string name, const LeaseEntry& entry,
                                std::int64_t now);

// Decides a group's writes in order (fence/rules.h's DecideWrite,
// DecideLease, StopsBatch and BatchOutcome), each against what the group's
// applied writes left, and what the engine loads (Source) for what the group
// has not touched. A write that is not applied changes nothing, for the
// group too; a batch is decided against a copy of the group's state that is
// kept only when every write of it is applied. Each applied write that
// changes something yields a Change, in decision order (changes()).
//
// Thread safety: none; one group at a time, on one thread. The Source is
// called on that thread, during the Decide calls only.
class Fold {
 public:
  // What the group's decisions have done so far.
  struct State {
    std::map<std::string, FenceNow, std::less<>> fences;  // raised
    std::map<std::string, ValueNow, std::less<>> values;  // put or deleted
    // Granted, renewed or released; deadlines on the steady clock.
    std::map<std::string, LeaseEntry, std::less<>> leases;
  };

  // What an engine reads and takes for a fold. The lease calls and Unadmit
  // have defaults for an engine that decides no lease operation, or no
  // batch, through this Source: no lease, no limit, nothing to give back.
  class Source {
   public:
    virtual ~Source() = default;
    // The fence `name` as stored. An error fails the write that needs it.
    virtual std::error_code LoadFence(const std::string& name,
                                      FenceNow* now) = 0;
    // The value `key` as stored: whether it exists and, with `with_tag`
    // (the write has a precondition), its tag. An error fails the write.
    virtual std::error_code LoadValue(const std::string& key, bool with_tag,
                                      ValueNow* now) = 0;
    // The lease `op` names as stored, at steady `now`: `record`, `live`
    // and `expires_in_ms` (never `other` or `over_limit`). An engine that
    // notices expiries notices one here, once, into `*expired`.
    virtual LeaseState LoadLease(const LeaseOp& op, std::int64_t now,
                                 std::optional<LeaseRecord>* expired);
    // A lease live on `op.fence` other than `op.name`, as stored.
    virtual std::optional<LeaseState::Blocking> LiveOnFence(const LeaseOp& op,
                                                            std::int64_t now);
    // --max-leases: whether `op`, on `state`, would pass the limit
    // (fence::OverLeaseLimit); an engine may hold a place for it here
    // until LeaseDecided.
    virtual bool OverLeaseLimit(const LeaseOp& op, const LeaseState& state,
                                std::int64_t now);
    // Whether the operation OverLeaseLimit was last asked about is applied
    // (its change admitted).
    virtual void LeaseDecided(bool applied);
    // Takes `change`, the group's `number`th (from 0, counting only those
    // kept): sets a put's `change.tag`, and may fill `outcome` (its etag).
    // An error refuses it: the write fails with it and changes nothing.
    virtual std::error_code Admit(Change& change, std::size_t number,
                                  WriteOutcome* outcome) = 0;
    // Gives back what Admit took for `changes` (a batch not applied).
    virtual void Unadmit(const std::vector<Change>& changes);
  };

  explicit Fold(Source& source) : source_(source) {}
  Fold(const Fold&) = delete;
  Fold& operator=(const Fold&) = delete;

  // A fenced write or bump, at `now_ns` (Unix ns): its verdict in
  // `*outcome` (`created` when it puts a value where none was).
  void Decide(const FencedWrite& write, std::int64_t now_ns,
              WriteOutcome* outcome);
  // A lease operation, stamped `now_ns` (Unix ns), its deadline from
  // `steady_now`. An expiry the Source noticed is in outcome->lease.
  void Decide(const LeaseOp& op, std::int64_t now_ns, std::int64_t steady_now,
              WriteOutcome* outcome);
  // A batch: each write's outcome up to and including the one that stopped
  // it (StopsBatch), for BatchOutcome. Returns whether every write is
  // applied: then the batch's changes are kept, the last one without
  // `batch_continues`; else nothing of it is.
  bool Decide(const Batch& batch, std::int64_t now_ns,
              std::vector<WriteOutcome>* outcomes);

  const std::vector<Change>& changes() const { return changes_; }
  std::vector<Change>& changes() { return changes_; }
  State& state() { return state_; }

 private:
  // Decides `write` against `state`, appending its change to `out`, whose
  // first element is the group's change number `base`.
  void DecideIn(State& state, std::vector<Change>& out, std::size_t base,
                const FencedWrite& write, std::int64_t now_ns,
                WriteOutcome* outcome);
  // The fence `name` as `state` or the Source has it.
  std::error_code FenceOf(const State& state, const std::string& name,
                          FenceNow* now);
  // The lease state `op` is decided on: the group's word first, then the
  // Source's.
  LeaseState LeaseOf(const LeaseOp& op, std::int64_t now,
                     std::optional<LeaseRecord>* expired);

  Source& source_;
  State state_;
  std::vector<Change> changes_;
};

}  // namespace fencepost::fence
