#include "fence/long_keys.h"

#include <cstdint>

namespace fencepost::fence {

std::uint64_t NameHash(std::string_view name) {
  std::uint64_t h = 0xcbf29ce484222325ull;  // FNV-1a, 64 bits
  for (unsigned char c : name) {
    h ^= c;
    h *= 0x100000001b3ull;
  }
  return h;
}

std::size_t ShardOf(std::string_view name, std::size_t shards) {
  return static_cast<std::size_t>(NameHash(name) % shards);
}

namespace {

void AppendBigEndian(std::string* out, std::uint64_t v, int bytes) {
  for (int i = bytes - 1; i >= 0; --i) {
    out->push_back(static_cast<char>((v >> (8 * i)) & 0xff));
  }
}

}  // namespace

bool IsLongKey(std::string_view db_key) {
  return db_key.size() > kLongPrefix && db_key[kLongPrefix] == '\0';
}

std::string_view NameOfEntry(MDB_val key, MDB_val data, NameOf name_of) {
  const std::string_view k = View(key);
  return IsLongKey(k) ? name_of(data) : k;
}

int FindSlot(MDB_txn* txn, MDB_dbi dbi, std::string_view name, NameOf name_of,
             Slot* slot) {
  slot->found = false;
  if (name.size() <= kMaxDirectKey) {
    slot->db_key.assign(name);
    MDB_val key = Val(slot->db_key);
    const int rc = mdb_get(txn, dbi, &key, &slot->data);
    if (rc == MDB_NOTFOUND) return 0;
    slot->found = rc == 0;
    return rc;
  }

  // Scan the (almost always empty or single) run of records whose keys share
  // this name's prefix and hash.
  std::string bucket(name.substr(0, kLongPrefix));
  bucket.push_back('\0');
  AppendBigEndian(&bucket, NameHash(name), 8);

  MDB_cursor* cursor = nullptr;
  if (int rc = mdb_cursor_open(txn, dbi, &cursor); rc != 0) return rc;
  MDB_val key = Val(bucket);
  MDB_val data;
  // Sequence numbers are never reused while their record exists; records can
  // be deleted (values), so the next one follows the highest in use.
  std::uint64_t next_seq = 0;
  int rc = mdb_cursor_get(cursor, &key, &data, MDB_SET_RANGE);
  while (rc == 0 && View(key).substr(0, bucket.size()) == bucket) {
    if (name_of(data) == name) {
      slot->db_key.assign(View(key));
      slot->data = data;
      slot->found = true;
      break;
    }
    const std::string_view k = View(key);
    next_seq = (static_cast<unsigned char>(k[k.size() - 2]) << 8 |
                static_cast<unsigned char>(k[k.size() - 1])) +
               1;
    rc = mdb_cursor_get(cursor, &key, &data, MDB_NEXT);
  }
  mdb_cursor_close(cursor);
  if (rc != 0 && rc != MDB_NOTFOUND) return rc;
  if (!slot->found) {
    if (next_seq > 0xffff) return MDB_KEYEXIST;
    slot->db_key = bucket;
    AppendBigEndian(&slot->db_key, next_seq, 2);
  }
  return 0;
}

}  // namespace fencepost::fence
