#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "fence/committer.h"
#include "fence/env.h"
#include "fence/lease_limit.h"
#include "fence/scope.h"

namespace fencepost::fence {

// The LMDB environments of a data directory, each with its own committer.
//
// Every durable LMDB commit costs two flushes, and one writer cannot overlap
// them; several environments can, and the disk completes parallel flushes
// far faster than serial ones. A fence and the values it guards live in the
// environment ShardOf(fence) picks, so a write stays one transaction.
//
// Layout: DIR/shards holds the count, written once when DIR is created
// (after a first line that releases before data format 3 refuse, so that
// none of them serves a directory this release upgraded); DIR/scopes the scopes
// the directory was served with (NUL-terminated); environment i lives in
// DIR/shard-i. The count of an existing directory always wins over
// Options::count, since changing it would move fences.
// --max-map-size is split evenly among the environments.
//
// Thread safety: the accessors may be called from any thread.
class Shards {
 public:
  static constexpr std::size_t kDefaultCount = 1;
  static constexpr std::size_t kMaxCount = 64;

  struct Options {
    std::string dir;
    std::uint64_t max_map_size = 64ull << 30;
    std::size_t count = kDefaultCount;  // for a new directory only
    // --max-leases: live leases across every shard (0: no limit), decided
    // by the committers in the step that commits each grant (LeaseLimit).
    std::size_t max_leases = 0;
    Committer::Options committer;  // its lease_limit is the shards' own
  };

  // Opens or creates the environments. Throws std::runtime_error with a
  // readable message when the directory cannot be used.
  explicit Shards(const Options& options);
  ~Shards();  // Stop()
  Shards(const Shards&) = delete;
  Shards& operator=(const Shards&) = delete;

  std::size_t size() const { return envs_.size(); }
  std::size_t IndexOf(std::string_view fence) const;
  Env& env(std::size_t i) const { return *envs_[i]; }
  Committer& committer(std::size_t i) const { return *committers_[i]; }
  Committer& CommitterOf(std::string_view fence) const {
    return committer(IndexOf(fence));
  }
  std::vector<const Env*> envs() const;
  // The lease table of the environment that holds `fence`.
  LeaseTable& LeasesOf(std::string_view fence) const {
    return env(IndexOf(fence)).lease_table();
  }
  // The monotonic clock the committers measure lease expiry on.
  std::int64_t SteadyNow() const { return steady_now_(); }
  // Whether every environment can begin a read transaction (for /readyz).
  bool Readable() const;

  // Commits what is queued, then stops every committer. Idempotent.
  void Stop();

  // The record of the --fence-scope prefixes in DIR/scopes (ScopeRecord,
  // empty when there is none), and its durable, atomic replacement. Both
  // throw std::runtime_error when the file cannot be read or written.
  ScopeRecord RecordedScopes() const;
  void RecordScopes(const ScopeRecord& record) const;

  // Why the directory cannot be served with the scopes `after` when it was
  // last served with `before` (empty: it can). A value lives in the shard
  // of the fence that guarded it when it was written; a scope change that
  // gives a stored value's key a fence in another shard would leave the
  // value where no read or write looks for it, so such a change is refused
  // until the values are gone. Reads every value under the prefixes that
  // differ between the two, logged or applied. Throws std::runtime_error
  // when an environment cannot be read.
  std::string RefuseScopeChange(const Scopes& before,
                                const Scopes& after) const;

 private:
  std::string dir_;
  std::function<std::int64_t()> steady_now_;
  std::vector<std::unique_ptr<Env>> envs_;
  std::unique_ptr<LeaseLimit> lease_limit_;  // outlives the committers
  std::vector<std::unique_ptr<Committer>> committers_;
};

}  // namespace fencepost::fence
