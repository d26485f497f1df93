#include "storage/lmdb_backend.h"

#include <cstring>
#include <memory>

#include "fence/big_endian.h"
#include "fence/errc.h"
#include "fence/long_keys.h"
#include "storage/async_commit.h"

namespace fencepost::storage {
namespace {

using fence::LoadBigEndian;
using fence::StoreBigEndian;

constexpr std::size_t kHeader = 11;  // flags, token, name length

std::string_view ValueNameOf(MDB_val data) {
  if (data.mv_size < kHeader) return {};
  const auto* p = static_cast<const char*>(data.mv_data);
  const std::size_t length = LoadBigEndian(p + 9, 2);
  return fence::View(data).substr(kHeader, length);
}

// Writes or deletes one value inside the committer's transaction.
struct ValueWrite {
  WriteKind kind;
  std::string key;
  std::string body;
  std::optional<fence::Token> token;
  MDB_dbi dbi;
  bool created = false;

  int operator()(MDB_txn* txn) {
    fence::Slot slot;
    if (int rc = fence::FindSlot(txn, dbi, key, ValueNameOf, &slot); rc != 0) {
      return rc;
    }
    MDB_val db_key = fence::Val(slot.db_key);
    if (kind == WriteKind::kDelete) {
      created = false;
      return slot.found ? mdb_del(txn, dbi, &db_key, nullptr) : 0;
    }
    created = !slot.found;
    const std::size_t name_length =
        fence::IsLongKey(slot.db_key) ? key.size() : 0;
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
};

}  // namespace

boost::asio::awaitable<ReadResult> LmdbBackend::Read(
    const ReadRequest& request) {
  const std::string& key = request.key;
  const bool head = request.head;
  ReadResult result;
  const fence::Env& env = shards_.env(shards_.IndexOf(request.fence));
  fence::Env::ReadTxn txn(env);
  if (txn.get() == nullptr) {
    result.error = fence::FromLmdb(txn.error());
    co_return result;
  }
  fence::Slot slot;
  if (int rc =
          fence::FindSlot(txn.get(), env.values(), key, ValueNameOf, &slot);
      rc != 0) {
    result.error = fence::FromLmdb(rc);
    co_return result;
  }
  if (!slot.found || slot.data.mv_size < kHeader) co_return result;
  const auto* p = static_cast<const char*>(slot.data.mv_data);
  const std::size_t body_at = kHeader + LoadBigEndian(p + 9, 2);
  result.found = true;
  if (p[0] & 1) result.token = LoadBigEndian(p + 1, 8);
  result.size = slot.data.mv_size - body_at;
  if (!head) result.body.assign(p + body_at, result.size);
  co_return result;
}

boost::asio::awaitable<WriteResult> LmdbBackend::Write(WriteRequest& request) {
  const std::size_t shard = shards_.IndexOf(request.fence);
  auto value = std::make_shared<ValueWrite>(
      ValueWrite{request.kind, std::move(request.key), std::move(request.body),
                 request.token, shards_.env(shard).values()});
  fence::FenceWrite write;
  write.fence = std::move(request.fence);
  write.token = request.token;
  write.observe = request.observe;
  write.bytes = value->key.size() + value->body.size();
  write.apply = [value](MDB_txn* txn) { return (*value)(txn); };
  WriteResult result;
  result.outcome =
      co_await AsyncCommit(shards_.committer(shard), std::move(write));
  result.created = value->created;
  co_return result;
}

boost::asio::awaitable<bool> LmdbBackend::Ready() {
  co_return shards_.Readable();
}

}  // namespace fencepost::storage
