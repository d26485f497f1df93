#pragma once

// clang-format off
// Boost 1.74's awaitable.hpp uses std::exchange without including <utility>.
#include <utility>
// clang-format on

#include <boost/asio/awaitable.hpp>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

#include "fence/committer.h"
#include "fence/fence_store.h"
#include "fence/shards.h"

namespace fencepost::storage {

// Where the fences live, as the routes see them: the data directory's LMDB
// environments (LocalFences, the default), or an etcd cluster that several
// replicas share (EtcdFences, --fence-store etcd://).
//
// Submit checks and applies a fence write (a value with it, when the store
// keeps values) atomically and durably before `done` runs, with the
// outcomes of fence::Committer::Submit.
//
// Thread safety: see each implementation; the server calls every one on its
// io thread.
class Fences {
 public:
  struct Read {
    std::error_code error;
    std::optional<fence::FenceRecord> fence;  // nullopt: no such fence
  };
  struct ListRead {
    std::error_code error;
    fence::FenceList list;
  };

  // A lease as a read finds it, with the monotonic time (ns, the clock of
  // the entry's deadline) the read was made at. `expired`: this read noticed
  // that the lease ran out without a release (each expiry is noticed once).
  struct LeaseRead {
    std::error_code error;
    std::int64_t now_ns = 0;
    std::optional<fence::LeaseTable::Entry> entry;  // nullopt: never granted
    std::optional<fence::LeaseRecord> expired;
  };
  struct LeaseList {
    std::error_code error;
    std::int64_t now_ns = 0;
    std::vector<std::pair<std::string, fence::LeaseTable::Entry>> leases;
    std::optional<std::string> next;  // the last name, when there are more
    std::vector<std::pair<std::string, fence::LeaseRecord>> expired;
  };

  // A fence's turn among replicas (see CommitInTurn); revision 0: none.
  struct Turn {
    std::string fence;
    std::int64_t revision = 0;
  };

  virtual ~Fences() = default;
  virtual void Submit(fence::FenceWrite write, fence::Committer::Done done) = 0;
  // For backends that keep values elsewhere (fs:, http://): commits `write`
  // (a fence write without a value) and, when replicas share the fences,
  // takes the fence's turn among them in the same step, so that no other
  // replica writes under that fence until EndTurn. The caller holds the
  // fence's local turn (FenceLocks) until then. Outcomes as Submit's, and
  // storage::Errc::kFenceHeld when another replica holds the turn.
  virtual boost::asio::awaitable<std::pair<fence::WriteOutcome, Turn>>
  CommitInTurn(fence::FenceWrite write);
  // Ends `turn` after `hold` (zero: now); a no-op for an empty turn. A
  // replica that dies holding a turn holds it until its etcd lease runs out.
  virtual void EndTurn(Turn /*turn*/, std::chrono::milliseconds /*hold*/) {}
  // The fence named `name`.
  virtual boost::asio::awaitable<Read> Get(std::string name) = 0;
  // Up to `limit` fences whose names start with `prefix`, after `after`.
  virtual boost::asio::awaitable<ListRead> List(std::string prefix,
                                                std::string after,
                                                std::size_t limit) = 0;
  // The lease `name`, whose fence is `fence`.
  virtual boost::asio::awaitable<LeaseRead> GetLease(std::string name,
                                                     std::string fence) = 0;
  // Up to `limit` leases whose names start with `prefix`, after `after`,
  // in name order.
  virtual boost::asio::awaitable<LeaseList> ListLeases(std::string prefix,
                                                       std::string after,
                                                       std::size_t limit) = 0;
  // The monotonic clock lease deadlines are on (ns).
  virtual std::int64_t SteadyNow() const { return fence::SteadyNowNs(); }
  // How many fences there are, when that is cheap to know.
  virtual std::optional<std::uint64_t> Count() = 0;
  // Whether writes can be decided now (for /readyz). Never fails.
  virtual boost::asio::awaitable<bool> Ready() = 0;
  // What a read sees, for the `consistency` of fence documents: "local"
  // (this process's durable state) or "linearizable" (every replica's).
  virtual std::string_view consistency() const = 0;
  // What the last failure to reach the store was, for log lines (empty
  // when there is nothing to add to the error itself).
  virtual std::string last_error() const { return {}; }
  // The data directory's environments, or nullptr when the fences live
  // elsewhere.
  virtual fence::Shards* shards() { return nullptr; }

  // The --fence-scope prefixes the store has been served with, as recorded
  // (fence::PlanScopes), and their durable replacement. For start-up only:
  // they throw std::runtime_error with a readable message on failure.
  virtual boost::asio::awaitable<fence::ScopeRecord> RecordedScopes() = 0;
  virtual boost::asio::awaitable<void> RecordScopes(
      fence::ScopeRecord record) = 0;
};

// The default: the fences of the data directory's LMDB environments.
// Thread safety: any thread.
class LocalFences : public Fences {
 public:
  explicit LocalFences(fence::Shards& shards)
      : shards_(shards), store_(shards.envs()) {}

  // A batch goes to the committer of its first write's fence (the caller
  // checks that all of its fences share it); a lease operation to its
  // fence's.
  void Submit(fence::FenceWrite write, fence::Committer::Done done) override {
    const std::string& fence =
        write.batch.empty() ? write.fence : write.batch.front().fence;
    shards_.CommitterOf(fence).Submit(std::move(write), std::move(done));
  }
  boost::asio::awaitable<Read> Get(std::string name) override;
  boost::asio::awaitable<ListRead> List(std::string prefix, std::string after,
                                        std::size_t limit) override;
  boost::asio::awaitable<LeaseRead> GetLease(std::string name,
                                             std::string fence) override;
  boost::asio::awaitable<LeaseList> ListLeases(std::string prefix,
                                               std::string after,
                                               std::size_t limit) override;
  std::int64_t SteadyNow() const override { return shards_.SteadyNow(); }
  std::optional<std::uint64_t> Count() override;
  boost::asio::awaitable<bool> Ready() override;
  std::string_view consistency() const override { return "local"; }
  fence::Shards* shards() override { return &shards_; }
  boost::asio::awaitable<fence::ScopeRecord> RecordedScopes() override {
    co_return shards_.RecordedScopes();
  }
  boost::asio::awaitable<void> RecordScopes(
      fence::ScopeRecord record) override {
    shards_.RecordScopes(record);
    co_return;
  }

 private:
  fence::Shards& shards_;
  fence::FenceStore store_;
};

}  // namespace fencepost::storage
