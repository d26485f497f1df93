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
  std::string key;  // each key is its own fence
  std::uint64_t token = 0;
  std::int64_t sent_ns = 0;   // before the request was sent
  std::int64_t acked_ns = 0;  // after the answer arrived; unused for kUnknown
  Outcome outcome = Outcome::kUnknown;
  std::optional<std::uint64_t> current_token;  // a 409's current_token
  std::string body;                            // what a PUT stored
  int status = 0;                              // the answer's, for kError
};

// What the server holds for a key when it is read back.
struct KeyState {
  std::uint64_t fence = 0;             // 0: no fence
  std::optional<std::uint64_t> value;  // the stored value's token
  std::string body;                    // the stored value
};

// Checks a history of fenced writes against the model of a fence (a value
// that only rises; a write is accepted iff its token is not below it) and
// against the state read back after a crash. `floors` holds, per key, the
// highest fence token read back before (after earlier restarts): a fence
// never goes below a token it has shown. Returns one line per violation:
//
//  - an acknowledged write was lost: the fence is below a token whose
//    acceptance was acknowledged, or the value is not the work of a PUT or
//    DELETE at or above the highest acknowledged one (a stored value's
//    token is below it, or the value is gone and no DELETE at or above it
//    was sent and left unrefused);
//  - the fence went down: it is below a 409's current_token or a floor;
//  - the stored value's token is above the fence, or its body is not one a
//    PUT with that token sent;
//  - a write (of any kind: they share the fence) was accepted below a token
//    whose acceptance was acknowledged before it was sent;
//  - a 409's current_token is no token any writer presented for that key, or
//    not above the token it refused;
//  - a fence or stored value carries a token nobody presented for that key
//    (a kRefused write presents nothing: it changed nothing);
//  - a write got an answer other than 2xx or 409.
std::vector<std::string> Check(
    const std::vector<Op>& history,
    const std::map<std::string, KeyState>& state,
    const std::map<std::string, std::uint64_t>& floors = {});

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
  // A fence never goes below `token`, which it has shown.
  void Floor(const std::string& key, std::uint64_t token);
  void Add(const Op* begin, const Op* end);
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
  };
  struct Key {
    std::set<std::uint64_t> presented;
    // PUTs by token and body, DELETEs by token.
    std::map<std::uint64_t, std::map<std::string, std::vector<Landed>>> puts;
    std::map<std::uint64_t, std::vector<Landed>> deletes;
    std::optional<std::uint64_t> acked;        // any kind
    std::optional<std::uint64_t> acked_value;  // PUT or DELETE
    // Of the acknowledged PUTs and DELETEs at acked_value: the last Add
    // holding one, and the latest send among them in that Add. The value
    // is the work of a PUT or DELETE that did not end before that send.
    std::size_t last_add = 0;
    std::int64_t last_sent = 0;
    std::uint64_t shown = 0;  // floors, 409s' current_token
  };
  // Whether `w` may have landed after every acknowledged PUT and DELETE at
  // `k.acked_value`.
  static bool MayBeLast(const Key& k, const Landed& w);

  std::map<std::string, Key> keys_;
  std::vector<std::string> pending_;
  std::size_t adds_ = 0;
  std::int64_t last_answer_ns_ = 0;  // the latest answer of the Adds so far
};

}  // namespace fencepost::reliability
