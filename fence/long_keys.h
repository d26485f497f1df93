#pragma once

#include <lmdb.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace fencepost::fence {

// Database keys for names (keys and fence names) of up to kMaxNameBytes, while
// LMDB's own keys stop at 511 bytes.
//
// A name of at most kMaxDirectKey bytes is its own database key. A longer name
// is stored under name[0, kLongPrefix) + '\0' + FNV-1a-64(name) + a 2-byte
// sequence number, and its record carries the full name; lookups compare that
// full name, so two long names never share a record, even when their hashes
// collide. Names never contain NUL, so the two forms cannot meet.
//
// Database order is name order for names of up to 511 bytes; long names that
// share their first 495 bytes sort among themselves by hash.
inline constexpr std::size_t kMaxDirectKey = 511;
inline constexpr std::size_t kLongPrefix = 495;

// FNV-1a-64 of a name: the hash in long names' keys.
std::uint64_t NameHash(std::string_view name);

// Which of `shards` LMDB environments holds the fence `name` (and the values
// it guards). It uses the long-key hash, so long names whose keys could
// collide always share an environment, and database keys are unique across
// environments.
std::size_t ShardOf(std::string_view name, std::size_t shards);

// Extracts the full name stored in a long name's record.
using NameOf = std::string_view (*)(MDB_val data);

// Where a name's record is, or would go.
struct Slot {
  std::string db_key;  // the existing record's key, or the key to insert at
  bool found = false;
  MDB_val data{};  // the record, valid for the transaction, when found
};

// Finds `name`'s slot in `dbi`. Returns 0 or an LMDB error code.
int FindSlot(MDB_txn* txn, MDB_dbi dbi, std::string_view name, NameOf name_of,
             Slot* slot);

// True when `db_key` is the key of a long name (it holds a NUL).
bool IsLongKey(std::string_view db_key);

// The name a database entry stands for.
std::string_view NameOfEntry(MDB_val key, MDB_val data, NameOf name_of);

inline std::string_view View(MDB_val v) {
  return {static_cast<const char*>(v.mv_data), v.mv_size};
}
inline MDB_val Val(std::string_view s) {
  return {s.size(), const_cast<char*>(s.data())};
}

}  // namespace fencepost::fence
