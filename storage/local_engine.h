#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "storage/backend.h"
#include "storage/changes.h"
#include "storage/fences.h"
#include "storage/lmdb_shards.h"

namespace boost::asio {
class io_context;
}

namespace fencepost::fence {
class Shards;
}

namespace fencepost::storage {

// The default engine behind the public face of storage/: the data
// directory's LMDB environments, their committers (group commit through
// the write-ahead log) and appliers, seen only as Fences and, for --backend
// lmdb, as the Backend that keeps values with the fences. The engine's own
// headers (LMDB, the committer, its threads) stay behind this one.
//
// Thread safety: as LocalFences; Stop once the io loop no longer runs.
class LocalEngine {
 public:
  struct Options {
    std::string dir;
    std::uint64_t max_map_size = 64ull << 30;
    std::size_t shards = kDefaultLmdbShards;  // for a new directory only
    std::size_t max_leases = 100000;          // --max-leases, across shards
    // The io loop that drives the committers: a write is decided, logged,
    // synced and answered on the thread that read it.
    boost::asio::io_context* io = nullptr;
    // Where changes go (Fences::TellChanges), the leases the committers
    // notice ran out among them.
    ChangeSink changes;
    // A failure that leaves the engine unable to go on (a log sync failed):
    // the process must stop.
    std::function<void(const std::string&)> on_fatal;
    // Test switches.
    std::optional<std::size_t> max_queue_writes;
    std::optional<std::size_t> segment_bytes;  // the log's, over all shards
    std::optional<std::size_t> max_unapplied_bytes;  // over all shards
    bool answer_before_sync = false;
    bool checkpoint_without_sync = false;
  };

  // Opens or creates the environments and replays their logs. Throws
  // std::runtime_error with a readable message when they cannot be used.
  explicit LocalEngine(const Options& options);
  ~LocalEngine();  // Stop()
  LocalEngine(const LocalEngine&) = delete;
  LocalEngine& operator=(const LocalEngine&) = delete;

  Fences& fences() { return *fences_; }
  // The Backend of --backend lmdb: values in the fences' environments.
  std::unique_ptr<Backend> MakeBackend();
  // How many LMDB environments the data directory is split into.
  std::size_t shard_count() const;
  // Why io_uring could not be used for the log's syncs ("": it is).
  std::string sync_fallback() const;
  // What an operator is told of the directory at start (an upgrade in
  // place, a shard count other than asked), one line each.
  std::vector<std::string> Notices(std::size_t asked_shards) const;
  // Commits and applies what is queued, then stops the engine's threads.
  void Stop();

 private:
  std::string dir_;
  std::unique_ptr<fence::Shards> shards_;
  std::unique_ptr<Fences> fences_;
};

}  // namespace fencepost::storage
