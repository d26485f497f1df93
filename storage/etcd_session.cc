#include "storage/etcd_session.h"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/steady_timer.hpp>
#include <exception>
#include <memory>

#include "fence/errc.h"
#include "storage/errc.h"
#include "storage/etcd_json.h"
#include "storage/etcd_txn.h"

namespace fencepost::storage {

namespace asio = boost::asio;

std::vector<etcd::Pending> etcd::TakeLeaseGroup(std::deque<Pending>& queue,
                                                std::size_t max,
                                                std::size_t scan,
                                                const Busy& busy) {
  std::vector<Pending> group;
  Busy taken;
  std::deque<Pending> later;
  for (std::size_t looked = 0;
       !queue.empty() && group.size() < max && looked < scan; ++looked) {
    Pending pending = std::move(queue.front());
    queue.pop_front();
    const auto& op = std::get<fence::LeaseOp>(pending.write);
    if (busy.names.count(op.name) || busy.fences.count(op.fence) ||
        taken.names.count(op.name) || taken.fences.count(op.fence)) {
      later.push_back(std::move(pending));
      continue;
    }
    taken.names.insert(op.name);
    taken.fences.insert(op.fence);
    group.push_back(std::move(pending));
  }
  while (!later.empty()) {
    queue.push_front(std::move(later.back()));
    later.pop_back();
  }
  return group;
}

std::string_view etcd::ConflictName(Conflict conflict) {
  switch (conflict) {
    case Conflict::kFence:
      return "fence";
    case Conflict::kValue:
      return "value";
    case Conflict::kTurn:
      return "turn";
    case Conflict::kLease:
      return "lease";
    case Conflict::kLeaseLimit:
      return "lease-limit";
  }
  return "fence";
}

EtcdSession::EtcdSession(asio::io_context& io, EtcdOptions options,
                         std::unique_ptr<EtcdApi> api)
    : io_(io), options_(std::move(options)), client_(std::move(api)) {}

Awaitable<EtcdApi::Reply> EtcdSession::Call(std::string_view path,
                                            std::string body, bool idempotent) {
  EtcdApi::Reply reply =
      co_await client_->Call(path, std::move(body), idempotent);
  if (!reply.ok) last_error_ = reply.error;
  co_return reply;
}

std::string EtcdSession::FenceKey(std::string_view name) const {
  return options_.spec.prefix + "/fences/" + std::string(name);
}

std::string EtcdSession::TurnKey(std::string_view name) const {
  return options_.spec.prefix + "/turns/" + std::string(name);
}

std::string EtcdSession::LeaseKey(std::string_view name) const {
  return options_.spec.prefix + "/leases/" + std::string(name);
}

std::string EtcdSession::HoldKey(std::string_view fence) const {
  return options_.spec.prefix + "/holds/" + std::string(fence);
}

std::string EtcdSession::ValueKey(std::string_view key) const {
  return options_.spec.prefix + "/values/" + std::string(key);
}

std::string EtcdSession::ScopesKey() const {
  return options_.spec.prefix + "/scopes";
}

std::string EtcdSession::FormatKey() const {
  return options_.spec.prefix + "/format";
}

Awaitable<std::optional<etcd::Page>> EtcdSession::ReadPage(
    const std::string& base, const std::string& prefix,
    const std::string& after, std::size_t limit, std::error_code* error) {
  EtcdApi::Reply reply = co_await Call(
      "/v3/kv/range", etcd::PageRange(base, prefix, after, limit), true);
  if (!reply.ok) {
    *error = Errc::kStoreUnavailable;
    co_return std::nullopt;
  }
  std::optional<etcd::Page> page = etcd::ReadPage(reply.json, base);
  if (!page) *error = fence::Errc::kStorage;
  co_return page;
}

Awaitable<std::int64_t> EtcdSession::GrantLease(std::int64_t seconds) {
  EtcdApi::Reply reply =
      co_await Call("/v3/lease/grant", etcd::LeaseTtl(seconds));
  if (!reply.ok) co_return 0;
  const std::int64_t id = etcd::Int64Of(reply.json.Find("ID"));
  co_return id > 0 ? id : 0;
}

Awaitable<etcd::Settled> EtcdSession::KeepLeaseAlive(std::int64_t id) {
  EtcdApi::Reply reply =
      co_await Call("/v3/lease/keepalive", etcd::LeaseId(id));
  if (!reply.ok) co_return etcd::Settled::kFailed;
  const http::JsonValue* result = reply.json.Find("result");
  if (result == nullptr || etcd::Int64Of(result->Find("TTL")) <= 0) {
    co_return etcd::Settled::kConflict;
  }
  co_return etcd::Settled::kDone;
}

void EtcdSession::RevokeLease(std::int64_t id) {
  if (id <= 0) return;
  asio::co_spawn(io_, Call("/v3/lease/revoke", etcd::LeaseId(id)),
                 asio::detached);
}

void EtcdSession::Retried(etcd::Conflict cause) const {
  if (options_.on_retry) options_.on_retry(etcd::ConflictName(cause));
}

Awaitable<void> EtcdSession::AllAtOnce(std::vector<Awaitable<void>> tasks) {
  // A timer as the event the last task sets (Boost 1.74's Asio has no
  // channel).
  struct Latch {
    Latch(asio::io_context& io, std::size_t n)
        : done(io, asio::steady_timer::time_point::max()), left(n) {}
    asio::steady_timer done;  // cancelled when `left` reaches 0
    std::size_t left;
  };
  if (tasks.empty()) co_return;
  auto latch = std::make_shared<Latch>(io_, tasks.size());
  for (Awaitable<void>& task : tasks) {
    asio::co_spawn(io_, std::move(task), [latch](std::exception_ptr) {
      if (--latch->left == 0) latch->done.cancel();
    });
  }
  if (latch->left > 0) {
    boost::system::error_code ec;
    co_await latch->done.async_wait(asio::redirect_error(kUseAwaitable, ec));
  }
}

std::int64_t EtcdSession::WallNowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

}  // namespace fencepost::storage
