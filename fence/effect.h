#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "fence/token.h"

namespace fencepost::fence {

// The rules of a fenced side effect (SPEC "Fenced side effects"): a
// leader's call out (a payment, a webhook) made through fencepost, decided
// in its fence's turn, sent at most once, its answer kept for the retries.

// The record of one call, by target and Idempotency-Key: durable before
// the call goes out (kInFlight), and again once what became of it is known.
struct EffectRecord {
  enum class State : char {
    kInFlight = 'f',  // durable, and the call may be on its way
    kDone = 'd',      // answered: the answer below is replayed to retries
    kUnknown = 'u',   // sent, and no answer: never sent again by fencepost
    kNotSent = 'n',   // it never left (connection refused): may be sent
  };
  State state = State::kInFlight;
  std::string fence;
  Token token = 0;
  // Hex SHA-256 of the method, the rest of the path, the query and the
  // body (EffectRequestHash): what makes a retry the same request.
  std::string request_hash;
  std::int64_t created_at_ns = 0;  // Unix ns: for the retention
  // kInFlight: the Unix ns after which the call can no longer be on its
  // way (sent from created_at_ns within --upstream-timeout, then settled):
  // until then another replica's record in flight is a call in progress.
  std::int64_t deadline_ns = 0;
  // kDone: the target's answer (the body at most --max-body).
  int status = 0;
  std::string content_type;
  std::string body;
};

// The stored form; DecodeEffect is false for bytes EncodeEffect did not
// write.
std::string EncodeEffect(const EffectRecord& record);
bool DecodeEffect(std::string_view bytes, EffectRecord* record);

// What a request for an effect gets, given the record kept under its target
// and Idempotency-Key (nullptr: none) and its own request hash. The token
// is decided first, by the accept rule, before any of these.
enum class EffectVerdict {
  kSend,            // no record, or one that never left: send it
  kReplay,          // the same request, answered: its answer again
  kKeyReused,       // another request under the same key: 422
  kInProgress,      // the same request, in flight in this process: 409
  kOutcomeUnknown,  // the same request, sent with no answer known: 409
};
// `in_flight_here`: whether this process is making that record's call now.
// A record in flight is in progress while this process makes its call, or
// (another replica's) until its deadline, at `now_ns` (Unix ns); past it,
// an unknown outcome: the process that made the call stopped, and the call
// may have reached the target.
EffectVerdict DecideEffect(const EffectRecord* record,
                           std::string_view request_hash, bool in_flight_here,
                           std::int64_t now_ns);
// Whether `record`'s call may be on its way (DecideEffect's kInProgress).
bool InProgress(const EffectRecord& record, bool in_flight_here,
                std::int64_t now_ns);

// Whether `key` is an Idempotency-Key: 1 to 255 visible ASCII characters.
bool IsIdempotencyKey(std::string_view key);

// Whether `name` names an effect target (--effect-target NAME=URL): 1 to 64
// of A-Z, a-z, 0-9, '.', '_' and '-'.
bool IsEffectTargetName(std::string_view name);

// Where the records live: as values of the fence store (stored with the
// fence's raise in one durable commit, through the same log), under keys no
// data port request can name, for a key never has an empty segment.
inline constexpr std::string_view kEffectRecordPrefix = "//effects/";
// The record key of `target`'s effect under Idempotency-Key `id`.
std::string EffectRecordKey(std::string_view target, std::string_view id);
// The target and Idempotency-Key of a record key; false for another key.
bool ParseEffectRecordKey(std::string_view key, std::string* target,
                          std::string* id);

// Whether `rest`, the path an effect's call adds to its target's URL (what
// follows /v1/effects/NAME, without the query), stays under that URL's
// path, however the target reads it (a target's path is how its calls are
// narrowed): empty, or '/' and segments none of which, percent-decoded, is
// empty (but the last: a trailing '/'), holds '/' or '\\', or is "." or
// ".." before a ';' (a path parameter, which some servers drop).
bool StaysUnderTarget(std::string_view rest);

// What a request's hash is taken over (EffectRecord::request_hash): its
// method, Fence-Key, the rest of its path, its query and its body, each
// length-prefixed, so that no two requests share the text.
std::string EffectRequestText(std::string_view method, std::string_view fence,
                              std::string_view rest, std::string_view query,
                              std::string_view body);

// The `state` of a record as the admin port names it: "in-flight" while
// InProgress, "unknown" for a record in flight past that.
std::string_view EffectStateName(const EffectRecord& record,
                                 bool in_flight_here, std::int64_t now_ns);

}  // namespace fencepost::fence
