#pragma once

// clang-format off
// Boost 1.74's awaitable.hpp uses std::exchange without including <utility>.
#include <utility>
// clang-format on

#include <boost/asio/io_context.hpp>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "codec/base64.h"
#include "http/coro.h"
#include "http/json.h"
#include "http/message.h"
#include "storage/etcd_api.h"
#include "storage/etcd_spec.h"

namespace boost::asio::ssl {
class context;
}

namespace fencepost::storage {

class HttpPool;

// etcd's v3 API through its JSON gateway (POST /v3/kv/range, /v3/kv/txn),
// over HTTP/1.1 keep-alive connections (HttpPool) to one endpoint at a
// time; with
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
class EtcdClient : public EtcdApi {
 public:
  // Called after every exchange with its API path and duration.
  using Observer =
      std::function<void(std::string_view path, double seconds, bool ok)>;

  // Throws std::runtime_error when a TLS file of `spec` cannot be loaded.
  EtcdClient(boost::asio::io_context& io, EtcdSpec spec,
             std::chrono::milliseconds timeout, Observer observer = {});
  ~EtcdClient();

  // POSTs `body` to `path` (e.g. "/v3/kv/txn"). Never throws.
  Awaitable<Reply> Call(std::string_view path, std::string body,
                        bool idempotent = false) override;

  const EtcdSpec& spec() const { return spec_; }

  // The TLS context for an etcds:// spec. Throws
  // std::runtime_error when a TLS file cannot be loaded.
  static std::unique_ptr<boost::asio::ssl::context> TlsContext(
      const EtcdSpec& spec);

 private:
  struct Attempt;
  // `idempotent`: as Call's; only such a request is sent again on a new
  // connection after a kept-alive one ended unanswered.
  Awaitable<Attempt> Once(std::size_t endpoint, std::string_view path,
                          const std::string& body, bool idempotent);
  // etcd's answer as a Reply: ok for a 200 with a JSON object.
  static Reply Read(const std::string& name, const http::Response& response);

  EtcdSpec spec_;
  Observer observer_;
  std::size_t current_ = 0;  // the endpoint calls start at
  std::unique_ptr<boost::asio::ssl::context> tls_;
  // One per endpoint; only `idle_endpoint_`'s keeps idle connections (a
  // move to another endpoint drops them).
  std::vector<std::unique_ptr<HttpPool>> pools_;
  std::size_t idle_endpoint_ = 0;
};

// base64, as etcd's JSON carries bytes.
using codec::EncodeBase64;

}  // namespace fencepost::storage
