#pragma once

// What an engine is asked to decide and what it answers: a fenced write, a
// lease operation or a batch, and its outcome. Plain data, no storage.

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <system_error>
#include <variant>
#include <vector>

#include "fence/accept.h"
#include "fence/lease.h"
#include "fence/token.h"

namespace fencepost::fence {

// What a write asks of the value it replaces (RFC 9110's If-Match and
// If-None-Match; SPEC "Conditional writes"), by entity tag: the opaque tag
// between the quotes. Tags are strong and compared byte for byte.
struct Precondition {
  // If-Match: only when a value exists and (unless `match_any`, `*`) its
  // tag is one of `match`.
  bool has_match = false;
  bool match_any = false;
  std::vector<std::string> match;
  // If-None-Match: only when no value exists (`none_match_any`, `*`) or
  // its tag is none of `none_match`.
  bool has_none_match = false;
  bool none_match_any = false;
  std::vector<std::string> none_match;

  bool empty() const { return !has_match && !has_none_match; }
};

// The value a write replaces, as its engine read it: whether there is one,
// and its entity tag.
struct ValueNow {
  bool exists = false;
  std::string tag;
};

// The value a write stores with its fence (embedded and etcd backends).
struct ValueOp {
  enum class Kind { kPut, kDelete };
  Kind kind = Kind::kPut;
  std::string key;
  std::string body;
  std::string content_type;  // as sent with a put; empty: none
};

// A token presented to a fence, with the value it writes, if any (none: a
// bump, or a backend that keeps values elsewhere).
struct FencedWrite {
  std::string fence;
  // nullopt only for an observe-mode write that came without a token.
  std::optional<Token> token;
  // Observe mode: apply the write even when the accept rule rejects it.
  // The fence itself still only moves up.
  bool observe = false;
  // Stored atomically with the fence when the write is applied; a put's
  // value carries the write's token.
  std::optional<ValueOp> value;
  // Checked against the value after the token (fence/rules.h). A backend
  // that keeps values elsewhere (fs:) reads the value's tag itself, under
  // the key's turn, into `value_now`; the others' engines read it.
  Precondition precondition;
  std::optional<ValueNow> value_now;
  // Why the fence is written, for watchers (the `cause` of a fence event):
  // empty for a client's write or bump, "election" for the raise to an
  // elected fence's new holder (SPEC "Elections watched at their source").
  std::string cause;
};

// Fenced writes decided in order, each against the fence as the ones before
// it left it, and applied all together or not at all (fence/rules.h). All
// of them go to one engine (one environment, or one etcd transaction).
struct Batch {
  std::vector<FencedWrite> writes;
};

using FenceWrite = std::variant<FencedWrite, LeaseOp, Batch>;

// The fence a write is routed by: its own, its lease's, or a batch's first
// write's ("" for an empty batch).
const std::string& RoutingFence(const FenceWrite& write);

struct WriteOutcome {
  enum class Verdict {
    kAccepted,  // the accept rule accepted it; the fence is at `current`
    kRejected,  // stale: nothing changed
    kObserved,  // observe mode applied a write enforce would have rejected
    kFailed,    // nothing changed; see `error`
    // The token was accepted (or observed) but the write's precondition
    // does not hold: nothing changed; `etag` is the value's tag (empty:
    // no value).
    kPreconditionFailed,
  };
  Verdict verdict = Verdict::kFailed;
  Decision decision;
  std::optional<Token> previous;  // the fence before the write
  std::optional<Token> current;   // the fence after it
  std::int64_t updated_at_ns = 0;
  bool created = false;  // a put that made a value where there was none
  // The value's entity tag after an applied put (empty when the engine
  // keeps no tags), or its current one with kPreconditionFailed.
  std::string etag;
  std::error_code error;
  // For a lease operation: kAccepted when granted, renewed or released,
  // kRejected when denied, not held or past --max-leases; the details are
  // here.
  std::optional<LeaseOutcome> lease;
  // For a batch: kAccepted (or kObserved) when every write was applied,
  // with each one's outcome here; kRejected or kFailed when one was not,
  // with the outcomes up to and including that one (its outcome last), and
  // nothing applied.
  std::vector<WriteOutcome> batch;
};

// How an engine answers a write, once it is durable (or failed).
using WriteDone = std::function<void(WriteOutcome)>;

}  // namespace fencepost::fence
