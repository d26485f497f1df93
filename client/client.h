#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>
#include <utility>
#include <vector>

namespace fencepost::client {

// Why a request got no HTTP response. Any response, whatever its status,
// is not an error at this level: the caller reads the status.
enum class Errc {
  kResolveFailed = 1,  // the host name did not resolve
  kConnectFailed,      // no TCP connection (refused, unreachable, reset)
  kTlsFailed,          // the TLS handshake failed or the peer is not trusted
  kTimedOut,           // the request's deadline passed before its answer
  kConnectionLost,     // the connection broke or closed mid-request
  kBadResponse,        // unreadable HTTP, or a body over Options::max_body
  kBadRequest,         // Send() was given a method, target or field that
                       // cannot go on the wire as it is (nothing was sent)
};
const std::error_category& client_category();
std::error_code make_error_code(Errc e);

// A base URL: "http://HOST[:PORT]" or "https://HOST[:PORT]", optionally
// with a trailing "/". HOST is a name, an IPv4 literal or a bracketed IPv6
// literal; PORT defaults to 80 and 443.
struct Url {
  bool tls = false;
  std::string host;  // IPv6 literals without brackets
  std::uint16_t port = 0;

  // Throws std::invalid_argument, naming the problem, for another scheme,
  // user info, a path other than "/", a query, a fragment, an empty host,
  // or a port that is not 1 to 65535.
  static Url Parse(std::string_view text);
  std::string ToString() const;  // "http://127.0.0.1:7401"
};

// A key or lease name as it goes into a request path: unreserved characters
// (RFC 3986 section 2.3) and '/' as they are, every other byte as an
// upper-case %XX escape. The server decodes it once back to the key.
std::string EncodeKey(std::string_view key);

struct Response {
  int status = 0;
  // Field names in lower case; a repeated field's values joined by ", ".
  std::map<std::string, std::string> headers;
  std::string body;

  // The field's value, "" when absent.
  std::string header(const std::string& lower_case_name) const;
};

// The outcome of one request: either `error` is set (no response arrived;
// `detail` says what happened, for people) or `response` holds the answer.
struct Result {
  std::error_code error;
  std::string detail;
  Response response;

  bool ok() const { return !error; }
};

using Headers = std::vector<std::pair<std::string, std::string>>;

// What a write asks of the value it replaces (SPEC "Conditional writes"),
// checked by the server after the token: 412 precondition-failed when it
// does not hold, and nothing changes.
struct Condition {
  // If-Match: an entity tag as the server spells it in ETag, quotes and
  // all (Get's response.header("etag")), or "*" for "a value exists"; ""
  // for none.
  std::string if_match;
  // If-None-Match: *: only when there is no value (create-only).
  bool if_none_match = false;
};

// One write of a batch (SPEC "Batches"): a PUT of `value` to `key`, or a
// DELETE of `key` (its `value` is not sent), with its condition, if any.
struct BatchOp {
  enum class Kind { kPut, kDelete };
  Kind kind = Kind::kPut;
  std::string key;    // as it is, not percent-encoded; valid UTF-8
  std::string value;  // kPut: the bytes to store, any bytes (even none)
  Condition condition;
};

// A fenced side effect (SPEC "Fenced side effects"): `method` with `body`
// to the server's effect target `target` (its --effect-target NAME=URL), at
// URL + "/" + path + "?" + query, sent at most once per `idempotency_key`
// and only while `token` is not below the fence of `fence_key`.
struct EffectCall {
  std::string target;           // NAME: 1 to 64 of A-Z a-z 0-9 . _ -
  std::string path;             // REST, "" for none; URL text: escapes are
                                // kept, other bytes a URL cannot hold encoded
  std::string query;            // "" for none; URL text as `path`
  std::string method = "POST";  // POST, PUT, PATCH or DELETE
  std::uint64_t token = 0;
  std::string fence_key;        // a key, raw UTF-8 (e.g. the lease's name)
  std::string idempotency_key;  // 1 to 255 visible ASCII characters
  std::string content_type;     // "" for none
  std::string body;
};

// The answer to an EffectCall. Either `error` is set (no answer arrived, as
// in Result; a call whose answer was lost may have been sent: send the same
// call again to learn its outcome), or:
//   - `relayed`: the target answered, any status; `replayed` when this is
//     the recorded answer of an earlier call (nothing was sent this time);
//     the server marks every relayed answer with Effect-Replayed and never
//     its own.
//   - not `relayed`: fencepost's own answer, a problem (ParseProblem on
//     `body`): 409 stale-token (nothing sent), 422 idempotency-key-reused,
//     409 effect-in-progress, 409 effect-outcome-unknown (sent earlier, no
//     answer known: never sent again until an admin forgets it), 502
//     upstream-failed (not sent; a repeat sends it), 504
//     upstream-outcome-unknown (sent, no answer), 404 (no such target),
//     428, 400, 413, 401; or a server without effect targets answering the
//     path as a key.
struct EffectResult {
  std::error_code error;
  std::string detail;
  bool relayed = false;
  bool replayed = false;
  int status = 0;
  std::string content_type;
  std::string body;

  bool ok() const { return !error; }
};

// A blocking HTTP/1.1 client for one fencepost port: one base URL, one
// kept-alive connection, every request bounded by a deadline that covers
// resolving, connecting, the TLS handshake, writing and reading.
//
// A request on a kept-alive connection that the server has closed meanwhile
// is sent again, once, on a new connection, but only when it cannot have
// reached the server: its write failed and no answer came (a server may
// answer, 413 say, before reading the whole request, then close: that
// answer is returned), or (GET and HEAD only) the server
// closed the connection before answering a single byte. Before reusing a
// connection the client also checks that the server has not closed it
// while it was idle. A PUT or DELETE whose answer was lost is never resent;
// its caller decides.
//
// Over https the server's certificate must chain to Options::ca_file (or
// the system's CAs) and name the URL's host (DNS name or IP address); the
// host name is sent as SNI.
//
// Thread safety: a Client is used by one thread at a time; requests on
// different Clients are independent.
class Client {
 public:
  struct Options {
    std::string url;           // see Url
    std::string ca_file;       // https: PEM CAs to trust; "" for the system's
    std::string bearer_token;  // "": no Authorization field
    std::chrono::milliseconds timeout{10000};      // per request, all phases
    std::size_t max_body = std::size_t{64} << 20;  // longest response body
  };

  // Throws std::invalid_argument for a bad URL and std::runtime_error when
  // ca_file cannot be loaded. Does not connect yet.
  explicit Client(Options options);
  ~Client();
  Client(Client&&) noexcept;
  Client& operator=(Client&&) noexcept;

  const Url& url() const;
  // The deadline of later requests: each ends at most `timeout` after it
  // starts.
  void set_timeout(std::chrono::milliseconds timeout);
  std::chrono::milliseconds timeout() const;

  // Data port. `token` goes in the Fencing-Token field.
  Result Put(std::string_view key, std::uint64_t token, std::string body);
  Result Delete(std::string_view key, std::uint64_t token);
  // The same with a precondition: 412 (with current_etag) when it does not
  // hold. A read-modify-write reads with Get, keeps its ETag and writes
  // with Condition{etag}, again from the read after a 412.
  Result Put(std::string_view key, std::uint64_t token, std::string body,
             const Condition& condition);
  Result Delete(std::string_view key, std::uint64_t token,
                const Condition& condition);
  Result Get(std::string_view key);
  // A fenced read: 409 stale-token (current_token set) when `token` is below
  // the key's fence, so a leader that was replaced learns it on a read too;
  // at or above it, the value as Get answers it (the fence does not move).
  Result Get(std::string_view key, std::uint64_t token);
  // POST / with Fencing-Token and {"ops": [...]}: every op of `ops`, in
  // order, applied in one transaction or none (SPEC "Batches"; lmdb or
  // etcd backend). Values go base64-encoded; keys as JSON strings (a key that
  // is not UTF-8 makes a body the server refuses). Nothing is checked here: the
  // server answers 200 with the results document (ParseBatchResults), 409
  // stale-token naming the first stale op's key and current_token (nothing was
  // applied), 400 for a bad body, op or key, no ops, more than 1000, a key
  // named twice or keys of different --lmdb-shards shards, 413 for a body over
  // its --max-body, and 405 with fs: or http:// backends. Like a PUT, a batch
  // whose answer was lost is never resent.
  Result Batch(std::uint64_t token, const std::vector<BatchOp>& ops);

  // POST|PUT|PATCH|DELETE /v1/effects/NAME[/REST][?QUERY] with
  // Fencing-Token, Fence-Key and Idempotency-Key (see EffectCall). A target
  // name or method not of the forms above is kBadRequest, nothing sent.
  EffectResult Effect(const EffectCall& call);

  // Admin port. Bodies are the documents of client/documents.h.
  Result GetFence(std::string_view key);
  // PUT /v1/fences/{key} with Fencing-Token: advances the fence.
  Result Bump(std::string_view key, std::uint64_t token);
  // PUT /v1/leases/{name} {"holder": holder, "ttl_ms": ttl}: acquires or
  // renews. 200 with the lease document, or 409 lease-held.
  Result AcquireLease(std::string_view name, std::string_view holder,
                      std::chrono::milliseconds ttl);
  // DELETE /v1/leases/{name} with Fencing-Token and {"holder": holder}:
  // 204, or 409 lease-not-held.
  Result ReleaseLease(std::string_view name, std::string_view holder,
                      std::uint64_t token);
  Result GetLease(std::string_view name);

  // Any request. `target` is in origin form ("/path?query"), already
  // encoded; Host (the URL's host, with ":PORT" unless it is the scheme's
  // default), User-Agent, Content-Length and (when configured)
  // Authorization are added. A method or field name that is not an HTTP
  // token, a target with a space or control byte, or a field value with CR,
  // LF or NUL is not sent: kBadRequest.
  Result Send(std::string_view method, std::string_view target,
              const Headers& headers = {}, std::string body = {});

  // Closes the kept-alive connection, if any.
  void Close();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace fencepost::client

namespace std {
template <>
struct is_error_code_enum<fencepost::client::Errc> : true_type {};
}  // namespace std
