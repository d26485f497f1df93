#pragma once

#include <cstddef>

namespace fencepost::storage {

// --lmdb-shards: how many LMDB environments a new data directory is split
// into by default, and at most (storage::LocalEngine).
inline constexpr std::size_t kDefaultLmdbShards = 1;
inline constexpr std::size_t kMaxLmdbShards = 64;

}  // namespace fencepost::storage
