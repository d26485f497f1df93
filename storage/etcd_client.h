#pragma once

// clang-format off
// Boost 1.74's awaitable.hpp uses std::exchange without including <utility>.
#include <utility>
// clang-format on

#include <boost/asio/awaitable.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "http/json.h"
#include "storage/etcd_spec.h"

namespace boost::asio::ssl {
class context;
}

namespace fencepost::storage {

// etcd's v3 API through its JSON gateway (POST /v3/kv/range, /v3/kv/txn),
// over HTTP/1.1 keep-alive connections to one endpoint at a time; with
// etcds://, over TLS 1.2+ that verifies etcd's certificate for the
// endpoint's host (or IP address), and presents a client certificate when
// the spec names one.
//
// A call that cannot connect, or whose connection fails before anything was
// sent, moves to the next endpoint and tries again there, each endpoint at
// most once per call. A call that fails after its request was sent (a
// timeout, a reset, an etcd error such as "request timed out" without
// quorum) is not retried unless it is `idempotent` (a read): etcd may still
// apply it, so the caller decides.
// Either way the next call starts at the next endpoint, so a member that
// lost its quorum is left behind.
//
// Thread safety: every call on the io thread of the io_context it was made
// with.
class EtcdClient {
 public:
  struct Reply {
    bool ok = false;  // 200 with a JSON object
    // With !ok: whether the request may have reached etcd (its outcome is
    // unknown), and what went wrong.
    bool maybe_applied = false;
    std::string error;
    http::JsonValue json;
  };
  // Called after every exchange with its API path and duration.
  using Observer =
      std::function<void(std::string_view path, double seconds, bool ok)>;

  // Throws std::runtime_error when a TLS file of `spec` cannot be loaded.
  EtcdClient(boost::asio::io_context& io, EtcdSpec spec,
             std::chrono::milliseconds timeout, Observer observer = {});
  ~EtcdClient();

  // POSTs `body` to `path` (e.g. "/v3/kv/txn"). Never throws.
  boost::asio::awaitable<Reply> Call(std::string_view path, std::string body,
                                     bool idempotent = false);

  const EtcdSpec& spec() const { return spec_; }

 private:
  struct Attempt;
  struct Conn;
  boost::asio::awaitable<Attempt> Once(std::size_t endpoint,
                                       std::string_view path,
                                       const std::string& body);

  boost::asio::io_context& io_;
  EtcdSpec spec_;
  std::chrono::milliseconds timeout_;
  Observer observer_;
  std::size_t current_ = 0;  // the endpoint calls start at
  // Idle connections to endpoint `idle_endpoint_` (a move drops them).
  std::size_t idle_endpoint_ = 0;
  std::unique_ptr<boost::asio::ssl::context> tls_;
  std::vector<std::unique_ptr<Conn>> idle_;
};

// base64 (RFC 4648 section 4, padded), as etcd's JSON carries bytes.
std::string EncodeBase64(std::string_view bytes);

}  // namespace fencepost::storage
