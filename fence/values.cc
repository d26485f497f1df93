#include "fence/values.h"

#include <cstring>
#include <string>

#include "fence/big_endian.h"
#include "fence/long_keys.h"

namespace fencepost::fence {
namespace {

// Record layout: flags (bit 0: a token follows), token (8 bytes,
// big-endian), the length of the stored name (2 bytes: 0 unless the key is
// long), the name, then the body.
constexpr std::size_t kHeader = 11;

std::string_view ValueNameOf(MDB_val data) {
  if (data.mv_size < kHeader) return {};
  const auto* p = static_cast<const char*>(data.mv_data);
  const std::size_t length = LoadBigEndian(p + 9, 2);
  return View(data).substr(kHeader, length);
}

// The value in a record found at `data` (at least kHeader bytes).
StoredValue Decode(MDB_val data) {
  const auto* p = static_cast<const char*>(data.mv_data);
  StoredValue value;
  value.found = true;
  if (p[0] & 1) value.token = LoadBigEndian(p + 1, 8);
  value.body = View(data).substr(kHeader + LoadBigEndian(p + 9, 2));
  return value;
}

}  // namespace

int ReadValue(MDB_txn* txn, MDB_dbi dbi, std::string_view key,
              StoredValue* value) {
  *value = {};
  Slot slot;
  if (int rc = FindSlot(txn, dbi, key, ValueNameOf, &slot); rc != 0) return rc;
  if (!slot.found || slot.data.mv_size < kHeader) return 0;
  *value = Decode(slot.data);
  return 0;
}

int PutValue(MDB_txn* txn, MDB_dbi dbi, std::string_view key,
             std::string_view body, std::optional<Token> token) {
  Slot slot;
  if (int rc = FindSlot(txn, dbi, key, ValueNameOf, &slot); rc != 0) return rc;
  MDB_val db_key = Val(slot.db_key);
  const std::size_t name_length = IsLongKey(slot.db_key) ? key.size() : 0;
  MDB_val data{kHeader + name_length + body.size(), nullptr};
  if (int rc = mdb_put(txn, dbi, &db_key, &data, MDB_RESERVE); rc != 0) {
    return rc;
  }
  auto* p = static_cast<char*>(data.mv_data);
  p[0] = token ? 1 : 0;
  StoreBigEndian(p + 1, token.value_or(0), 8);
  StoreBigEndian(p + 9, name_length, 2);
  std::memcpy(p + kHeader, key.data(), name_length);
  std::memcpy(p + kHeader + name_length, body.data(), body.size());
  return 0;
}

int DeleteValue(MDB_txn* txn, MDB_dbi dbi, std::string_view key) {
  Slot slot;
  if (int rc = FindSlot(txn, dbi, key, ValueNameOf, &slot); rc != 0) return rc;
  if (!slot.found) return 0;
  MDB_val db_key = Val(slot.db_key);
  return mdb_del(txn, dbi, &db_key, nullptr);
}

int ForEachValue(
    MDB_txn* txn, MDB_dbi dbi,
    const std::function<void(std::string_view, const StoredValue&)>& fn) {
  MDB_cursor* cursor = nullptr;
  if (int rc = mdb_cursor_open(txn, dbi, &cursor); rc != 0) return rc;
  MDB_val key, data;
  int rc = mdb_cursor_get(cursor, &key, &data, MDB_FIRST);
  for (; rc == 0; rc = mdb_cursor_get(cursor, &key, &data, MDB_NEXT)) {
    if (data.mv_size < kHeader) continue;
    fn(NameOfEntry(key, data, ValueNameOf), Decode(data));
  }
  mdb_cursor_close(cursor);
  return rc == MDB_NOTFOUND ? 0 : rc;
}

}  // namespace fencepost::fence
