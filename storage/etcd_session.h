#pragma once

#include <boost/asio/io_context.hpp>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

#include "fence/write.h"
#include "storage/etcd_api.h"
#include "storage/etcd_client.h"
#include "storage/etcd_paging.h"

namespace fencepost::storage {

// The settings of the etcd store (EtcdFences::Options).
struct EtcdOptions {
  EtcdSpec spec;
  std::chrono::milliseconds timeout{2000};  // per etcd request
  std::size_t max_queue = 16384;
  // Called after every etcd request: its API path, duration, success.
  EtcdClient::Observer on_request;
  // Called when a transaction's compare failed (another replica changed
  // what it was decided on) and it is decided again, with the cause
  // (etcd::ConflictName: fencepost_etcd_txn_retries_total's label).
  std::function<void(std::string_view cause)> on_retry;
  // Turns: this replica's etcd lease TTL, and how long a turn may last
  // (the longest forward plus its hold), which must be shorter.
  std::chrono::seconds turn_ttl{30};
  std::chrono::milliseconds turn_need{15000};
  std::string replica = "fencepost";  // the value of the turn keys
  // --max-leases: live leases (holds) under PREFIX; 0: no limit.
  std::size_t max_leases = 0;
};

namespace etcd {

// A write waiting to be settled (a group's, a batch or a lease operation),
// and what answers it.
struct Pending {
  fence::FenceWrite write;
  fence::WriteDone done;
  // Non-null: take the fence's turn; set to the revision that took it
  // before `done` runs (it points into the waiting coroutine's frame).
  std::int64_t* turn = nullptr;
};

// What one attempt at settling a write came to: done (answered), a failed
// compare (another replica moved what it was decided on: decide again), or
// a failure (answered with the error).
enum class Settled { kDone, kConflict, kFailed };

// Takes from the front of `queue` (lease operations) up to `max` for one
// transaction, looking at `scan` at most: of distinct leases and fences
// (two on one would fail each other's compare), none in `busy` (the leases
// and fences of transactions in flight). Those passed over keep their
// order at the front.
struct Busy {
  std::set<std::string> names, fences;
};
std::vector<Pending> TakeLeaseGroup(std::deque<Pending>& queue, std::size_t max,
                                    std::size_t scan, const Busy& busy);

// What a failed compare found changed since it was read: a fence, a value
// a precondition was decided on, a turn another replica holds, a lease's
// record or hold, or the holds counted for --max-leases.
enum class Conflict { kFence, kValue, kTurn, kLease, kLeaseLimit };
// "fence", "value", "turn", "lease", "lease-limit".
std::string_view ConflictName(Conflict conflict);

}  // namespace etcd

// What the parts of the etcd store (EtcdFences) share to reach etcd: the
// EtcdApi client and the store's settings, the error of the last request
// that failed, the names of the keys under PREFIX, listings, and etcd's own
// leases.
//
// Errors: Call never fails but answers EtcdApi::Reply; ReadPage sets
// storage::Errc::kStoreUnavailable (etcd did not answer) or
// fence::Errc::kStorage (an answer fencepost cannot read).
//
// Thread safety: every call on the io thread of `io`.
class EtcdSession {
 public:
  EtcdSession(boost::asio::io_context& io, EtcdOptions options,
              std::unique_ptr<EtcdApi> api);

  boost::asio::io_context& io() const { return io_; }
  const EtcdOptions& options() const { return options_; }
  // The error of the last etcd request that failed ("" before one).
  const std::string& last_error() const { return last_error_; }

  // EtcdApi::Call, keeping the error of a failure for last_error().
  Awaitable<EtcdApi::Reply> Call(std::string_view path, std::string body,
                                 bool idempotent = false);

  // The keys under PREFIX (EtcdFences's class comment).
  std::string FenceKey(std::string_view name) const;
  std::string TurnKey(std::string_view name) const;
  std::string LeaseKey(std::string_view name) const;
  std::string HoldKey(std::string_view fence) const;
  std::string ValueKey(std::string_view key) const;
  std::string ScopesKey() const;
  std::string FormatKey() const;

  // One page of the keys under `base` + `prefix` after `after`; nullopt
  // with `*error` set when etcd cannot be read or answers something else.
  Awaitable<std::optional<etcd::Page>> ReadPage(const std::string& base,
                                                const std::string& prefix,
                                                const std::string& after,
                                                std::size_t limit,
                                                std::error_code* error);

  // An etcd lease of `seconds`: its ID, or 0 when none was granted.
  Awaitable<std::int64_t> GrantLease(std::int64_t seconds);
  // Restarts the TTL of the etcd lease `id`: kConflict when it ran out,
  // kFailed when etcd did not answer.
  Awaitable<etcd::Settled> KeepLeaseAlive(std::int64_t id);
  // Revokes the etcd lease `id` (0: none) in the background, best effort:
  // an etcd lease left behind runs out by itself.
  void RevokeLease(std::int64_t id);

  // Counts a new attempt of a transaction after a conflict of `cause`
  // (EtcdOptions::on_retry).
  void Retried(etcd::Conflict cause) const;

  // Runs every one of `tasks` at once on the io thread, and returns when
  // the last has finished.
  Awaitable<void> AllAtOnce(std::vector<Awaitable<void>> tasks);

  // The wall clock (Unix ns) that stamps fences and holds.
  static std::int64_t WallNowNs();

 private:
  boost::asio::io_context& io_;
  const EtcdOptions options_;
  std::unique_ptr<EtcdApi> client_;
  std::string last_error_;  // of the last etcd request that failed
};

}  // namespace fencepost::storage
