#pragma once

// Building the JSON bodies of etcd's v3 API: the compares and request ops
// of a transaction (POST /v3/kv/txn), and the bodies of ranges and lease
// calls. Keys and values are raw bytes; the builders base64 them and spell
// 64-bit integers as strings, as etcd's JSON gateway reads them.

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace fencepost::storage::etcd {

// --- Compares (one each) ----------------------------------------------------

// The key's mod_revision is `revision` (0: the key does not exist).
std::string CompareMod(std::string_view key, std::int64_t revision);
// The key's create_revision is `revision` (0: the key does not exist).
std::string CompareCreate(std::string_view key, std::int64_t revision);
// The key's value is `value`.
std::string CompareValue(std::string_view key, std::string_view value);
// Every key from `key` to `end` (exclusive) has a create_revision below
// `revision`: none was created at it or since (holds when there is none).
std::string CompareCreatedBefore(std::string_view key, std::string_view end,
                                 std::int64_t revision);

// --- Request ops ------------------------------------------------------------

struct PutOptions {
  std::int64_t lease = 0;  // attach to this etcd lease (0: none)
  bool prev_kv = false;    // answer with the value it replaced, if any
};
std::string PutOp(std::string_view key, std::string_view value,
                  PutOptions options = {});
std::string DeleteOp(std::string_view key, bool prev_kv = false);
// `keys_only`: the kv without its value (its revisions only).
std::string RangeOp(std::string_view key, bool keys_only = false);
// How many keys there are from `key` to `end` (exclusive): the response's
// `count`, without the keys.
std::string CountOp(std::string_view key, std::string_view end);

// A transaction: if every compare holds, the success ops, else the failure
// ops; its responses are those of the branch taken, in order.
class Txn {
 public:
  Txn& If(std::string compare);
  Txn& Then(std::string op);
  Txn& Else(std::string op);

  std::size_t success_ops() const { return success_.size(); }
  std::size_t failure_ops() const { return failure_.size(); }
  // {"compare":[...],"success":[...],"failure":[...]}, each list left out
  // when empty.
  std::string Json() const;

 private:
  std::vector<std::string> compare_, success_, failure_;
};

// --- Other bodies -----------------------------------------------------------

// A range of one key (POST /v3/kv/range).
std::string RangeOne(std::string_view key);
// How many keys start at `key` (at most one counted; for a quorum read).
std::string CountOne(std::string_view key);
// A range of up to `limit` keys from `key` (inclusive) to `end` (exclusive).
std::string RangeFrom(std::string_view key, std::string_view end,
                      std::size_t limit);
// {"ID":"id"}: a keep-alive or revoke of an etcd lease.
std::string LeaseId(std::int64_t id);
// {"TTL":"seconds"}: a grant of an etcd lease.
std::string LeaseTtl(std::int64_t seconds);

}  // namespace fencepost::storage::etcd
