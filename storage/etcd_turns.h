#pragma once

#include <boost/asio/steady_timer.hpp>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "http/coro.h"
#include "storage/etcd_session.h"
#include "storage/fences.h"

namespace fencepost::storage {

// Turns (for fs: and http://, whose values live outside etcd): a write that
// must be the only one under its fence among all replicas until its value
// is written takes PREFIX/turns/NAME in the transaction that advances the
// fence (compared absent), attached to this replica's etcd lease, and
// deletes it when done (after a hold, when the outcome is unknown). A turn
// held by another replica is Errc::kFenceHeld. A replica that dies holding
// turns holds them until its lease runs out (`turn_ttl`); a turn is only
// taken while the lease is known to live for `turn_need` more, so a lease
// cannot run out under a forward this replica still has in flight.
//
// This class keeps that lease alive and ends turns; the write's group
// (EtcdGroups) takes them.
//
// Thread safety: every call on the io thread of the session's io_context.
class EtcdTurns {
 public:
  explicit EtcdTurns(EtcdSession& session) : session_(session) {}

  // Makes sure this replica's lease lives for `turn_need` more (granting
  // or renewing it, and keeping it alive from then on); false when etcd
  // cannot say so.
  Awaitable<bool> EnsureLease();
  // This replica's etcd lease (0: none), which turns are attached to.
  std::int64_t lease() const { return lease_; }
  // A value for a new turn key, unique to it, so that a turn whose
  // transaction's outcome is unknown can be removed without touching a
  // later one.
  std::string NewTurnValue();
  // Removes the turn key of `fence` in the background if it holds `value`
  // (a transaction whose outcome is unknown would take it).
  void Forget(const std::string& fence, const std::string& value);
  // Fences::EndTurn: deletes the turn key `turn` took after `hold`.
  void EndTurn(Fences::Turn turn, std::chrono::milliseconds hold);
  // Stops the lease keep-alive and pending turn holds, so the io_context can
  // run out of work; held turns end with the lease.
  void Shutdown();

 private:
  Awaitable<void> KeepAlive();
  Awaitable<void> DeleteTurn(Fences::Turn turn);
  // Deletes the turn key `key` if `compare` (an etcd Compare of it) holds,
  // retrying until etcd answers or Shutdown.
  Awaitable<void> RemoveTurn(std::string key, std::string compare);

  EtcdSession& session_;
  // This replica's etcd lease (0: none), and until when a turn may be taken
  // under it.
  std::int64_t lease_ = 0;
  std::chrono::steady_clock::time_point lease_fresh_until_{};
  bool lease_busy_ = false;
  std::uint64_t turn_serial_ = 0;
  bool keeping_alive_ = false;
  bool stopped_ = false;
  std::unique_ptr<boost::asio::steady_timer> keepalive_timer_;
  std::vector<std::weak_ptr<boost::asio::steady_timer>> holds_;
};

}  // namespace fencepost::storage
