#pragma once

// The rulebook: every verdict fencepost gives, decided here and nowhere
// else. Pure functions: no I/O, no storage, no clock (the time comes in as
// an argument). An engine (the LMDB committer, the etcd store) reads what a
// decision needs, calls these, and persists what they return; the `http://`
// backend's gate asks the same accept rule.

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "fence/lease.h"
#include "fence/token.h"
#include "fence/write.h"

namespace fencepost::fence {

// --- Fenced writes and bumps ------------------------------------------------

// The verdict on `write` against its fence: `fence` is the fence's highest
// accepted token (nullopt: no fence yet), last moved at `fence_updated_at_ns`
// (Unix ns). Enforce mode: accepted when token >= fence (fence::Decide),
// else rejected. Observe mode: a write the rule would reject is still
// applied (kObserved). An accepted write sets the fence to its token at
// `now_ns`; nothing else moves a fence, so a fence never goes down. Fills
// verdict, decision, previous, current and updated_at_ns.
WriteOutcome DecideWrite(const FencedWrite& write, std::optional<Token> fence,
                         std::int64_t fence_updated_at_ns, std::int64_t now_ns);

// Whether the write of `outcome` is applied: its value stored and, when
// accepted, its fence record rewritten (accepted, or observed).
inline bool Applied(const WriteOutcome& outcome) {
  return outcome.verdict == WriteOutcome::Verdict::kAccepted ||
         outcome.verdict == WriteOutcome::Verdict::kObserved;
}

// Whether `outcome` rewrites its fence record (to `current` at
// `updated_at_ns`).
inline bool MovesFence(const WriteOutcome& outcome) {
  return outcome.verdict == WriteOutcome::Verdict::kAccepted &&
         outcome.decision.accepted;
}

// --- Batches ----------------------------------------------------------------

// A batch is decided write by write with DecideWrite, each against the fence
// as the writes before it left it, and stops at the first write that is not
// applied (rejected or failed): then nothing of it is applied.
inline bool StopsBatch(const WriteOutcome& one) { return !Applied(one); }

// The batch's outcome from its writes' outcomes, in order, up to and
// including the one that stopped it, if any: that one's verdict and error
// when it stopped; else kObserved when a write was only observed, else
// kAccepted.
WriteOutcome BatchOutcome(std::vector<WriteOutcome> outcomes);

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
// live and `max_leases` are allowed.
bool OverLeaseLimit(const LeaseOp& op, const LeaseState& state,
                    std::size_t held, std::size_t max_leases);

}  // namespace fencepost::fence
