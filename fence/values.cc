#include "fence/values.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <string>

#include "fence/big_endian.h"
#include "fence/long_keys.h"

namespace fencepost::fence {
namespace {

// Record layout. Format 1 (before entity tags): flags (bit 0: a token
// follows), token (8 bytes, big-endian), the length of the stored name (2
// bytes: 0 unless the key is long), the name, then the body. Format 2 sets
// flag bit 1 and puts, after the name's length, the sequence number of the
// record that wrote it (8 bytes) and the Content-Type's length (1 byte);
// then the name, the Content-Type and the body. Format 3 adds flag bit 2: the
// record keeps the key's own fence, whose token and update time (8 bytes
// each, big-endian) follow the format-2 header.
constexpr std::size_t kHeader1 = 11;
constexpr std::size_t kHeader2 = 20;
constexpr std::size_t kFenceBytes = 16;
constexpr char kHasToken = 1;
constexpr char kTagged = 2;
constexpr char kKeepsFence = 4;

struct Layout {
  std::size_t name_at = 0, name_length = 0;
  std::size_t type_at = 0, type_length = 0;
  std::size_t body_at = 0;
};

// Where the parts of the record at `data` are; false when it is too short.
bool LayoutOf(MDB_val data, Layout* layout) {
  const auto* p = static_cast<const char*>(data.mv_data);
  if (data.mv_size < kHeader1) return false;
  const bool tagged = p[0] & kTagged;
  const std::size_t header =
      tagged ? kHeader2 + ((p[0] & kKeepsFence) ? kFenceBytes : 0) : kHeader1;
  if (data.mv_size < header) return false;
  layout->name_at = header;
  layout->name_length = LoadBigEndian(p + 9, 2);
  layout->type_at = header + layout->name_length;
  layout->type_length =
      tagged ? static_cast<unsigned char>(p[kHeader2 - 1]) : 0;
  layout->body_at = layout->type_at + layout->type_length;
  return layout->body_at <= data.mv_size;
}

std::string_view ValueNameOf(MDB_val data) {
  Layout layout;
  if (!LayoutOf(data, &layout)) return {};
  return View(data).substr(layout.name_at, layout.name_length);
}

// The value in a record found at `data`, laid out as `layout` says.
StoredValue Decode(MDB_val data, const Layout& layout) {
  const auto* p = static_cast<const char*>(data.mv_data);
  StoredValue value;
  value.found = true;
  if (p[0] & kHasToken) value.token = LoadBigEndian(p + 1, 8);
  if (p[0] & kTagged) value.seq = LoadBigEndian(p + 11, 8);
  if ((p[0] & kTagged) && (p[0] & kKeepsFence)) {
    value.fence = KeptFence{
        LoadBigEndian(p + kHeader2, 8),
        static_cast<std::int64_t>(LoadBigEndian(p + kHeader2 + 8, 8))};
  }
  value.content_type = View(data).substr(layout.type_at, layout.type_length);
  value.body = View(data).substr(layout.body_at);
  return value;
}

}  // namespace

bool ValidContentType(std::string_view type) {
  if (type.size() > kMaxContentTypeBytes) return false;
  for (const char c : type) {
    const auto u = static_cast<unsigned char>(c);
    if ((u < 0x20 && u != '\t') || u == 0x7f) return false;
  }
  return true;
}

bool ValidTag(std::string_view tag) {
  if (tag.empty() || tag.size() > 255) return false;
  for (const char c : tag) {
    const auto u = static_cast<unsigned char>(c);
    if (u < 0x21 || u == '"' || u == 0x7f) return false;
  }
  return true;
}

std::string TagOf(std::uint64_t seq) {
  char text[17];
  const int n = std::snprintf(text, sizeof text, "%llx",
                              static_cast<unsigned long long>(seq));
  return std::string(text, static_cast<std::size_t>(n));
}

int ReadValue(MDB_txn* txn, MDB_dbi dbi, std::string_view key,
              StoredValue* value) {
  *value = {};
  Slot slot;
  if (int rc = FindSlot(txn, dbi, key, ValueNameOf, &slot); rc != 0) return rc;
  Layout layout;
  if (!slot.found || !LayoutOf(slot.data, &layout)) return 0;
  *value = Decode(slot.data, layout);
  return 0;
}

int PutValue(MDB_txn* txn, MDB_dbi dbi, std::string_view key,
             std::string_view body, std::optional<Token> token,
             std::uint64_t seq, std::string_view content_type,
             std::optional<KeptFence> fence) {
  Slot slot;
  if (int rc = FindSlot(txn, dbi, key, ValueNameOf, &slot); rc != 0) return rc;
  MDB_val db_key = Val(slot.db_key);
  const std::size_t name_length = IsLongKey(slot.db_key) ? key.size() : 0;
  content_type = content_type.substr(0, kMaxContentTypeBytes);
  const std::size_t header = kHeader2 + (fence ? kFenceBytes : 0);
  MDB_val data{header + name_length + content_type.size() + body.size(),
               nullptr};
  if (int rc = mdb_put(txn, dbi, &db_key, &data, MDB_RESERVE); rc != 0) {
    return rc;
  }
  auto* p = static_cast<char*>(data.mv_data);
  p[0] = static_cast<char>(kTagged | (token ? kHasToken : 0) |
                           (fence ? kKeepsFence : 0));
  StoreBigEndian(p + 1, token.value_or(0), 8);
  StoreBigEndian(p + 9, name_length, 2);
  StoreBigEndian(p + 11, seq, 8);
  p[kHeader2 - 1] = static_cast<char>(content_type.size());
  if (fence) {
    StoreBigEndian(p + kHeader2, fence->token, 8);
    StoreBigEndian(p + kHeader2 + 8,
                   static_cast<std::uint64_t>(fence->updated_at_ns), 8);
  }
  char* at = p + header;
  // (An empty view may have no data at all: memcpy must not see it.)
  for (const std::string_view part :
       {key.substr(0, name_length), content_type, body}) {
    if (!part.empty()) std::memcpy(at, part.data(), part.size());
    at += part.size();
  }
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
    Layout layout;
    if (!LayoutOf(data, &layout)) continue;
    fn(NameOfEntry(key, data, ValueNameOf), Decode(data, layout));
  }
  mdb_cursor_close(cursor);
  return rc == MDB_NOTFOUND ? 0 : rc;
}

int ForEachValueAfter(
    MDB_txn* txn, MDB_dbi dbi, std::string_view prefix, std::string_view after,
    const std::function<bool(std::string_view, const StoredValue&)>& fn) {
  MDB_cursor* cursor = nullptr;
  if (int rc = mdb_cursor_open(txn, dbi, &cursor); rc != 0) return rc;
  // Database keys begin with the name's first kLongPrefix bytes
  // (long_keys.h), so every name under `prefix` (after `after`) sorts from
  // there on.
  const std::string start(prefix.substr(0, kLongPrefix));
  const std::string from(std::max(prefix, after).substr(0, kLongPrefix));
  MDB_val key = Val(from), data;
  int rc = mdb_cursor_get(cursor, &key, &data, MDB_SET_RANGE);
  for (; rc == 0; rc = mdb_cursor_get(cursor, &key, &data, MDB_NEXT)) {
    if (!View(key).starts_with(start)) break;
    Layout layout;
    const std::string_view name = NameOfEntry(key, data, ValueNameOf);
    if (!name.starts_with(prefix) || name <= after ||
        !LayoutOf(data, &layout)) {
      continue;
    }
    if (!fn(name, Decode(data, layout))) break;
  }
  mdb_cursor_close(cursor);
  return rc == MDB_NOTFOUND ? 0 : rc;
}

int ForEachValueUnder(
    MDB_txn* txn, MDB_dbi dbi, std::string_view prefix,
    const std::function<void(std::string_view, const StoredValue&)>& fn) {
  return ForEachValueAfter(txn, dbi, prefix, "",
                           [&](std::string_view name, const StoredValue& v) {
                             fn(name, v);
                             return true;
                           });
}

}  // namespace fencepost::fence
