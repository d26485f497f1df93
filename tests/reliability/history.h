#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace fencepost::reliability {

// One fenced write as a client saw it.
struct Op {
  enum class Outcome {
    kAccepted,  // 2xx: acknowledged
    kRejected,  // 409 with current_token
    kUnknown,   // no answer (the server died) or another error
  };
  std::string key;  // each key is its own fence
  std::uint64_t token = 0;
  std::int64_t sent_ns = 0;   // before the request was sent
  std::int64_t acked_ns = 0;  // after the answer arrived; unused for kUnknown
  Outcome outcome = Outcome::kUnknown;
  std::optional<std::uint64_t> current_token;  // a 409's current_token
};

// What the server holds for a key after a restart.
struct KeyState {
  std::uint64_t fence = 0;             // 0: no fence
  std::optional<std::uint64_t> value;  // the stored value's token
};

// Checks a history of fenced writes against the model of a fence (a value
// that only rises; a write is accepted iff its token is not below it) and
// against the state read back after a crash. Returns one line per violation:
//
//  - an acknowledged write was lost: the fence, or the token of the stored
//    value, is below a token whose acceptance was acknowledged;
//  - a write was accepted below a token whose acceptance was acknowledged
//    before it was sent;
//  - a 409's current_token is no token any writer presented for that key, or
//    not above the token it refused;
//  - a fence or stored value carries a token nobody presented for that key.
std::vector<std::string> Check(const std::vector<Op>& history,
                               const std::map<std::string, KeyState>& state);

}  // namespace fencepost::reliability
