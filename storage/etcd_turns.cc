// EtcdFences: turns among replicas (see the class comment), under this
// replica's etcd lease.

// clang-format off
// Boost 1.74's awaitable.hpp uses std::exchange without including <utility>.
#include <utility>
// clang-format on

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/use_awaitable.hpp>

#include "storage/async_commit.h"
#include "storage/errc.h"
#include "storage/etcd_fences.h"
#include "storage/etcd_json.h"
#include "storage/etcd_txn.h"

namespace fencepost::storage {

namespace asio = boost::asio;
using fence::WriteOutcome;
using Json = http::JsonValue;

// g++ 12 takes the write moved into Enqueue below for uninitialized, through
// std::variant's move, depending on what else the unit inlines (a false
// alarm, as the top CMakeLists.txt says).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
Awaitable<std::pair<WriteOutcome, Fences::Turn>> EtcdFences::CommitInTurn(
    fence::FencedWrite write) {
  Turn turn{write.fence, 0};
  if (!co_await EnsureLease()) {
    WriteOutcome outcome;
    outcome.error = Errc::kStoreUnavailable;
    co_return std::pair{std::move(outcome), turn};
  }
  // Set before the write is answered, and read only after: it lives in
  // this frame until then. (Only trivial captures in the submit function:
  // g++ 12 may destroy a lambda temporary of a co_await expression twice.)
  std::int64_t revision = 0;
  std::int64_t* revision_at = &revision;
  WriteOutcome outcome = co_await AsyncSubmit(
      [this, revision_at](fence::FenceWrite w, fence::WriteDone done) {
        Enqueue({std::move(w), std::move(done), revision_at});
      },
      std::move(write));
  turn.revision = revision;
  co_return std::pair{std::move(outcome), std::move(turn)};
}
#pragma GCC diagnostic pop

void EtcdFences::EndTurn(Turn turn, std::chrono::milliseconds hold) {
  if (turn.revision == 0) return;
  if (hold.count() <= 0) {
    asio::co_spawn(io_, DeleteTurn(std::move(turn)), asio::detached);
    return;
  }
  auto timer = std::make_shared<asio::steady_timer>(io_, hold);
  std::erase_if(holds_, [](const auto& weak) { return weak.expired(); });
  holds_.push_back(timer);
  timer->async_wait([this, timer, turn = std::move(turn)](
                        const boost::system::error_code& ec) mutable {
    if (ec || stopped_) return;  // shut down: the lease ends the turn
    asio::co_spawn(io_, DeleteTurn(std::move(turn)), asio::detached);
  });
}

Awaitable<void> EtcdFences::DeleteTurn(Turn turn) {
  // Only this turn: the key as this replica created it.
  const std::string key = TurnKey(turn.fence);
  co_await RemoveTurn(key, etcd::CompareCreate(key, turn.revision));
}

Awaitable<void> EtcdFences::RemoveTurn(std::string key, std::string compare) {
  etcd::Txn txn;
  txn.If(std::move(compare)).Then(etcd::DeleteOp(key));
  const std::string body = txn.Json();
  // Until etcd answers: a turn left behind would hold its fence on every
  // replica for as long as this one lives. (Stopped: the lease ends it.)
  auto wait = std::chrono::milliseconds(100);
  while (!(co_await Call("/v3/kv/txn", body)).ok && !stopped_) {
    asio::steady_timer timer(io_, wait);
    co_await timer.async_wait(kUseAwaitable);
    wait =
        std::min<std::chrono::milliseconds>(wait * 2, std::chrono::seconds(5));
  }
}

Awaitable<bool> EtcdFences::EnsureLease() {
  while (lease_busy_) {
    asio::steady_timer wait(io_, std::chrono::milliseconds(5));
    co_await wait.async_wait(kUseAwaitable);
  }
  const auto now = std::chrono::steady_clock::now();
  if (lease_ != 0 && now < lease_fresh_until_) co_return true;
  if (stopped_) co_return false;
  lease_busy_ = true;
  const auto sent = std::chrono::steady_clock::now();
  EtcdApi::Reply reply;
  if (lease_ != 0) {
    reply = co_await Call("/v3/lease/keepalive", etcd::LeaseId(lease_));
    const Json* result = reply.ok ? reply.json.Find("result") : nullptr;
    if (result == nullptr || etcd::Int64Of(result->Find("TTL")) <= 0) {
      if (reply.ok) lease_ = 0;  // it ran out: a new one below
    }
  }
  if (lease_ == 0) {
    reply = co_await Call("/v3/lease/grant",
                          etcd::LeaseTtl(options_.turn_ttl.count()));
    if (reply.ok) lease_ = etcd::Int64Of(reply.json.Find("ID"));
    if (lease_ < 0) lease_ = 0;
  }
  const bool fresh = reply.ok && lease_ != 0;
  if (fresh) {
    // The lease lives turn_ttl from when etcd saw the request, which was
    // after `sent`.
    lease_fresh_until_ = sent + options_.turn_ttl - options_.turn_need;
    if (!keeping_alive_) {
      keeping_alive_ = true;
      asio::co_spawn(io_, KeepAlive(), asio::detached);
    }
  }
  lease_busy_ = false;
  co_return fresh;
}

Awaitable<void> EtcdFences::KeepAlive() {
  keepalive_timer_ = std::make_unique<asio::steady_timer>(io_);
  while (!stopped_) {
    keepalive_timer_->expires_after(options_.turn_ttl / 3);
    boost::system::error_code ec;
    co_await keepalive_timer_->async_wait(
        asio::redirect_error(kUseAwaitable, ec));
    if (ec || stopped_) break;
    lease_fresh_until_ = {};  // renew now
    co_await EnsureLease();
  }
  keeping_alive_ = false;
}

void EtcdFences::Shutdown() {
  stopped_ = true;
  if (keepalive_timer_) keepalive_timer_->cancel();
  for (auto& weak : holds_) {
    if (auto timer = weak.lock()) timer->cancel();
  }
  holds_.clear();
}

}  // namespace fencepost::storage
