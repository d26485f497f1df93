// EtcdTurns: this replica's etcd lease, and the turns under it (see the
// class comment).

// clang-format off
// Boost 1.74's awaitable.hpp uses std::exchange without including <utility>.
#include <utility>
// clang-format on

#include "storage/etcd_turns.h"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/use_awaitable.hpp>

#include "storage/etcd_txn.h"

namespace fencepost::storage {

namespace asio = boost::asio;

std::string EtcdTurns::NewTurnValue() {
  return session_.options().replica + " #" + std::to_string(++turn_serial_);
}

void EtcdTurns::Forget(const std::string& fence, const std::string& value) {
  // etcd may still apply it: the turn it would take must not outlive this
  // failure (nothing is forwarded under it), or the fence would stay held
  // while this replica's lease lives.
  const std::string key = session_.TurnKey(fence);
  asio::co_spawn(session_.io(), RemoveTurn(key, etcd::CompareValue(key, value)),
                 asio::detached);
}

void EtcdTurns::EndTurn(Fences::Turn turn, std::chrono::milliseconds hold) {
  if (turn.revision == 0) return;
  asio::io_context& io = session_.io();
  if (hold.count() <= 0) {
    asio::co_spawn(io, DeleteTurn(std::move(turn)), asio::detached);
    return;
  }
  auto timer = std::make_shared<asio::steady_timer>(io, hold);
  std::erase_if(holds_, [](const auto& weak) { return weak.expired(); });
  holds_.push_back(timer);
  timer->async_wait([this, &io, timer, turn = std::move(turn)](
                        const boost::system::error_code& ec) mutable {
    if (ec || stopped_) return;  // shut down: the lease ends the turn
    asio::co_spawn(io, DeleteTurn(std::move(turn)), asio::detached);
  });
}

Awaitable<void> EtcdTurns::DeleteTurn(Fences::Turn turn) {
  // Only this turn: the key as this replica created it.
  const std::string key = session_.TurnKey(turn.fence);
  co_await RemoveTurn(key, etcd::CompareCreate(key, turn.revision));
}

Awaitable<void> EtcdTurns::RemoveTurn(std::string key, std::string compare) {
  etcd::Txn txn;
  txn.If(std::move(compare)).Then(etcd::DeleteOp(key));
  const std::string body = txn.Json();
  // Until etcd answers: a turn left behind would hold its fence on every
  // replica for as long as this one lives. (Stopped: the lease ends it.)
  auto wait = std::chrono::milliseconds(100);
  while (!(co_await session_.Call("/v3/kv/txn", body)).ok && !stopped_) {
    asio::steady_timer timer(session_.io(), wait);
    co_await timer.async_wait(kUseAwaitable);
    wait =
        std::min<std::chrono::milliseconds>(wait * 2, std::chrono::seconds(5));
  }
}

Awaitable<bool> EtcdTurns::EnsureLease() {
  while (lease_busy_) {
    asio::steady_timer wait(session_.io(), std::chrono::milliseconds(5));
    co_await wait.async_wait(kUseAwaitable);
  }
  const auto now = std::chrono::steady_clock::now();
  if (lease_ != 0 && now < lease_fresh_until_) co_return true;
  if (stopped_) co_return false;
  lease_busy_ = true;
  const EtcdOptions& options = session_.options();
  const auto sent = std::chrono::steady_clock::now();
  bool fresh = false;
  if (lease_ != 0) {
    const etcd::Settled kept = co_await session_.KeepLeaseAlive(lease_);
    if (kept == etcd::Settled::kConflict) lease_ = 0;  // a new one below
    fresh = kept == etcd::Settled::kDone;
  }
  if (lease_ == 0) {
    lease_ = co_await session_.GrantLease(options.turn_ttl.count());
    fresh = lease_ != 0;
  }
  if (fresh) {
    // The lease lives turn_ttl from when etcd saw the request, which was
    // after `sent`.
    lease_fresh_until_ = sent + options.turn_ttl - options.turn_need;
    if (!keeping_alive_) {
      keeping_alive_ = true;
      asio::co_spawn(session_.io(), KeepAlive(), asio::detached);
    }
  }
  lease_busy_ = false;
  co_return fresh;
}

Awaitable<void> EtcdTurns::KeepAlive() {
  keepalive_timer_ = std::make_unique<asio::steady_timer>(session_.io());
  while (!stopped_) {
    keepalive_timer_->expires_after(session_.options().turn_ttl / 3);
    boost::system::error_code ec;
    co_await keepalive_timer_->async_wait(
        asio::redirect_error(kUseAwaitable, ec));
    if (ec || stopped_) break;
    lease_fresh_until_ = {};  // renew now
    co_await EnsureLease();
  }
  keeping_alive_ = false;
}

void EtcdTurns::Shutdown() {
  stopped_ = true;
  if (keepalive_timer_) keepalive_timer_->cancel();
  for (auto& weak : holds_) {
    if (auto timer = weak.lock()) timer->cancel();
  }
  holds_.clear();
}

}  // namespace fencepost::storage
