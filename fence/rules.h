#pragma once

// The rulebook: every verdict fencepost gives, decided here and nowhere
// else. Pure functions: no I/O, no storage, no clock (the time comes in as
// an argument). An engine (the LMDB committer, the etcd store) reads what a
// decision needs, calls these, and persists what they return; the gate of the
// stores that keep values elsewhere (fs:, http://) asks them too.

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <system_error>
#include <vector>

#include "fence/lease.h"
#include "fence/token.h"
#include "fence/write.h"

namespace fencepost::fence {

// --- Fenced writes and bumps ------------------------------------------------

// The verdict on `write` against its fence: `fence` is the fence's highest
// accepted token (nullopt: no fence yet), last moved at `fence_updated_at_ns`
// (Unix ns). The token first: enforce mode accepts when token >= fence
// (fence::Decide), else rejects; observe mode still applies a write the
// rule would reject (kObserved). Then the write's precondition, over
// `value` (the value it replaces, as the engine read it; read it only when
// the precondition is not empty): when it does not hold, the verdict is
// kPreconditionFailed with the value's tag in `etag`, whatever the mode,
// and nothing is applied. A stale token is therefore kRejected whatever
// the precondition. An accepted write sets the fence to its token, and
// one that creates or raises it sets its update time to `now_ns`: a write
// at the fence's own token leaves the fence as it was, so it has nothing to
// log for the fence. Nothing else moves a fence, so a fence never goes
// down. Fills verdict, decision, previous, current, updated_at_ns (and
// etag).
WriteOutcome DecideWrite(const FencedWrite& write, std::optional<Token> fence,
                         std::int64_t fence_updated_at_ns, std::int64_t now_ns,
                         const ValueNow& value = {});

// Whether `precondition` holds over `value` (RFC 9110 13.1.1 and 13.1.2,
// strong comparison): If-Match needs a value whose tag is listed (any, for
// `*`); If-None-Match needs no value (`*`) or one whose tag is not listed.
bool PreconditionHolds(const Precondition& precondition, const ValueNow& value);

// Whether a GET's If-None-Match (its tags, or `*`) matches the value's tag,
// so the answer is 304 Not Modified (RFC 9110 13.1.2: weak comparison,
// which for fencepost's strong tags is the same).
bool NotModified(const Precondition& precondition, const ValueNow& value);

// Whether the write of `outcome` is applied (accepted, or observed): its
// value stored, and its fence record rewritten when it raises the fence.
inline bool Applied(const WriteOutcome& outcome) {
  return outcome.verdict == WriteOutcome::Verdict::kAccepted ||
         outcome.verdict == WriteOutcome::Verdict::kObserved;
}

// Whether `outcome` raised its fence: created it, or took its token up.
// Only a raise rewrites the fence record (to `current` at `updated_at_ns`),
// and it is a change watchers are told of (a `fence` event); a write at
// the fence's own token changes nothing of the fence.
inline bool RaisesFence(const WriteOutcome& outcome) {
  return outcome.verdict == WriteOutcome::Verdict::kAccepted &&
         outcome.decision.accepted &&
         (outcome.decision.creates || outcome.decision.advances);
}

// What watchers are told when a store reports a lease record rewritten
// (etcd's watch: the record before, if any, and after; `noticed`: the
// record is marked as having run out). In order:
//  - "expired": the previous holder's lease ended without a release (it
//    ran out, or its fence went above its token) and the new record is
//    another grant; or only the mark was set;
//  - "granted" (a new token), "renewed" (the same token renewed later) or
//    "released".
// None when nothing a watcher sees changed.
struct StoredLease {
  LeaseRecord record;
  bool noticed = false;
};
std::vector<std::string_view> LeaseChanges(const StoredLease* before,
                                           const StoredLease& after);

// Whether a stored fence went from `before` (nullopt: none) to `after` by a
// raise (created, or its token up): the fence events of a store's feed, as
// RaisesFence decides them for this server's own writes.
inline bool RaisedBetween(std::optional<Token> before, Token after) {
  return !before || after > *before;
}

// --- Values kept elsewhere (fs:, http://, s3://) ----------------------------

// A store that keeps values outside the fence store gets them through one
// gate (storage/value_gate.h): the fence is made durable first, then the
// value is written, one write per fence at a time. These are its verdicts.

// What became of a value the store was asked to write after its fence was
// committed: applied (written, or the store answered), not applied (it
// failed, or the request never left: nothing changed), or unknown (sent and
// no answer: the store may still apply it later).
enum class Landing { kApplied, kNotApplied, kUnknown };

// Seconds a client is told to wait (Retry-After) for a fence held closed
// until `until_ns` (steady ns), at `now_ns`: 0 when it is not held, else at
// least 1, the whole milliseconds left rounded up to seconds.
int HeldSeconds(std::int64_t now_ns, std::int64_t until_ns);

// The verdict on `write` while its fence (at `fence`, moved at
// `fence_updated_at_ns`) is held closed: a stale token is still rejected as
// DecideWrite rejects it (409 first); nullopt for any other write, which
// waits (503 fence-held with HeldSeconds as Retry-After).
std::optional<WriteOutcome> RejectWhileHeld(const FencedWrite& write,
                                            std::optional<Token> fence,
                                            std::int64_t fence_updated_at_ns);

// The precondition decided again over the value as it is once the write
// holds its fence's turn among replicas (`now`; another replica sharing the
// store may have written it since the first read): `committed` (Applied)
// when it still holds, else kPreconditionFailed with the value's tag in
// `etag` and the value not written. The fence keeps the move `committed`
// made, which is always safe.
WriteOutcome RecheckPrecondition(WriteOutcome committed,
                                 const Precondition& precondition,
                                 const ValueNow& now);

// The verdict once the store answered: `committed` (Applied) when the value
// was applied, kFailed with `error` when it was not or its outcome is
// unknown. The fence keeps its move either way.
WriteOutcome AfterLanding(WriteOutcome committed, Landing landing,
                          std::error_code error);

// Whether `landing` holds the fence closed (for the settle time): only an
// unknown outcome, which may still land and overwrite a newer write.
inline bool HoldsFence(Landing landing) { return landing == Landing::kUnknown; }

// --- Batches ----------------------------------------------------------------

// A batch is decided write by write with DecideWrite, each against the fence
// as the writes before it left it. A rejected or failed write stops it; a
// write whose precondition fails does not, so that a stale token later in
// the batch is still the answer (the token is checked first). Unless every
// write is applied, nothing of the batch is.
inline bool StopsBatch(const WriteOutcome& one) {
  return one.verdict == WriteOutcome::Verdict::kRejected ||
         one.verdict == WriteOutcome::Verdict::kFailed;
}

// The batch's outcome from its writes' outcomes, in order, up to and
// including the one that stopped it, if any: that one's verdict and error
// when it stopped; else kPreconditionFailed when a write's precondition
// failed (the first such write is the batch's answer); else kObserved when
// a write was only observed, else kAccepted.
WriteOutcome BatchOutcome(std::vector<WriteOutcome> outcomes);

// The first write of a batch outcome that is not applied (the one a 409,
// 412 or failure names), or outcome.batch.size() when every one is.
std::size_t FirstNotApplied(const WriteOutcome& outcome);

// --- Leases -----------------------------------------------------------------

// What a lease decision needs to know, as the engine read it.
struct LeaseState {
  std::optional<LeaseRecord> record;  // nullopt: never granted
  // Held (granted or renewed, not released) and not run out.
  bool live = false;
  std::int64_t expires_in_ms = 0;  // while live
  // Another lease whose fence is the same and that is live: one live lease
  // per fence, or two leases would take the fence from each other at every
  // grant.
  struct Blocking {
    std::string name;
    LeaseRecord record;
    std::int64_t expires_in_ms = 0;
  };
  std::optional<Blocking> other;
  // The engine counted --max-leases leases live, or being granted, in the
  // step that would commit this operation (OverLeaseLimit).
  bool over_limit = false;
};

struct LeaseDecision {
  // kAccepted with `lease` granted, renewed or released; kRejected with
  // `lease` denied or not held; kFailed with Errc::kTokensExhausted. A
  // grant raises the fence to the new token (`current`, `decision`).
  WriteOutcome outcome;
  // The lease's record to persist, when accepted.
  std::optional<LeaseRecord> next;
};

// SPEC's lease rules, for `op` on the lease whose fence is at `fence`:
//  - an operation that counts against --max-leases while the engine found
//    no room (`state.over_limit`): too many leases, whatever else holds;
//  - release by the live holder of record with its token: released, the
//    fence stays; anything else: not held;
//  - acquire by the holder of record while the fence is not above its token
//    and no other lease is live on the fence: a renewal (same token, ttl
//    from now), also after the lease ran out and nobody took it;
//  - acquire of another holder's live lease, or while another lease is
//    live on the same fence: denied, with when it runs out;
//  - otherwise (never granted, released, run out, or the fence went above
//    the holder's token): a grant with token 1 + max(lease token, fence),
//    which raises the fence; at 2^64-1 the tokens are exhausted.
// `now_ns` (Unix ns) stamps the record; deadlines are the engine's.
LeaseDecision DecideLease(const LeaseOp& op, std::optional<Token> fence,
                          const LeaseState& state, std::int64_t now_ns);

// Whether `op` counts against --max-leases: an acquire, not by the holder
// of record and not of a live lease (which is denied anyway). Renewals and
// releases never do.
bool CountsAgainstLeaseLimit(const LeaseOp& op, const LeaseState& state);
// Whether `op` would make one live lease too many while `held` leases are
// live (or being granted) and `max_leases` are allowed. An engine decides it
// in the step that commits the grant, counting every grant decided before
// it, and passes it to DecideLease as `state.over_limit`.
bool OverLeaseLimit(const LeaseOp& op, const LeaseState& state,
                    std::size_t held, std::size_t max_leases);

}  // namespace fencepost::fence
