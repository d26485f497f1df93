#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "fence/token.h"
#include "fence/wal.h"

namespace fencepost::fence {

// The writes of one environment that are durable in its write-ahead log but
// not yet applied to LMDB: the newest state of each fence and value they
// touched. Readers look here before LMDB.
//
// Consistency: an entry is retired only after the LMDB transaction that
// applied it committed. A reader that takes Lock(), looks the entry up
// (FindFence, FindValue, FencesAfter) and, on a miss, begins its LMDB read
// transaction before it unlocks (as FenceStore::Get and the lmdb backend's
// Read do) therefore sees every acknowledged write: either the entry is
// still here, or its transaction committed before the snapshot began.
//
// Thread safety: every method may be called from any thread.
class Overlay {
 public:
  struct Fence {
    Token token = 0;
    std::int64_t updated_at_ns = 0;
    std::uint64_t seq = 0;  // of the record that set it
    // The record that created the fence while LMDB had none, until it is
    // applied; 0 when LMDB has the fence.
    std::uint64_t created_seq = 0;
  };
  struct Value {
    bool present = false;  // false: deleted
    std::string body;
    std::optional<Token> token;
    std::uint64_t seq = 0;  // of the record that wrote it: its tag (TagOf)
    std::string content_type;
  };

  // Makes `records` visible (after their log sync, before their answers).
  // `created[i]` says whether record i's fence is new to LMDB.
  void Publish(const std::vector<WalRecord>& records,
               const std::vector<bool>& created);
  // Drops the entries `records` left, unless a later record replaced them.
  void Retire(std::span<const WalRecord> records);

  // The lock readers and the committer hold while they look entries up and,
  // on a miss, begin their LMDB read transaction (see the class comment).
  std::unique_lock<std::mutex> Lock() const {
    return std::unique_lock<std::mutex>(mu_);
  }
  // With Lock() held: the entry for `fence` or `key`, or nullptr.
  const Fence* FindFence(std::string_view fence) const;
  const Value* FindValue(std::string_view key) const;

  // With Lock() held: the fences whose names start with `prefix` and sort
  // after `after`, in name order, and how many entries are fences new to
  // LMDB.
  std::vector<std::pair<std::string, Fence>> FencesAfter(
      std::string_view prefix, std::string_view after) const;
  std::uint64_t created_count() const;
  // With Lock() held: the keys under `prefix` that have a value entry, and
  // whether each is present (false: deleted).
  std::vector<std::pair<std::string, bool>> ValuesUnder(
      std::string_view prefix) const;

 private:
  // Looks a std::string key up by its string_view, without a copy.
  struct Hash {
    using is_transparent = void;
    std::size_t operator()(std::string_view s) const {
      return std::hash<std::string_view>{}(s);
    }
  };
  mutable std::mutex mu_;
  std::map<std::string, Fence, std::less<>> fences_;
  std::unordered_map<std::string, Value, Hash, std::equal_to<>> values_;
};

}  // namespace fencepost::fence
