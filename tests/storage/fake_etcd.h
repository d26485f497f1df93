#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "storage/etcd_api.h"

namespace fencepost::testing {

// etcd's KV, transaction and lease API, in memory, as its JSON gateway
// speaks it (see storage/etcd_json.h): the keys with their value,
// create_revision, mod_revision, version and etcd lease; one revision per
// transaction that writes; compares on MOD, CREATE, VERSION and VALUE (a
// VALUE compare on a missing key fails, as in etcd); ranges with range_end,
// limit, count_only and keys_only; puts and deletes with prev_kv; etcd leases
// granted, kept alive and revoked, that run out on the fake's own clock (moved
// by Advance) and delete their keys when they do.
//
// Tests reach in as another replica would: Put and Delete change a key
// outside any call, and BeforeCall runs a change just before a later call
// is handled (between a read and the commit that follows it).
//
// Thread safety: one thread.
class FakeEtcd : public storage::EtcdApi {
 public:
  struct Kv {
    std::string value;
    std::int64_t create_revision = 0;
    std::int64_t mod_revision = 0;
    std::int64_t version = 0;
    std::int64_t lease = 0;
  };
  struct CallRecord {
    std::string path;
    std::string body;
  };

  Awaitable<Reply> Call(std::string_view path, std::string body,
                        bool idempotent) override;

  // Moves the etcd leases' clock on, and lets those that ran out go.
  void Advance(std::chrono::milliseconds by);
  // A write by someone else, in a revision of its own.
  void Put(const std::string& key, const std::string& value);
  void Delete(const std::string& key);
  // Runs `change` just before the `n`th call from now is handled (1: the
  // next one).
  void BeforeCall(std::size_t n, std::function<void()> change);

  const Kv* Find(const std::string& key) const;
  std::int64_t revision() const { return revision_; }
  std::size_t live_leases() const { return leases_.size(); }
  const std::vector<CallRecord>& calls() const { return calls_; }

 private:
  struct Lease {
    std::int64_t ttl_s = 0;
    std::int64_t expires_at_ms = 0;
    std::set<std::string> keys;
  };
  // The answer to one call: an HTTP status and etcd's JSON.
  struct Answer {
    int status = 200;
    std::string json;
  };

  Answer Handle(std::string_view path, const http::JsonValue& request);
  Answer Txn(const http::JsonValue& request);
  // Whether a compare holds: of its key, or of every key of its range_end.
  bool Holds(const http::JsonValue& compare) const;
  // Whether it holds of `kv` (`exists`: a key, not the zero kv of none).
  static bool HoldsFor(const http::JsonValue& compare, const Kv& kv,
                       bool exists);
  // The response of one op (the object inside response_*), applying it at
  // `revision` when it writes.
  std::string Range(const http::JsonValue& request) const;
  std::string PutAt(const http::JsonValue& request, std::int64_t revision);
  std::string DeleteAt(const http::JsonValue& request, std::int64_t revision);
  Answer LeaseGrant(const http::JsonValue& request);
  Answer LeaseKeepAlive(const http::JsonValue& request);
  Answer LeaseRevoke(const http::JsonValue& request);
  void Expire();
  void Revoke(std::int64_t id);
  void Erase(const std::string& key);
  std::string Header() const;
  std::string KvJson(const std::string& key, const Kv& kv) const;
  // The keys of a request's key and range_end, as etcd reads them.
  std::vector<std::string> KeysOf(const http::JsonValue& request) const;

  std::map<std::string, Kv> kvs_;
  std::map<std::int64_t, Lease> leases_;
  std::int64_t revision_ = 1;
  std::int64_t next_lease_ = 7587;
  std::int64_t now_ms_ = 0;
  std::vector<CallRecord> calls_;
  std::map<std::size_t, std::function<void()>> before_;  // call number
};

}  // namespace fencepost::testing
