#pragma once

// clang-format off
// Boost 1.74's awaitable.hpp uses std::exchange without including <utility>.
#include <utility>
// clang-format on

#include <optional>
#include <string>

#include "fence/scope.h"
#include "http/coro.h"
#include "metrics/metrics.h"
#include "proxy/config.h"
#include "proxy/core.h"
#include "proxy/http_types.h"
#include "proxy/route_context.h"
#include "storage/backend.h"
#include "storage/fences.h"

namespace fencepost::proxy {

// The data port: reads, fenced writes and batches of one key space. The
// route table (route_table.h) has checked the key, the credential and the
// token before these run.
//
// Coroutines take references: their callers co_await them at once.
class DataRoutes : private RouteUnit {
 public:
  DataRoutes(RouteContext& context, Core& core);

  // GET and HEAD of `key`.
  // `answer_body`: where a large value's body goes, streamed from the
  // store (null: held whole).
  // A Fencing-Token makes it a fenced read (Core::Read).
  Awaitable<Response> Read(const Request& request, const std::string& key,
                           const std::string& client,
                           std::unique_ptr<BodySource>* answer_body = nullptr);
  // PUT and DELETE (and POST and PATCH where the backend takes them);
  // `body`: a PUT's streamed body (Service::StreamsBody), else null.
  Awaitable<Response> Write(const Request& request, const std::string& key,
                            const std::string& client,
                            BodySource* body = nullptr);
  // POST /: a batch of puts and deletes applied in one transaction.
  Awaitable<Response> Batch(const Request& request, const std::string& client);
  // POST / on a backend that cannot apply several writes at once.
  Response BatchesUnsupported(const Request& request) const;
  // What refuses `batch` before it is committed: writes the store cannot
  // apply in one step (400), or a token above an elected fence that the
  // election's source does not confirm (RouteContext::AdmitElected).
  Awaitable<std::optional<Response>> RefuseBatch(const Request& request,
                                                 const fence::Batch& batch);

 private:
  Core& core_;
};

}  // namespace fencepost::proxy
