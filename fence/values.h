#pragma once

#include <lmdb.h>

#include <functional>
#include <optional>
#include <string_view>

#include "fence/token.h"

namespace fencepost::fence {

// The embedded backend's values, in an environment's values database: the
// body with the token of the write that stored it (for long keys, the full
// key too; see long_keys.h).
struct StoredValue {
  bool found = false;
  std::optional<Token> token;
  std::string_view body;  // valid for the transaction
};

// Each returns 0 or an LMDB error code.
int ReadValue(MDB_txn* txn, MDB_dbi dbi, std::string_view key,
              StoredValue* value);
int PutValue(MDB_txn* txn, MDB_dbi dbi, std::string_view key,
             std::string_view body, std::optional<Token> token);
// A missing value is not an error.
int DeleteValue(MDB_txn* txn, MDB_dbi dbi, std::string_view key);
// Calls `fn(key, value)` for every value in `dbi`, in database order.
int ForEachValue(
    MDB_txn* txn, MDB_dbi dbi,
    const std::function<void(std::string_view, const StoredValue&)>& fn);

}  // namespace fencepost::fence
