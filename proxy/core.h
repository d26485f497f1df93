#pragma once

// clang-format off
// Boost 1.74's awaitable.hpp uses std::exchange without including <utility>.
#include <utility>
// clang-format on

#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "fence/token.h"
#include "fence/write.h"
#include "http/coro.h"
#include "proxy/http_types.h"
#include "proxy/problem.h"
#include "proxy/route_context.h"
#include "storage/backend.h"

namespace fencepost::proxy {

// A fenced write of one key, as a door hands it to the core: parsed and
// checked in the door's own dialect (the data port's fields, or S3's).
struct WriteCall {
  storage::WriteKind kind = storage::WriteKind::kPut;
  std::string key;  // decoded, and valid (fence::ValidateKey)
  // nullopt only when none was sent, which observe mode alone allows (the
  // door refuses it otherwise: Core::RefuseToken).
  std::optional<fence::Token> token;
  std::string body;
  // A body streamed to the store instead (storage::WriteRequest's), and
  // its hex SHA-256 when the sender signed it.
  BodySource* body_source = nullptr;
  std::string payload_hash;
  // Or a value the store makes itself (storage::MadeAtStore).
  std::optional<storage::MadeAtStore> made_at_store;
  std::string content_type;  // as sent; empty: none
  // The fields a store keeps with its value (s3::KeptWithObject).
  std::vector<std::pair<std::string, std::string>> object_fields;
  fence::Precondition precondition;  // not read for a forwarding backend
  std::string method;                // for the rejection event: "PUT", ...
  std::string client;                // address:port, for the journal
  // The data port's request, which a forwarding backend (http://) relays
  // as it is; nullptr from the S3 door (whose backend is s3://).
  const Request* original = nullptr;
};

// What became of a WriteCall.
struct Written {
  // Refused or failed: the door renders it (problem+json, or S3's error
  // document). Counted, journalled and logged already.
  std::optional<Problem> problem;
  std::optional<fence::Token> fence_token;  // the fence's, after the write
  std::string etag;                         // the new value's, unquoted
  bool created = false;  // the write made a value that was not there
  // A forwarding backend's own answer (its 412 among them), to relay.
  std::optional<Response> upstream;
};

// A read of one key.
struct ReadCall {
  std::string key;  // decoded, and valid
  bool head = false;
  fence::Precondition precondition;   // not read for a forwarding backend
  std::string range;                  // Range, as sent; empty: none
  const Request* original = nullptr;  // as for WriteCall
  // A large value may come as ReadDone::value.stream (the door hands it
  // to the server with routes::AnswerRead).
  bool may_stream = false;
  // A fenced read's token (fence::ReadAdmitted): below the key's fence the
  // read is refused (409) and nothing is read.
  std::optional<fence::Token> token;
  std::string client;  // address:port, for the log line of a refusal
};

// What a ReadCall found.
struct ReadDone {
  std::optional<Problem> problem;  // not found, a precondition, a failure
  bool not_modified = false;       // If-None-Match matched: 304
  storage::ReadResult value;       // found, its body, tag, token, ...
};

// The typed core both doors call (SPEC "Data port" and "S3 front door"):
// the fenced write and read of one key, the token's verdict, the value's
// preconditions, and every count, journal entry, event and log line they
// make. It knows no dialect: each door parses its own into these calls and
// renders the outcome its own way, so no door builds another's request or
// reads another's answer.
//
// Thread safety: the server's one io thread, as RouteContext.
class Core {
 public:
  explicit Core(RouteContext& context);

  // Whether fencepost runs in observe mode (writes without a token taken).
  bool observe() const;

  // Whether If-Match, If-None-Match and Range go upstream with `original`
  // (http://), where the upstream decides them, instead of being read by
  // the door into the call.
  bool forwards_preconditions() const;

  // The key's fence, checked and advanced, then the value stored or
  // deleted.
  Awaitable<Written> Write(WriteCall call);
  // The value of a key, its preconditions decided.
  Awaitable<ReadDone> Read(ReadCall call);

  // A write the door refuses for its input (`bad`: a malformed If-Match,
  // say): the token is checked first (SPEC "Conditional writes"), so a
  // stale one gets its 409 (counted and journalled) instead of `bad`.
  Awaitable<Problem> RefuseInput(const WriteCall& call, Problem bad);

  // The 409 of a write whose token is already below its fence (counted and
  // journalled as a stale write), or nullopt: for a write announced before
  // it is made (an S3 multipart upload's start), which is decided in its
  // turn when it is made.
  Awaitable<std::optional<Problem>> RefuseIfStale(const WriteCall& call);

  // The problem of a store's failure to answer a request the door relayed
  // to it (`what`: "UploadPart", ...), counted and logged as a write's.
  Problem StoreFailed(const std::string& key, std::string_view what,
                      std::error_code error, std::string_view detail,
                      const storage::StoreError* store_error);

  // The problem of a token that is invalid, or missing where it must be
  // sent (outside observe mode), counted; nullopt when it may go on.
  // `sent` is every value of the token's field.
  std::optional<Problem> RefuseToken(const std::string& key,
                                     fence::TokenState state,
                                     const std::vector<std::string_view>& sent);

 private:
  RouteContext& context_;
};

}  // namespace fencepost::proxy
