#pragma once

#include <lmdb.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>

#include "fence/token.h"
#include "fence/value_fields.h"

namespace fencepost::fence {

// A fence kept in the value record of the key it is named after (format 3):
// a write to a key that is its own fence then changes one record, not one in
// each database. The fences database still holds a record for every fence
// (its existence, and a token that may be behind this one); a fence's token
// is the higher of the two (ReadFenceOf in fence_store.h).
struct KeptFence {
  Token token = 0;
  std::int64_t updated_at_ns = 0;
};

// The embedded backend's values, in an environment's values database: the
// body with the token of the write that stored it, its entity tag and its
// Content-Type (for long keys, the full key too; see long_keys.h), and the
// key's own fence when the record keeps it.
struct StoredValue {
  bool found = false;
  std::optional<Token> token;
  // The log sequence number of the write that stored it (TagOf); 0 for a
  // record written before entity tags (format 1), which has none.
  std::uint64_t seq = 0;
  std::string_view content_type;   // empty: none was sent
  std::string_view body;           // valid for the transaction
  std::optional<KeptFence> fence;  // the fence named after the key
};

// Each returns 0 or an LMDB error code.
int ReadValue(MDB_txn* txn, MDB_dbi dbi, std::string_view key,
              StoredValue* value);
// `content_type` at most kMaxContentTypeBytes (longer is cut there).
int PutValue(MDB_txn* txn, MDB_dbi dbi, std::string_view key,
             std::string_view body, std::optional<Token> token,
             std::uint64_t seq = 0, std::string_view content_type = {},
             std::optional<KeptFence> fence = std::nullopt);
// A missing value is not an error.
int DeleteValue(MDB_txn* txn, MDB_dbi dbi, std::string_view key);
// Calls `fn(key, value)` for every value in `dbi`, in database order.
int ForEachValue(
    MDB_txn* txn, MDB_dbi dbi,
    const std::function<void(std::string_view, const StoredValue&)>& fn);
// The values whose keys start with `prefix` and sort after `after`, in key
// order (long keys that share their first 495 bytes, by hash), until `fn`
// returns false.
int ForEachValueAfter(
    MDB_txn* txn, MDB_dbi dbi, std::string_view prefix, std::string_view after,
    const std::function<bool(std::string_view, const StoredValue&)>& fn);
// The same for the values whose keys start with `prefix` only.
int ForEachValueUnder(
    MDB_txn* txn, MDB_dbi dbi, std::string_view prefix,
    const std::function<void(std::string_view, const StoredValue&)>& fn);

}  // namespace fencepost::fence
