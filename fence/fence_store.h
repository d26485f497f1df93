#pragma once

#include <lmdb.h>

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

#include "fence/env.h"
#include "fence/fence_record.h"
#include "fence/long_keys.h"
#include "fence/token.h"
#include "fence/values.h"

namespace fencepost::fence {

// Reads fences from the environments of a data directory (see Shards), or
// from one environment. Each call runs in short read transactions.
// Thread safety: safe to call from any thread.
class FenceStore {
 public:
  explicit FenceStore(std::vector<const Env*> shards)
      : shards_(std::move(shards)) {}
  explicit FenceStore(const Env& env) : shards_{&env} {}

  // The fence named `name`, nullopt when there is none.
  std::error_code Get(std::string_view name,
                      std::optional<FenceRecord>* fence) const;

  // Up to `limit` fences whose names start with `prefix` and come after
  // `after` (exclusive), in database-key order over all environments (name
  // order, except that long names sort by hash among themselves; see
  // long_keys.h).
  std::error_code List(std::string_view prefix, std::string_view after,
                       std::size_t limit, FenceList* list) const;

  // How many fence records the environments hold.
  std::error_code Count(std::uint64_t* count) const;

 private:
  const Env& EnvOf(std::string_view name) const {
    return *shards_[ShardOf(name, shards_.size())];
  }

  std::vector<const Env*> shards_;
};

// In-transaction helpers the committer and readers share.
// Record layout: token (8 bytes, big-endian), update time in Unix
// nanoseconds (8 bytes, big-endian), then the full name for long names.
int ReadFence(MDB_txn* txn, MDB_dbi dbi, std::string_view name, Slot* slot,
              std::optional<FenceRecord>* fence);
int WriteFence(MDB_txn* txn, MDB_dbi dbi, const Slot& slot,
               std::string_view name, Token token, std::int64_t now_ns);
// The fence `name` as it stands: its record in the fences database, or the
// one the value record of the key of that name keeps (KeptFence in
// values.h) when that one is ahead. `slot` is the fences database's.
int ReadFenceOf(MDB_txn* txn, const Env& env, std::string_view name, Slot* slot,
                std::optional<FenceRecord>* fence);
// Whether `kept` is ahead of `record`, two records of one fence: a higher
// token, or the same token moved later.
bool KeptIsAhead(const KeptFence& kept, const FenceRecord& record);
std::string_view FenceNameOf(MDB_val data);

}  // namespace fencepost::fence
