#pragma once

// clang-format off
// Boost 1.74's awaitable.hpp uses std::exchange without including <utility>.
#include <utility>
// clang-format on

#include <boost/asio/io_context.hpp>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "fence/fence_record.h"
#include "fence/lease.h"
#include "http/coro.h"
#include "http/json.h"
#include "storage/etcd_spec.h"

namespace boost::asio::ssl {
class context;
}

namespace fencepost::storage {

// The changes every replica makes to the fences and leases under an etcd
// prefix (EtcdFences's keys), as etcd's own watch reports them: one
// streaming POST /v3/watch on the prefix, read as it comes, with the
// previous value of each key. etcd reports a change once it is committed,
// in revision order, so a handler sees a change only once it is durable,
// whichever replica made it.
//
// - A fence record put with a higher token than before (or none before) is
//   `fence`; a lease record put is `lease` with its change: "granted" (a
//   new token), "renewed" (the same token, renewed later), "released", or
//   "expired" (a replica noticed it ran out and marked the record).
// - When the stream breaks it is opened again, at the next endpoint after a
//   backoff of 100 ms doubling to 2 s, from the revision after the last one
//   seen, so nothing is missed or repeated. When etcd no longer holds that
//   revision (compacted), `reset` runs and the watch goes on from now.
// - Bounds: one message of the stream at most 16 MiB (etcd's largest
//   request is 1.5 MiB by default); past it the stream is opened again.
//
// Thread safety: the io thread of `io`; handlers run there.
class EtcdWatch {
 public:
  struct Handlers {
    std::function<void(const fence::FenceRecord&)> fence;
    // Every put of a fence record, raised or not, with the revision that
    // wrote it: what a replica's transactions compare against.
    std::function<void(const fence::FenceRecord&, std::int64_t mod_revision)>
        fence_put;
    std::function<void(const std::string& name, const fence::LeaseRecord&,
                       std::string_view change)>
        lease;
    std::function<void()> reset;
    // Set instead of `fence` and `lease` for another range: every event
    // as etcd sends it (`type`, `kv`, `prev_kv`).
    std::function<void(const http::JsonValue& event)> event;
    // A stream was created (the first one, and after every break).
    std::function<void()> opened;
  };
  // The keys watched: [key, end), etcd's range; `end` empty for one key.
  struct Range {
    std::string key;
    std::string end;
  };

  // `tls`: the etcds:// context (EtcdClient::TlsContext), or nullptr.
  // Watches the fences and leases under the spec's prefix (not the values).
  EtcdWatch(boost::asio::io_context& io, EtcdSpec spec,
            std::shared_ptr<boost::asio::ssl::context> tls, Handlers handlers);
  // Watches `range` instead, without the previous values.
  EtcdWatch(boost::asio::io_context& io, EtcdSpec spec,
            std::shared_ptr<boost::asio::ssl::context> tls, Range range,
            Handlers handlers);
  ~EtcdWatch();
  EtcdWatch(const EtcdWatch&) = delete;
  EtcdWatch& operator=(const EtcdWatch&) = delete;

  // Starts watching from the changes after the current revision.
  void Start();
  // Stops (the stream in flight is closed); handlers run no more.
  void Stop();

  // What one message of the stream says, for the handlers; false when it is
  // not a watch response or says the revision asked for was compacted (then
  // *revision is -1). Sets *revision to the highest revision it covers.
  bool Handle(const http::JsonValue& message, std::int64_t* revision);

 private:
  struct State;
  Awaitable<void> Run(std::shared_ptr<State> state);
  template <class Stream>
  Awaitable<bool> Follow(Stream& stream, const std::string& host,
                         std::shared_ptr<State> state);
  void Change(const http::JsonValue& event);

  boost::asio::io_context& io_;
  const EtcdSpec spec_;
  const std::shared_ptr<boost::asio::ssl::context> tls_;
  const Range range_;
  const bool prev_kv_;
  Handlers handlers_;
  std::shared_ptr<State> state_;
};

}  // namespace fencepost::storage
