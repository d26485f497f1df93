#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

namespace fencepost::reliability {

// One fenced write as a client saw it.
struct Op {
  enum class Kind {
    kPut,     // stores `body`
    kDelete,  // removes the value; the fence is set and stays
    kBump,    // advances the fence only (PUT /v1/fences/{key})
  };
  enum class Outcome {
    kAccepted,  // 2xx: acknowledged
    kRejected,  // 409 with current_token
    kUnknown,   // no answer: the server died, or the client gave up
    kRefused,   // refused before any change: a 503 fence-held (http://)
    kError,     // any other answer (4xx, 5xx): never expected here
  };
  Kind kind = Kind::kPut;
  std::string key;  // guarded by its own fence, or a Checker::Scope's
  std::uint64_t token = 0;
  std::int64_t sent_ns = 0;   // before the request was sent
  std::int64_t acked_ns = 0;  // after the answer arrived; unused for kUnknown
  Outcome outcome = Outcome::kUnknown;
  std::optional<std::uint64_t> current_token;  // a 409's current_token
  std::string body;                            // what a PUT stored
  int status = 0;                              // the answer's, for kError
};

// One read under load, as a client saw it: GET /KEY (the value) on the
// data port, or GET /v1/fences/KEY (the fence guarding the key) on the
// admin port. Only answered reads are recorded.
struct Read {
  enum class Kind { kValue, kFence };
  Kind kind = Kind::kValue;
  std::string key;
  std::int64_t sent_ns = 0;      // before the request was sent
  std::int64_t answered_ns = 0;  // after the answer arrived
  int status = 0;                // 200, 404 (none), anything else: an error
  // With a 200: the fence's token, or the value's Fencing-Token.
  std::optional<std::uint64_t> token;
  std::string body;  // the value, with a 200
};

// What the server holds for a key when it is read back.
struct KeyState {
  std::uint64_t fence = 0;             // of the fence guarding it; 0: none
  std::optional<std::uint64_t> value;  // the stored value's token
  std::string body;                    // the stored value
};

// Checks a history of fenced writes against the model of a fence (a value
// that only rises; a write is accepted iff its token is not below it; the
// writes to every key a fence guards share it) and against the state read
// back after a crash. `floors` holds, per key, the highest fence token read
// back before (after earlier restarts): a fence never goes below a token
// it has shown. Returns one line per violation:
//
//  - an acknowledged write was lost: the fence is below a token whose
//    acceptance was acknowledged, or a key's value (or its absence) is not
//    the work of a PUT or DELETE that may have landed after every
//    acknowledged PUT or DELETE of the key at the highest token (a stored
//    value's token is below that token; or no such write, with the value's
//    token and body or a DELETE at or above it and within the fence, may
//    have landed last: one answered before another was sent, or given up
//    on at an earlier kill, cannot have);
//  - the fence went down: it is below a 409's current_token or a floor;
//  - the stored value's token is above the fence;
//  - a write (of any kind, to any key the fence guards) was accepted, or a
//    409 showed a current_token, below a token the fence had shown before
//    it was sent (an acknowledged acceptance, a 409's current_token, a
//    floor);
//  - keys guarded by one fence read different tokens for it;
//  - a 409's current_token is no token any writer presented to that fence
//    before the 409 came back, or not above the token it refused;
//  - a fence or stored value carries a token nobody presented to it (a
//    kRefused write presents nothing: it changed nothing);
//  - a write got an answer other than 2xx or 409.
//
// Reads under load (Checker::Add) are violations when:
//
//  - a fence read shows a token below one the fence had shown (an
//    acknowledged write, a 409's current_token, another read, a floor)
//    before the read was sent, or none at all after it had shown one;
//  - a value read shows a token below that of a PUT or DELETE of the key
//    acknowledged before the read was sent, or no value after such a PUT,
//    unless a DELETE at or above its token was sent before the read's
//    answer;
//  - a read shows a token (or a value: token and body) that no write
//    presented to that fence (PUT to that key) before the read's answer;
//  - a read got an answer other than 200 or 404.
//
// With Rejections::kMayLag (replicas sharing fences in etcd, which refuse
// from a cache: docs/replicas.md), a 409's current_token is the highest
// token its replica had seen, which may be below what the fence showed
// elsewhere before the 409 was sent; it is still a token the fence had, so
// it still counts as shown for what comes after it.
enum class Rejections { kCurrent, kMayLag };
std::vector<std::string> Check(
    const std::vector<Op>& history,
    const std::map<std::string, KeyState>& state,
    const std::map<std::string, std::uint64_t>& floors = {},
    Rejections rejections = Rejections::kCurrent);

// Check, fed a history in parts and checked after each: it keeps, per key,
// what later checks need (the tokens presented, the PUTs and DELETEs that
// could still be the last to land, the highest acknowledged tokens, the
// highest token shown), so a check walks the keys and the new writes, not
// the whole history again. Every write of an Add must have been sent after
// every write of the Adds before it was answered or given up on (a crash
// loop's cycles: Add throws std::invalid_argument otherwise), and each
// write is added once.
class Checker {
 public:
  // The keys starting with `prefix` share the fence `prefix` (the longest
  // matching prefix wins), whether or not a write has named it yet.
  void Scope(std::string prefix) { scopes_.push_back(std::move(prefix)); }
  // See Rejections (kCurrent unless told).
  void Rejecting(Rejections rejections) { rejections_ = rejections; }
  // Every Check follows a restart, whose server is gone: a write without an
  // answer has landed by then or never will. One whose fence reads below
  // its token did not land, so from then on its token and its value count
  // as nobody's (a later read showing them is a violation).
  void CheckAfterRestarts() { after_restarts_ = true; }
  // The fence guarding `key` never goes below `token`, which it has shown.
  void Floor(const std::string& key, std::uint64_t token);
  // `reads`: the reads made while the writes of `part` ran. A reader sees
  // a write only once it is durable (docs/durability.md), so each read is
  // held to the writes answered before it was sent and to those sent before
  // it was answered (Check's rules for reads, below), and what it showed
  // of the fence (a fence's token; a value's token, which the fence had
  // reached) counts as shown from its answer on, as a 409's current_token.
  void Add(const std::vector<Op>& part, const std::vector<Read>& reads = {});
  // The violations in the writes added since the last Check (an answer
  // other than 2xx or 409, an order broken, a 409 naming an impossible
  // token), and those of `state` against every write added.
  std::vector<std::string> Check(const std::map<std::string, KeyState>& state);

 private:
  // A PUT or DELETE that was not refused: the value may be its work.
  struct Landed {
    std::size_t add = 0;    // which Add it came in
    bool answered = false;  // it was answered (at acked_ns)
    std::int64_t acked_ns = 0;
    std::int64_t sent_ns = 0;
  };
  struct Fence {
    // Each token presented, with when each write presenting it was sent.
    std::map<std::uint64_t, std::multiset<std::int64_t>> presented;
    // With after_restarts_: the writes without an answer since the last
    // Check, not yet known to have landed or not.
    std::vector<Op> unanswered;
    std::optional<std::uint64_t> acked;  // any kind, any key it guards
    std::uint64_t shown = 0;             // floors, 409s' current_token
  };
  struct Value {
    // PUTs by token and body, DELETEs by token.
    std::map<std::uint64_t, std::map<std::string, std::vector<Landed>>> puts;
    std::map<std::uint64_t, std::vector<Landed>> deletes;
    std::optional<std::uint64_t> acked;  // of its PUTs and DELETEs
    // Of the acknowledged PUTs and DELETEs at `acked`: the last Add holding
    // one, and the latest send among them in that Add. The value is the
    // work of a PUT or DELETE that did not end before that send.
    std::size_t last_add = 0;
    std::int64_t last_sent = 0;
  };
  // Whether `w` may have landed after every acknowledged PUT and DELETE at
  // `v.acked`.
  static bool MayBeLast(const Value& v, const Landed& w);
  std::string FenceOf(const std::string& key) const;
  // The violations of `reads` against the writes of earlier Adds and of
  // `part` (already in values_ and presented, not yet in acked or shown).
  void CheckReads(const std::vector<Op>& part, const std::vector<Read>& reads);
  class ShownBefore;
  // CheckReads for a read of a value that showed `token` (0: none), held to
  // `acks`: this part's acknowledged PUTs and DELETEs of its key.
  void CheckValueRead(const Read& r, std::uint64_t token,
                      const ShownBefore& acks);
  // Forgets `op`, a write without an answer that did not land.
  void Retire(const Op& op);

  std::map<std::string, Fence> fences_;
  std::map<std::string, Value> values_;  // by key
  std::vector<std::string> scopes_;
  Rejections rejections_ = Rejections::kCurrent;
  bool after_restarts_ = false;
  std::vector<std::string> pending_;
  std::size_t adds_ = 0;
  std::int64_t last_answer_ns_ = 0;  // the latest answer of the Adds so far
};

}  // namespace fencepost::reliability
