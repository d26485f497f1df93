#pragma once

// clang-format off
// Boost 1.74's awaitable.hpp uses std::exchange without including <utility>.
#include <utility>
// clang-format on

#include <string>
#include <string_view>

#include "http/coro.h"
#include "http/json.h"

namespace fencepost::storage {

// etcd's v3 API as the etcd store (EtcdFences, through its EtcdSession)
// uses it: a POST of a JSON body to an API path ("/v3/kv/range",
// "/v3/kv/txn", "/v3/lease/grant", "/v3/lease/keepalive", "/v3/lease/revoke")
// and etcd's JSON answer. EtcdClient speaks it to a cluster over HTTP; tests
// speak it to an in-memory fake.
//
// Thread safety: an implementation's own; EtcdSession calls it on its io
// thread.
class EtcdApi {
 public:
  struct Reply {
    bool ok = false;  // 200 with a JSON object
    // With !ok: whether the request may have reached etcd (its outcome is
    // unknown), and what went wrong.
    bool maybe_applied = false;
    std::string error;
    http::JsonValue json;
  };

  virtual ~EtcdApi() = default;

  // POSTs `body` to `path`. `idempotent`: the request only reads, so it may
  // be sent again (to another member) after a failure once sent. Never
  // throws.
  virtual Awaitable<Reply> Call(std::string_view path, std::string body,
                                bool idempotent) = 0;
};

}  // namespace fencepost::storage
