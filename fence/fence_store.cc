#include "fence/fence_store.h"

#include <algorithm>
#include <cstring>

#include "fence/big_endian.h"
#include "fence/errc.h"

namespace fencepost::fence {
namespace {

constexpr std::size_t kHeader = 16;

FenceRecord Decode(std::string_view name, MDB_val data) {
  const auto* p = static_cast<const char*>(data.mv_data);
  FenceRecord record;
  record.name.assign(name);
  if (data.mv_size >= kHeader) {
    record.token = LoadBigEndian(p, 8);
    record.updated_at_ns = static_cast<std::int64_t>(LoadBigEndian(p + 8, 8));
  }
  return record;
}

}  // namespace

std::string_view FenceNameOf(MDB_val data) {
  if (data.mv_size < kHeader) return {};
  return View(data).substr(kHeader);
}

int ReadFence(MDB_txn* txn, MDB_dbi dbi, std::string_view name, Slot* slot,
              std::optional<FenceRecord>* fence) {
  const int rc = FindSlot(txn, dbi, name, FenceNameOf, slot);
  if (rc != 0) return rc;
  if (slot->found) {
    *fence = Decode(name, slot->data);
  } else {
    fence->reset();
  }
  return 0;
}

int WriteFence(MDB_txn* txn, MDB_dbi dbi, const Slot& slot,
               std::string_view name, Token token, std::int64_t now_ns) {
  const bool is_long = IsLongKey(slot.db_key);
  std::string data(kHeader + (is_long ? name.size() : 0), '\0');
  StoreBigEndian(data.data(), token, 8);
  StoreBigEndian(data.data() + 8, static_cast<std::uint64_t>(now_ns), 8);
  if (is_long) std::memcpy(data.data() + kHeader, name.data(), name.size());
  MDB_val key = Val(slot.db_key);
  MDB_val value = Val(data);
  return mdb_put(txn, dbi, &key, &value, 0);
}

bool KeptIsAhead(const KeptFence& kept, const FenceRecord& record) {
  return kept.token > record.token ||
         (kept.token == record.token &&
          kept.updated_at_ns > record.updated_at_ns);
}

namespace {

// Brings `fence`, read from the fences database, up to the one the value
// record of its name keeps, if that is ahead.
int CatchUp(MDB_txn* txn, const Env& env, FenceRecord* fence) {
  StoredValue value;
  if (int rc = ReadValue(txn, env.values(), fence->name, &value); rc != 0) {
    return rc;
  }
  if (value.fence && KeptIsAhead(*value.fence, *fence)) {
    fence->token = value.fence->token;
    fence->updated_at_ns = value.fence->updated_at_ns;
  }
  return 0;
}

}  // namespace

int ReadFenceOf(MDB_txn* txn, const Env& env, std::string_view name, Slot* slot,
                std::optional<FenceRecord>* fence) {
  if (int rc = ReadFence(txn, env.fences(), name, slot, fence); rc != 0) {
    return rc;
  }
  return *fence ? CatchUp(txn, env, &**fence) : 0;
}

std::error_code FenceStore::Get(std::string_view name,
                                std::optional<FenceRecord>* fence) const {
  const Env& env = EnvOf(name);
  // The overlay first, then a snapshot begun under its lock (see Overlay).
  auto lock = env.overlay().Lock();
  if (const Overlay::Fence* logged = env.overlay().FindFence(name)) {
    *fence =
        FenceRecord{std::string(name), logged->token, logged->updated_at_ns};
    return {};
  }
  Env::ReadTxn txn(env);
  lock.unlock();
  if (txn.get() == nullptr) return FromLmdb(txn.error());
  Slot slot;
  return FromLmdb(ReadFenceOf(txn.get(), env, name, &slot, fence));
}

namespace {

struct Listed {
  std::string db_key;
  FenceRecord fence;
};

// Up to `limit` fences of one environment, in database order.
std::error_code ListShard(const Env& env, std::string_view prefix,
                          std::string_view after, std::size_t limit,
                          std::vector<Listed>* out) {
  auto lock = env.overlay().Lock();
  const auto logged = env.overlay().FencesAfter(prefix, after);
  Env::ReadTxn txn(env);
  lock.unlock();
  if (txn.get() == nullptr) return FromLmdb(txn.error());
  const std::size_t first = out->size();  // this environment's from here

  // Every database key of a name starting with `prefix` starts with `scan`.
  const std::string_view scan = prefix.substr(0, kLongPrefix);
  std::string start(scan);
  bool skip_exact = false;
  if (!after.empty()) {
    Slot slot;
    if (int rc = FindSlot(txn.get(), env.fences(), after, FenceNameOf, &slot);
        rc != 0) {
      return FromLmdb(rc);
    }
    if (slot.db_key > start) {
      start = slot.db_key;
      skip_exact = slot.found;
    }
  }

  MDB_cursor* cursor = nullptr;
  if (int rc = mdb_cursor_open(txn.get(), env.fences(), &cursor); rc != 0) {
    return FromLmdb(rc);
  }
  MDB_val key = Val(start);
  MDB_val data;
  // LMDB refuses an empty key, even as a range start.
  int rc = mdb_cursor_get(cursor, &key, &data,
                          start.empty() ? MDB_FIRST : MDB_SET_RANGE);
  if (rc == 0 && skip_exact && View(key) == start) {
    rc = mdb_cursor_get(cursor, &key, &data, MDB_NEXT);
  }
  for (std::size_t taken = 0; rc == 0 && taken < limit;
       rc = mdb_cursor_get(cursor, &key, &data, MDB_NEXT)) {
    if (View(key).substr(0, scan.size()) != scan) break;
    const std::string_view name = NameOfEntry(key, data, FenceNameOf);
    if (name.substr(0, prefix.size()) != prefix) continue;
    out->push_back({std::string(View(key)), Decode(name, data)});
    ++taken;
  }
  mdb_cursor_close(cursor);
  if (rc != 0 && rc != MDB_NOTFOUND) return FromLmdb(rc);
  for (std::size_t i = first; i < out->size(); ++i) {
    if (int caught = CatchUp(txn.get(), env, &(*out)[i].fence); caught != 0) {
      return FromLmdb(caught);
    }
  }
  // Logged fences not yet in LMDB replace or join those read (by name: a
  // long name's database key is computed only in LMDB).
  for (const auto& entry : logged) {
    const std::string& name = entry.first;
    FenceRecord record{name, entry.second.token, entry.second.updated_at_ns};
    auto it = std::find_if(out->begin(), out->end(), [&](const Listed& l) {
      return l.fence.name == name;
    });
    if (it != out->end()) {
      it->fence = std::move(record);
    } else {
      out->push_back({name, std::move(record)});
    }
  }
  return {};
}

}  // namespace

std::error_code FenceStore::List(std::string_view prefix,
                                 std::string_view after, std::size_t limit,
                                 FenceList* list) const {
  list->fences.clear();
  list->next.reset();
  // One more than the page from each environment tells whether more follow.
  // Database keys are unique across environments (see ShardOf), so merging
  // by key gives one order that every page continues.
  std::vector<Listed> merged;
  for (const Env* env : shards_) {
    if (auto error = ListShard(*env, prefix, after, limit + 1, &merged)) {
      return error;
    }
  }
  std::sort(merged.begin(), merged.end(), [](const Listed& a, const Listed& b) {
    return a.db_key < b.db_key;
  });
  for (Listed& entry : merged) {
    if (list->fences.size() == limit) {
      list->next = list->fences.back().name;
      break;
    }
    list->fences.push_back(std::move(entry.fence));
  }
  return {};
}

std::error_code FenceStore::Count(std::uint64_t* count) const {
  *count = 0;
  for (const Env* env : shards_) {
    auto lock = env->overlay().Lock();
    const std::uint64_t logged = env->overlay().created_count();
    Env::ReadTxn txn(*env);
    lock.unlock();
    if (txn.get() == nullptr) return FromLmdb(txn.error());
    MDB_stat stat;
    if (int rc = mdb_stat(txn.get(), env->fences(), &stat); rc != 0) {
      return FromLmdb(rc);
    }
    *count += stat.ms_entries + logged;
  }
  return {};
}

}  // namespace fencepost::fence
