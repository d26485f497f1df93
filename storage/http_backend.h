#pragma once

#include <boost/asio/io_context.hpp>
#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "storage/backend.h"
#include "storage/backend_spec.h"
#include "storage/fences.h"
#include "storage/http_pool.h"
#include "storage/value_gate.h"

namespace fencepost::storage {

// --backend http://HOST:PORT[/BASE] (or https://, the upstream's certificate
// verified): a legacy store behind the fence. The
// upstream target is BASE, '/', the key's canonical path (fence::EncodeKey)
// and the request's query: whatever spelling the client used, the upstream
// is asked for exactly the resource that was fenced. GET and HEAD
// pass through; PUT, DELETE, POST and PATCH are fenced through the gate of
// values kept elsewhere (ValueGate): the write holds its fence's turn, the
// fence is made durable, then the request is forwarded, so writes to one
// fence reach the upstream one at a time, in token order.
//
// Outcomes: a refused connection, or a failure before any byte of the
// request was sent, is 502 (Errc::kUpstreamFailed) and nothing was
// acknowledged. A timeout or reset after bytes were sent is 504
// (Errc::kOutcomeUnknown): the upstream may still apply the write, so the
// connection is closed and the fence is held closed (503 with Retry-After,
// Errc::kFenceHeld) for `settle` from then, so a newer write cannot be
// acknowledged and then overwritten by the late one. A stale token still
// gets 409 first; bumps are not held. What remains: a proxy cannot recall a
// request already on the wire, so an upstream that applies a write later
// than `settle` after its connection closed can still overwrite a newer one.
//
// With fences shared by replicas (--fence-store etcd://), the write also
// takes the fence's turn among replicas with its fence commit (Fences::
// CommitInTurn), so two replicas never forward writes under one fence at
// once; the turn ends when the upstream has answered, or `settle` after an
// unknown outcome, so every replica waits it out (503 fence-held).
//
// Hop-by-hop fields (RFC 9110 section 7.6.1: Connection and the fields it
// names, Keep-Alive, Proxy-Connection, TE, Trailer, Transfer-Encoding,
// Upgrade) are not forwarded either way; Host names the upstream;
// Fencing-Token is sent only with `forward_token`. An answer's Location and
// Content-Location never send a client to the upstream around the fence:
// one that names the upstream's resource of a key (absolute, or relative to
// the target it answers) is rewritten to fencepost's own path of that key,
// "/" + fence::EncodeKey(key) and its query; any other is dropped.
// Connections are kept alive and reused by idempotent requests (never by a
// conditional PUT or DELETE: a retry could be refused for the write's own
// effect); a reused connection that turns out closed before any answer is
// retried once on a new one. POST and PATCH always take a new connection.
// A fence the write raised is told (Fences::TellChanges) once its commit is
// durable, before the forward, whatever the upstream then answers.
//
// Errors, besides Backend's LMDB ones: storage::Errc::kUpstreamFailed (Read
// and Write: nothing reached the upstream), kOutcomeUnknown (Write: the
// upstream may or may not apply it) and kFenceHeld (Write: retry after
// WriteResult::retry_after seconds). An upstream's own error status is not
// an error: it is relayed in `upstream`.
//
// Thread safety: every call on the server's one io thread.
class HttpBackend : public Backend, private ValueStore {
 public:
  struct Options {
    BackendSpec upstream;  // of Kind::kHttp (see ParseBackendSpec)
    // https://: the CA the upstream's certificate must chain to (empty: the
    // system's); its name is verified and sent as SNI.
    std::string tls_ca;
    std::chrono::milliseconds timeout{10000};
    std::chrono::milliseconds settle{2000};
    bool forward_token = false;
    // Drop Authorization before forwarding: set when fencepost checks bearer
    // tokens itself, so its credential never reaches the upstream.
    bool strip_authorization = false;
    // Hold every fence this long from the start: writes the last process
    // forwarded may still land (ValueGate::Options::hold_at_start).
    std::chrono::milliseconds hold_at_start{0};
    // Test-only: no hold after an unknown outcome, so a test can show the
    // overwrite the hold prevents. Only the test build of the server
    // (fencepost_test_switches) can set it; the shipped binary cannot.
    bool disable_gate = false;
  };

  // Resolves the upstream's HOST at once. Throws std::runtime_error when it
  // cannot be resolved.
  HttpBackend(boost::asio::io_context& io, const Options& options,
              Fences& fences);
  ~HttpBackend() override;

  std::string_view name() const override { return "http"; }
  bool supports_post_patch() const override { return true; }
  bool forwards_preconditions() const override { return true; }
  Awaitable<ReadResult> Read(const ReadRequest& request) override;
  Awaitable<WriteResult> Write(WriteRequest request) override;
  Awaitable<bool> Ready() override;
  std::string not_ready_reason() const override { return not_ready_; }
  std::chrono::milliseconds HoldLeft() const override {
    return gate_.HoldLeft();
  }

 private:
  using Sent = HttpPool::Sent;

  static HttpPool::Options PoolOptions(boost::asio::io_context& io,
                                       const Options& options,
                                       boost::asio::ssl::context* tls);
  HttpRequest Upstream(const HttpRequest& original, std::string_view key) const;
  // Fencepost's own reference for `value`, a Location or Content-Location of
  // the answer to `upstream_target`, or nullopt (see the class comment).
  std::optional<std::string> OwnReference(
      std::string_view value, std::string_view upstream_target) const;
  // Rewrites or drops `response`'s Location and Content-Location.
  void OwnLocations(HttpResponse& response,
                    std::string_view upstream_target) const;
  // ValueStore: forwards the write (the upstream decides its
  // preconditions, so nothing is read before it).
  Awaitable<Stored> Store(const WriteRequest& request,
                          const fence::ValueNow* seen) override;

  Options options_;
  Fences& fences_;
  std::string host_header_;
  std::string base_;
  std::unique_ptr<boost::asio::ssl::context> tls_;  // https:// only
  HttpPool pool_;
  ValueGate gate_;
  std::string not_ready_;  // why the last Ready() said no
};

}  // namespace fencepost::storage
