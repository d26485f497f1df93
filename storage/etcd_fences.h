#pragma once

#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "fence/rules.h"
#include "storage/etcd_api.h"
#include "storage/etcd_client.h"
#include "storage/etcd_paging.h"
#include "storage/etcd_records.h"
#include "storage/fences.h"

namespace fencepost::storage {

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
//
// Group commit: the writes that arrive while a transaction is in flight
// are decided together, in arrival order, against the fences as this
// replica last saw them (a cache of token and mod_revision), and applied in
// one etcd transaction that compares the mod_revision of every fence it
// changes. A failed compare means another replica moved one of them: its
// failure branch reads them back, and the group is decided again (three
// times at most, then each write alone). A rejection needs no compare: a
// fence never goes down, so a token below one seen once stays below it.
//
// Conditional writes (If-Match, If-None-Match): a write whose precondition
// is not empty is decided against its value's mod_revision and its fence,
// both read afresh before the group is decided (in one read transaction
// with the fences missing from the cache), so that a 412, which needs no
// transaction, is answered against the fence as it is, not as cached. When
// such a write is applied, the transaction also compares the value's
// mod_revision with the one read (0: none): if another replica wrote the
// value in between, the compare fails and the group is decided again. In a
// group, a write sees the writes before it: after a put its value exists,
// with a tag not known until the transaction commits (its revision), so
// no If-Match names it; after a delete there is none. A write that carries
// the value's state (FencedWrite::value_now, the fs: backend) is decided
// against that. An applied put's tag is the transaction's revision; a put
// that a later put of the same group replaced has none.
//
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
// Leases (/v1/leases), decided on this replica and applied with one etcd
// transaction each, up to 16 at a time beside the writes' transactions:
//   PREFIX/leases/NAME  a flag byte ('-', or 'n' once its expiry was
//                       noticed) then fence::EncodeLease's record
//   PREFIX/holds/FENCE  "TOKEN DEADLINE_NS NAME_BYTES\n" NAME HOLDER: the
//                       live lease of FENCE, attached to an etcd lease of
//                       ceil(ttl_ms / 1 s) that a renewal keeps alive
// A lease is live while its hold exists: etcd's leader decides expiry, on
// one clock for every replica (and extends its leases when a new leader is
// elected, so a lease never ends early). The hold is keyed by the fence,
// so one lease per fence is live. Every lease operation's transaction
// compares the record and the hold as read, an acquire the fence too (the
// mark of a noticed expiry compares the record only); a grant puts all
// three: the fence is raised in the transaction that grants.
// --max-leases counts the holds under PREFIX (one per live lease, every
// replica's): an acquire that would grant reads their count with the
// lease, at revision R, and is refused (fence::OverLeaseLimit) when the
// limit is reached; else its transaction also compares that no hold under
// PREFIX was created after R. A grant elsewhere in between fails that
// compare, and the acquire is read and decided again. So the limit holds
// across every replica that shares PREFIX with the same --max-leases, in
// the transaction that grants (a replica with a larger one may fill the
// room up to its own). The count and the compare read every hold: leases
// are for leaders, not millions of locks. A record keeps its fence; a replica
// whose --fence-scope gives the name another refuses the lease
// (Errc::kScopeMismatch). DEADLINE_NS (wall clock of the replica that granted
// or renewed) only gives documents their expires_in_ms.
//
// One transaction holds at most 64 fences and 63 values (etcd's default
// --max-txn-ops is 128) and 1 MiB of values; a value may be 512 KiB. A
// batch (POST /) is one transaction of its own, within the same bounds.
//
// Errors: fence::Errc::kOverloaded (more than `max_queue` writes waiting),
// storage::Errc::kStoreUnavailable (etcd did not answer, or refused: down or
// without quorum; the write may still be applied by etcd later, so it is
// never acknowledged), kValueTooLarge, kBatchTooLarge,
// fence::Errc::kStorage (a record in etcd that fencepost did not write).
//
// Parts: the rules are fence/rules.h's; what a transaction looks like is
// etcd_txn.h's, how an answer reads etcd_json.h's, the records above
// etcd_records.h's, listings etcd_paging.h's. The class itself is in
// etcd_fences.cc (the queue, batches, reads), etcd_group.cc (a group's
// transaction), etcd_leases.cc and etcd_turns.cc. It reaches etcd through
// EtcdApi only.
//
// Thread safety: every call on the io thread of `io`; `done` callbacks run
// there too.
class EtcdFences : public Fences {
 public:
  static constexpr std::size_t kMaxValueBytes = 512 * 1024;

  struct Options {
    EtcdSpec spec;
    std::chrono::milliseconds timeout{2000};  // per etcd request
    std::size_t max_queue = 16384;
    // Called after every etcd request: its API path, duration, success.
    EtcdClient::Observer on_request;
    // Called when a transaction's compare failed (another replica moved a
    // fence of the group) and the group is decided again.
    std::function<void()> on_retry;
    // Turns: this replica's etcd lease TTL, and how long a turn may last
    // (the longest forward plus its hold), which must be shorter.
    std::chrono::seconds turn_ttl{30};
    std::chrono::milliseconds turn_need{15000};
    std::string replica = "fencepost";  // the value of the turn keys
    // --max-leases: live leases (holds) under PREFIX; 0: no limit.
    std::size_t max_leases = 0;
  };

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
  std::string last_error() const override { return last_error_; }

  Awaitable<std::pair<fence::WriteOutcome, Turn>> CommitInTurn(
      fence::FencedWrite write) override;
  void EndTurn(Turn turn, std::chrono::milliseconds hold) override;
  // Stops the lease keep-alive and pending turn holds, so the io_context can
  // run out of work; held turns end with the lease.
  void Shutdown();

  // The value stored under `key` (etcd backend), read linearizably.
  Awaitable<ValueRead> GetValue(std::string key);

  // Transactions committed, and groups decided again after a failed compare.
  std::uint64_t transactions() const { return transactions_; }

 private:
  using Seen = etcd::Seen;
  using Hold = etcd::Hold;
  struct Pending {
    fence::FenceWrite write;
    fence::WriteDone done;
    // Non-null: take the fence's turn; set to the revision that took it
    // before `done` runs (it points into the waiting coroutine's frame).
    std::int64_t* turn = nullptr;
  };
  enum class Settled { kDone, kConflict, kFailed };
  struct StoredLease {
    std::optional<fence::LeaseRecord> record;
    bool noticed = false;  // its expiry was counted
    std::int64_t record_revision = 0;
    std::optional<Hold> hold;  // of the lease's fence
    std::int64_t hold_revision = 0;
    Seen fence;
    // With --max-leases, for an acquire: the holds under PREFIX, counted at
    // `read_revision` (the read's).
    std::optional<std::size_t> holds;
    std::int64_t read_revision = 0;
  };
  using NamedLeases = std::vector<std::pair<std::string, StoredLease>>;
  // What one attempt at a group decided, and the transaction that applies
  // it (etcd_group.cc).
  struct GroupPlan {
    std::vector<fence::WriteOutcome> outcomes;      // one per write
    std::map<std::string, Seen, std::less<>> view;  // fences as left
    std::map<std::string, std::size_t, std::less<>> last_value;  // key->write
    // The values whose precondition was decided from etcd's read: key ->
    // mod_revision read.
    std::map<std::string, std::int64_t, std::less<>> value_compares;
    // Writes refused (412) over a value put earlier in the group, whose tag
    // is the transaction's revision.
    std::vector<std::size_t> unknown_tags;
    std::vector<std::string> changed;  // fences compared (and maybe put)
    std::vector<std::size_t> turns;    // writes that take their fence's turn
    bool rejected = false;
    // Set when the transaction is built, in the order of its responses.
    std::vector<std::string> moved;       // the fences put
    std::vector<std::string> value_keys;  // the values put or deleted
    std::vector<std::string> turn_values;
    std::size_t success_ops = 0, failure_ops = 0;
  };
  // The outcome of the etcd lease a hold is attached to (etcd_leases.cc).
  struct HoldLease {
    Settled settled = Settled::kDone;
    std::int64_t id = 0;       // the hold's etcd lease
    std::int64_t granted = 0;  // a new etcd lease for the hold
    std::int64_t revoke = 0;   // the etcd lease the hold leaves
  };

  static constexpr std::size_t kMaxGroupFences = 64;
  static constexpr std::size_t kMaxGroupValues = 63;
  static constexpr std::size_t kMaxGroupBytes = 1u << 20;
  static constexpr int kGroupAttempts = 3;
  static constexpr int kAloneAttempts = 16;
  static constexpr std::size_t kMaxCache = 1u << 20;
  static constexpr int kLeaseWorkers = 16;

  // The wall clock (Unix ns) that stamps fences and holds.
  static std::int64_t WallNowNs();
  // Whether a batch's writes fit one transaction.
  static bool FitsOneTransaction(const fence::Batch& batch);

  // --- Writes (etcd_fences.cc, etcd_group.cc) -------------------------------
  Awaitable<void> Run();
  // The next group of queue_: the writes one transaction can hold, or a
  // batch alone.
  std::vector<Pending> NextGroup();
  // Decides and commits `group`, deciding again after conflicts.
  Awaitable<void> Settle(std::vector<Pending> group);
  // A batch: its writes decided in order and applied all together, or none.
  Awaitable<void> SettleBatch(Pending batch);
  // One attempt: kConflict when a compare failed (the cache now holds the
  // fences as they are); every write is answered otherwise.
  // With `all_or_nothing`, one write not applied (a rejection, or a
  // precondition that fails) applies nothing (each write is answered with
  // its own decision).
  Awaitable<Settled> TryOnce(std::vector<Pending>& group,
                             bool all_or_nothing = false);
  // The mod_revision of each value key read for a precondition (0: none).
  using ValuesRead = std::map<std::string, std::int64_t, std::less<>>;
  // What a group's fence::Fold loads from this replica (etcd_group.cc).
  class GroupLoads;
  // Decides every write of `group` in order through one fence::Fold (with
  // `all_or_nothing`, as one batch) against the fences and values as the
  // writes before it left them, the cache, and the values of `read`.
  GroupPlan DecideGroup(const std::vector<Pending>& group, bool all_or_nothing,
                        std::int64_t now_ns, const ValuesRead& read);
  // Answers the writes of `group` that take a turn (the lease ran out since
  // they asked for it) and leaves the others.
  static void DropTurns(std::vector<Pending>& group);
  // The transaction that applies `plan`: compare each changed fence as
  // this replica saw it (and each turn absent); success: the fences that
  // moved, each value's last write with its previous kv, the turns;
  // failure: the fences and turns as they are. Sets the plan's response
  // orders.
  std::string BuildGroupTxn(const std::vector<Pending>& group, GroupPlan& plan);
  // After a transaction whose outcome is unknown: removes the turns it
  // would take, if etcd applies it.
  void ForgetTurns(const std::vector<Pending>& group, const GroupPlan& plan);
  // A failed compare: caches the fences as the failure branch read them
  // and answers the writes whose turn another replica holds.
  void TakeConflict(std::vector<Pending>& group, const GroupPlan& plan,
                    const http::JsonValue& responses);
  // A committed transaction: caches the fences it moved and answers every
  // write of `group`.
  void AnswerCommitted(std::vector<Pending>& group, GroupPlan& plan,
                       const http::JsonValue& answer,
                       const http::JsonValue& responses);
  // What Load reads: fences (by name) and values (by key).
  struct Reads {
    std::vector<std::string> fences, values;
  };
  Reads ReadsOf(const std::vector<Pending>& group, bool all_or_nothing) const;
  // Reads into the cache the fences of `group` missing from it, and those
  // of the writes with a precondition (every fence of a batch that has
  // one), and into `*values` the mod_revision of the values those writes
  // replace (unless they carry it, value_now).
  Awaitable<bool> Load(const std::vector<Pending>& group, bool all_or_nothing,
                       ValuesRead* values, std::string* error);
  // Caches a fence as a read found it, unless the cache holds a later one.
  void CacheRead(const std::string& name, const Seen& seen);
  void FailAll(std::vector<Pending>& group, std::error_code error);
  // Caches a fence a transaction at `revision` wrote, unless the cache
  // holds a later state.
  void CacheFence(const std::string& name, fence::Token token,
                  std::int64_t updated_at_ns, std::int64_t revision);
  // A write of a group (never a batch or a lease operation: those are
  // settled apart).
  static const fence::FencedWrite& WriteOf(const Pending& pending) {
    return std::get<fence::FencedWrite>(pending.write);
  }

  // --- Leases (etcd_leases.cc) ----------------------------------------------
  // A lease operation: decided and applied alone, again after a conflict.
  Awaitable<void> SettleLease(Pending pending);
  // A worker: settles lease operations from leases_ until it is empty.
  Awaitable<void> SettleLeases();
  // Reads, decides (fence::DecideLease) and commits one lease operation.
  Awaitable<Settled> TryLease(const fence::LeaseOp& op,
                              fence::WriteOutcome* outcome);
  // What the rules need to know of the lease, from etcd's state: live
  // while its hold exists with its token.
  static fence::LeaseState RulesView(const fence::LeaseOp& op,
                                     const StoredLease& state,
                                     std::int64_t now_ns);
  // Persists a lease decision (`next`, the verdict in `outcome`) in one
  // transaction comparing what it was decided on (with `limited`, a grant
  // that counts against --max-leases: no hold created since the count);
  // on failure resets `outcome` to the error.
  Awaitable<Settled> CommitLease(const fence::LeaseOp& op,
                                 const StoredLease& state,
                                 const fence::LeaseRecord& next,
                                 fence::WriteOutcome* outcome,
                                 std::int64_t now_ns, bool limited);
  // The etcd lease for the hold of a renewal or grant of `next`: the live
  // hold's own, kept alive, when its TTL stays; else a new one.
  Awaitable<HoldLease> AttachHold(const fence::LeaseOp& op,
                                  const StoredLease& state,
                                  const fence::LeaseRecord& next, bool renewed);
  // Restarts the TTL of the etcd lease of a live hold: kConflict when it
  // ran out just now.
  Awaitable<Settled> KeepHoldAlive(std::int64_t etcd_lease);
  // Reads the record of `name`, the hold of `fence` and the fence, and
  // with `count_holds` how many holds there are (StoredLease::holds).
  Awaitable<std::error_code> ReadLease(const std::string& name,
                                       const std::string& fence,
                                       StoredLease* state,
                                       bool count_holds = false);
  // Reads the holds of the fences of `leases`, keeping each that is its
  // lease's.
  Awaitable<std::error_code> ReadHolds(NamedLeases& leases);
  // Marks the expiry of the lease `name` as noticed, unless another replica
  // changed its record since `state` was read: true when this call did.
  Awaitable<bool> NoticeExpiry(const std::string& name,
                               const StoredLease& state);
  // An etcd lease of `ttl_ms` rounded up to seconds (0: none granted).
  Awaitable<std::int64_t> GrantEtcdLease(std::uint64_t ttl_ms);
  void RevokeEtcdLease(std::int64_t id);
  // The lease document's entry for `state` at steady time `now`.
  fence::LeaseEntry EntryOf(const StoredLease& state, std::int64_t now) const;

  // --- Turns (etcd_turns.cc) ------------------------------------------------
  // Makes sure this replica's lease lives for `turn_need` more (granting
  // or renewing it); false when etcd cannot say so.
  Awaitable<bool> EnsureLease();
  Awaitable<void> KeepAlive();
  Awaitable<void> DeleteTurn(Turn turn);
  // Deletes the turn key `key` if `compare` (an etcd Compare of it) holds,
  // retrying until etcd answers or Shutdown.
  Awaitable<void> RemoveTurn(std::string key, std::string compare);

  // One page of the keys under `base` + `prefix` after `after`; nullopt
  // with `*error` set when etcd cannot be read or answers something else.
  Awaitable<std::optional<etcd::Page>> ReadPage(const std::string& base,
                                                const std::string& prefix,
                                                const std::string& after,
                                                std::size_t limit,
                                                std::error_code* error);
  // client_->Call, keeping the error of a failure in last_error_.
  Awaitable<EtcdApi::Reply> Call(std::string_view path, std::string body,
                                 bool idempotent = false);
  void Enqueue(Pending pending);
  std::string FenceKey(std::string_view name) const;
  std::string TurnKey(std::string_view name) const;
  std::string LeaseKey(std::string_view name) const;
  std::string HoldKey(std::string_view fence) const;
  std::string ValueKey(std::string_view key) const;
  std::string ScopesKey() const;
  // One key read at start (the scopes, the format): its value and
  // mod_revision (0: no key). Throws std::runtime_error when etcd cannot
  // be read or answers something else.
  struct StartRead {
    std::string value;
    std::int64_t mod_revision = 0;
  };
  Awaitable<StartRead> ReadAtStart(const std::string& key);

  boost::asio::io_context& io_;
  Options options_;
  std::unique_ptr<EtcdApi> client_;
  std::deque<Pending> queue_;
  std::deque<Pending> leases_;  // lease operations waiting for a worker
  int lease_workers_ = 0;
  bool running_ = false;
  std::unordered_map<std::string, Seen> cache_;
  std::uint64_t transactions_ = 0;
  std::int64_t scopes_revision_ = 0;  // of PREFIX/scopes, as last read
  std::string last_error_;            // of the last etcd request that failed
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
