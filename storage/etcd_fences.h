#pragma once

#include <boost/asio/io_context.hpp>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "fence/rules.h"
#include "storage/backend.h"
#include "storage/etcd_api.h"
#include "storage/etcd_session.h"
#include "storage/fences.h"

namespace fencepost::storage {

class EtcdFenceCache;
class EtcdGroups;
class EtcdLeases;
class EtcdTurns;

// --fence-store etcd://HOST:PORT[,...][/PREFIX]: fences (and, with the etcd
// backend, values) live in an etcd cluster that every replica of fencepost
// shares, so a write accepted by one replica fences the others at once.
//
// Keys (PREFIX is "fencepost" by default):
//   PREFIX/fences/NAME  "TOKEN UPDATED_AT_NS"  (decimal)
//   PREFIX/values/KEY   "TOKEN CONTENT-TYPE\n" then the body (see
//                       etcd::FormatValue); its entity tag is the key's
//                       mod_revision
//   PREFIX/scopes       fence::EncodeScopeRecord of the scopes the replicas
//                       were served with (fence::PlanScopes)
//   PREFIX/format       the format of the records under PREFIX
// and those of turns (EtcdTurns) and leases (EtcdLeases).
//
// Writes are decided in groups, one etcd transaction each (EtcdGroups, and
// EtcdGroupPlan for what a group decides and its transaction), against the
// fences as this replica last saw them (EtcdFenceCache). Fence writes for
// fs: and http:// take their fence's turn among the replicas (EtcdTurns).
// Leases are decided and applied one transaction each (EtcdLeases). All
// reach etcd through one EtcdSession.
//
// Errors: fence::Errc::kOverloaded (more than `max_queue` writes waiting),
// storage::Errc::kStoreUnavailable (etcd did not answer, or refused: down or
// without quorum; the write may still be applied by etcd later, so it is
// never acknowledged), kValueTooLarge, kBatchTooLarge,
// fence::Errc::kStorage (a record in etcd that fencepost did not write).
//
// Parts: the rules are fence/rules.h's; what a transaction looks like is
// etcd_txn.h's, how an answer reads etcd_json.h's, the records above
// etcd_records.h's, listings etcd_paging.h's. This class owns the parts
// named above, routes each write to its path and keeps the reads of fences,
// values and the records of a start (scopes, format). It reaches etcd
// through EtcdApi only.
//
// Thread safety: every call on the io thread of `io`; `done` callbacks run
// there too.
class EtcdFences : public Fences {
 public:
  // A value's bound (EtcdGroups refuses a larger one).
  static constexpr std::size_t kMaxValueBytes = 512 * 1024;

  using Options = EtcdOptions;

  struct ValueRead {
    std::error_code error;
    bool found = false;
    std::optional<fence::Token> token;
    std::string etag;          // the key's mod_revision (etcd::TagOf)
    std::string content_type;  // as stored; empty: none
    std::string body;
  };

  // Speaks to the cluster of `options.spec` (EtcdClient).
  EtcdFences(boost::asio::io_context& io, Options options);
  // Speaks to `api` (tests give a fake); `options.spec` gives the prefix,
  // and `options.timeout` and `on_request` are `api`'s business.
  EtcdFences(boost::asio::io_context& io, Options options,
             std::unique_ptr<EtcdApi> api);
  ~EtcdFences() override;

  void Submit(fence::FenceWrite write, fence::WriteDone done) override;
  Awaitable<Read> Get(std::string name) override;
  Awaitable<ListRead> List(std::string prefix, std::string after,
                           std::size_t limit) override;
  Awaitable<LeaseRead> GetLease(std::string name, std::string fence) override;
  Awaitable<LeaseList> ListLeases(std::string prefix, std::string after,
                                  std::size_t limit) override;
  std::optional<std::uint64_t> Count() override { return std::nullopt; }
  Awaitable<fence::ScopeRecord> RecordedScopes() override;
  // PREFIX/format: "2" since values carry Content-Types (the previous
  // release wrote none, and reads no value that has one).
  Awaitable<std::string> CheckFormat() override;
  Awaitable<void> RecordScopes(fence::ScopeRecord record) override;
  Awaitable<bool> Ready() override;
  std::string_view consistency() const override { return "linearizable"; }
  std::string last_error() const override { return session_.last_error(); }

  Awaitable<std::pair<fence::WriteOutcome, Turn>> CommitInTurn(
      fence::FencedWrite write) override;
  void EndTurn(Turn turn, std::chrono::milliseconds hold) override;
  // Stops the lease keep-alive and pending turn holds, so the io_context can
  // run out of work; held turns end with the lease.
  void Shutdown();

  // The value stored under `key` (etcd backend), read linearizably.
  Awaitable<ValueRead> GetValue(std::string key);

  // Up to `limit` keys of values that start with `prefix`, after `after`
  // (Backend::ListKeys), read linearizably.
  Awaitable<Backend::KeyPage> ListValueKeys(std::string prefix,
                                            std::string after,
                                            std::size_t limit);

  // A put of fence `fence` at `mod_revision`, by any replica, as the watch
  // reports it: a cached fence older than that is brought up to it, so a
  // group decided on it does not fail its compare.
  void Saw(const fence::FenceRecord& fence, std::int64_t mod_revision);

  // Transactions committed (the writes' and the leases').
  std::uint64_t transactions() const;

 private:
  // Refuses what no path can take (too large, or its queue full), else
  // hands `pending` to the writes' or the leases' path.
  void Enqueue(etcd::Pending pending);
  // One key read at start (the scopes, the format): its value and
  // mod_revision (0: no key). Throws std::runtime_error when etcd cannot
  // be read or answers something else.
  struct StartRead {
    std::string value;
    std::int64_t mod_revision = 0;
  };
  Awaitable<StartRead> ReadAtStart(const std::string& key);

  // The parts (their headers are the store's own), in the order they are
  // made: each uses those before it.
  EtcdSession session_;
  std::unique_ptr<EtcdFenceCache> cache_;
  std::unique_ptr<EtcdTurns> turns_;
  std::unique_ptr<EtcdGroups> groups_;
  std::unique_ptr<EtcdLeases> leases_;
  std::int64_t scopes_revision_ = 0;  // of PREFIX/scopes, as last read
};

}  // namespace fencepost::storage
