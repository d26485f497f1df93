#include "tests/storage/fake_etcd.h"

#include <algorithm>
#include <charconv>

#include "codec/base64.h"
#include "http/json.h"

namespace fencepost::testing {

namespace {

using Json = http::JsonValue;

std::string Quoted(std::int64_t n) { return "\"" + std::to_string(n) + "\""; }

std::string Bytes(std::string_view bytes) {
  return "\"" + codec::EncodeBase64(bytes) + "\"";
}

// A field etcd spells as a string or a number (absent: 0).
std::int64_t IntOf(const Json& object, std::string_view name) {
  const Json* value = object.Find(name);
  if (value == nullptr) return 0;
  std::int64_t out = 0;
  std::from_chars(value->text.data(), value->text.data() + value->text.size(),
                  out);
  return out;
}

std::string BytesOf(const Json& object, std::string_view name) {
  const Json* value = object.Find(name);
  std::string out;
  if (value != nullptr) http::DecodeBase64(value->text, &out);
  return out;
}

bool TrueOf(const Json& object, std::string_view name) {
  const Json* value = object.Find(name);
  return value != nullptr && value->text == "true";
}

// The ops of a transaction's branch ("success" or "failure").
const std::vector<Json>& Branch(const Json& request, std::string_view name) {
  static const std::vector<Json> kNone;
  const Json* ops = request.Find(name);
  return ops != nullptr ? ops->items : kNone;
}

}  // namespace

Awaitable<storage::EtcdApi::Reply> FakeEtcd::Call(std::string_view path,
                                                  std::string body,
                                                  bool /*idempotent*/) {
  calls_.push_back({std::string(path), body});
  if (auto it = before_.find(calls_.size()); it != before_.end()) {
    auto change = std::move(it->second);
    before_.erase(it);
    change();
  }
  Expire();
  Reply reply;
  Json request;
  const std::string error = http::ParseJson(body, &request);
  Answer answer = error.empty() ? Handle(path, request)
                                : Answer{400, "{\"error\":\"bad JSON\"}"};
  http::ParseJson(answer.json, &reply.json, http::JsonLimits{16, 100000, 64});
  reply.ok = answer.status == 200;
  reply.maybe_applied = !reply.ok;
  if (!reply.ok) {
    const Json* message = reply.json.Find("error");
    reply.error = "fake etcd answered " + std::to_string(answer.status) +
                  (message != nullptr ? ": " + message->text : "");
  }
  co_return reply;
}

FakeEtcd::Answer FakeEtcd::Handle(std::string_view path, const Json& request) {
  if (path == "/v3/kv/range") return {200, Range(request)};
  if (path == "/v3/kv/txn") return Txn(request);
  if (path == "/v3/lease/grant") return LeaseGrant(request);
  if (path == "/v3/lease/keepalive") return LeaseKeepAlive(request);
  if (path == "/v3/lease/revoke") return LeaseRevoke(request);
  return {404, "{\"error\":\"Not Found\"}"};
}

FakeEtcd::Answer FakeEtcd::Txn(const Json& request) {
  bool holds = true;
  if (const Json* compares = request.Find("compare")) {
    for (const Json& compare : compares->items) holds = holds && Holds(compare);
  }
  const std::vector<Json>& ops = Branch(request, holds ? "success" : "failure");
  // What etcd checks before it applies anything.
  std::set<std::string> written;
  bool writes = false;
  for (const Json& op : ops) {
    const Json* put = op.Find("request_put");
    const Json* del = op.Find("request_delete_range");
    if (put == nullptr && del == nullptr) continue;
    writes = true;
    if (!written.insert(BytesOf(put ? *put : *del, "key")).second) {
      return {400,
              "{\"error\":\"etcdserver: duplicate key given in txn "
              "request\"}"};
    }
    const std::int64_t lease = put != nullptr ? IntOf(*put, "lease") : 0;
    if (lease != 0 && !leases_.count(lease)) {
      return {404, "{\"error\":\"etcdserver: requested lease not found\"}"};
    }
  }
  const std::int64_t revision = writes ? revision_ + 1 : revision_;
  std::string responses;
  for (const Json& op : ops) {
    if (!responses.empty()) responses += ",";
    if (const Json* range = op.Find("request_range")) {
      responses += "{\"response_range\":" + Range(*range) + "}";
    } else if (const Json* put = op.Find("request_put")) {
      responses += "{\"response_put\":" + PutAt(*put, revision) + "}";
    } else if (const Json* del = op.Find("request_delete_range")) {
      responses +=
          "{\"response_delete_range\":" + DeleteAt(*del, revision) + "}";
    }
  }
  revision_ = revision;
  std::string out = "{\"header\":" + Header();
  if (holds) out += ",\"succeeded\":true";
  if (!responses.empty()) out += ",\"responses\":[" + responses + "]";
  return {200, out + "}"};
}

bool FakeEtcd::Holds(const Json& compare) const {
  if (compare.Find("range_end") != nullptr) {
    // Every key of the range (none: a key that does not exist).
    const std::vector<std::string> keys = KeysOf(compare);
    return keys.empty()
               ? HoldsFor(compare, Kv{}, false)
               : std::all_of(keys.begin(), keys.end(),
                             [&](const std::string& key) {
                               return HoldsFor(compare, kvs_.at(key), true);
                             });
  }
  const auto it = kvs_.find(BytesOf(compare, "key"));
  return HoldsFor(compare, it != kvs_.end() ? it->second : Kv{},
                  it != kvs_.end());
}

bool FakeEtcd::HoldsFor(const Json& compare, const Kv& kv, bool exists) {
  const Json* target = compare.Find("target");
  const std::string target_name = target ? target->text : "VERSION";
  if (!exists && target_name == "VALUE") return false;
  int order = 0;  // the key's against the operand: -1, 0, 1
  if (target_name == "VALUE") {
    const int c = kv.value.compare(BytesOf(compare, "value"));
    order = c < 0 ? -1 : c > 0 ? 1 : 0;
  } else {
    std::int64_t have = kv.version, want = IntOf(compare, "version");
    if (target_name == "MOD") {
      have = kv.mod_revision;
      want = IntOf(compare, "mod_revision");
    } else if (target_name == "CREATE") {
      have = kv.create_revision;
      want = IntOf(compare, "create_revision");
    }
    order = have < want ? -1 : have > want ? 1 : 0;
  }
  const Json* result = compare.Find("result");
  const std::string result_name = result ? result->text : "EQUAL";
  if (result_name == "NOT_EQUAL") return order != 0;
  if (result_name == "GREATER") return order > 0;
  if (result_name == "LESS") return order < 0;
  return order == 0;
}

std::vector<std::string> FakeEtcd::KeysOf(const Json& request) const {
  const std::string key = BytesOf(request, "key");
  const Json* end_field = request.Find("range_end");
  std::vector<std::string> keys;
  if (end_field == nullptr) {
    if (kvs_.count(key)) keys.push_back(key);
    return keys;
  }
  const std::string end = BytesOf(request, "range_end");
  const bool to_the_end = end == std::string(1, '\0');
  for (auto it = kvs_.lower_bound(key);
       it != kvs_.end() && (to_the_end || it->first < end); ++it) {
    keys.push_back(it->first);
  }
  return keys;
}

std::string FakeEtcd::Range(const Json& request) const {
  const std::vector<std::string> keys = KeysOf(request);
  const std::int64_t limit = IntOf(request, "limit");
  std::string out = "{\"header\":" + Header();
  if (!TrueOf(request, "count_only") && !keys.empty()) {
    out += ",\"kvs\":[";
    const std::size_t shown =
        limit > 0 ? std::min<std::size_t>(keys.size(), limit) : keys.size();
    for (std::size_t i = 0; i < shown; ++i) {
      if (i > 0) out += ",";
      Kv kv = kvs_.at(keys[i]);
      if (TrueOf(request, "keys_only")) kv.value.clear();
      out += KvJson(keys[i], kv);
    }
    out += "]";
  }
  if (limit > 0 && keys.size() > static_cast<std::size_t>(limit)) {
    out += ",\"more\":true";
  }
  if (!keys.empty()) out += ",\"count\":" + Quoted(keys.size());
  return out + "}";
}

std::string FakeEtcd::PutAt(const Json& request, std::int64_t revision) {
  const std::string key = BytesOf(request, "key");
  Kv& kv = kvs_[key];
  const Kv before = kv;
  if (kv.lease != 0 && leases_.count(kv.lease)) {
    leases_[kv.lease].keys.erase(key);
  }
  kv.value = BytesOf(request, "value");
  kv.lease = IntOf(request, "lease");
  if (kv.lease != 0) leases_[kv.lease].keys.insert(key);
  if (kv.create_revision == 0) kv.create_revision = revision;
  kv.mod_revision = revision;
  ++kv.version;
  std::string out = "{\"header\":" + Header();
  if (TrueOf(request, "prev_kv") && before.create_revision != 0) {
    out += ",\"prev_kv\":" + KvJson(key, before);
  }
  return out + "}";
}

std::string FakeEtcd::DeleteAt(const Json& request, std::int64_t /*revision*/) {
  const std::vector<std::string> keys = KeysOf(request);
  std::string out = "{\"header\":" + Header();
  if (!keys.empty()) out += ",\"deleted\":" + Quoted(keys.size());
  if (TrueOf(request, "prev_kv") && !keys.empty()) {
    out += ",\"prev_kvs\":[";
    for (std::size_t i = 0; i < keys.size(); ++i) {
      if (i > 0) out += ",";
      out += KvJson(keys[i], kvs_.at(keys[i]));
    }
    out += "]";
  }
  for (const std::string& key : keys) Erase(key);
  return out + "}";
}

FakeEtcd::Answer FakeEtcd::LeaseGrant(const Json& request) {
  const std::int64_t ttl_s = IntOf(request, "TTL");
  const std::int64_t id = next_lease_++;
  leases_[id] = Lease{ttl_s, now_ms_ + ttl_s * 1000, {}};
  return {200, "{\"header\":" + Header() + ",\"ID\":" + Quoted(id) +
                   ",\"TTL\":" + Quoted(ttl_s) + "}"};
}

FakeEtcd::Answer FakeEtcd::LeaseKeepAlive(const Json& request) {
  const std::int64_t id = IntOf(request, "ID");
  std::string result = "{\"header\":" + Header() + ",\"ID\":" + Quoted(id);
  if (auto it = leases_.find(id); it != leases_.end()) {
    it->second.expires_at_ms = now_ms_ + it->second.ttl_s * 1000;
    result += ",\"TTL\":" + Quoted(it->second.ttl_s);
  }
  // A lease that is gone answers without a TTL (zero), as etcd does.
  return {200, "{\"result\":" + result + "}}"};
}

FakeEtcd::Answer FakeEtcd::LeaseRevoke(const Json& request) {
  const std::int64_t id = IntOf(request, "ID");
  if (!leases_.count(id)) {
    return {404, "{\"error\":\"etcdserver: requested lease not found\"}"};
  }
  Revoke(id);
  return {200, "{\"header\":" + Header() + "}"};
}

void FakeEtcd::Advance(std::chrono::milliseconds by) {
  now_ms_ += by.count();
  Expire();
}

void FakeEtcd::Expire() {
  std::vector<std::int64_t> gone;
  for (const auto& [id, lease] : leases_) {
    if (lease.expires_at_ms <= now_ms_) gone.push_back(id);
  }
  for (std::int64_t id : gone) Revoke(id);
}

void FakeEtcd::Revoke(std::int64_t id) {
  const std::set<std::string> keys = leases_[id].keys;
  leases_.erase(id);
  if (keys.empty()) return;
  ++revision_;
  for (const std::string& key : keys) kvs_.erase(key);
}

void FakeEtcd::Erase(const std::string& key) {
  auto it = kvs_.find(key);
  if (it == kvs_.end()) return;
  if (auto lease = leases_.find(it->second.lease); lease != leases_.end()) {
    lease->second.keys.erase(key);
  }
  kvs_.erase(it);
}

void FakeEtcd::Put(const std::string& key, const std::string& value) {
  Kv& kv = kvs_[key];
  ++revision_;
  kv.value = value;
  if (kv.create_revision == 0) kv.create_revision = revision_;
  kv.mod_revision = revision_;
  ++kv.version;
}

void FakeEtcd::Delete(const std::string& key) {
  if (!kvs_.count(key)) return;
  ++revision_;
  Erase(key);
}

void FakeEtcd::BeforeCall(std::size_t n, std::function<void()> change) {
  before_[calls_.size() + n] = std::move(change);
}

const FakeEtcd::Kv* FakeEtcd::Find(const std::string& key) const {
  auto it = kvs_.find(key);
  return it != kvs_.end() ? &it->second : nullptr;
}

std::string FakeEtcd::Header() const {
  return "{\"cluster_id\":\"1\",\"member_id\":\"1\",\"revision\":" +
         Quoted(revision_) + ",\"raft_term\":\"2\"}";
}

std::string FakeEtcd::KvJson(const std::string& key, const Kv& kv) const {
  std::string out = "{\"key\":" + Bytes(key) +
                    ",\"create_revision\":" + Quoted(kv.create_revision) +
                    ",\"mod_revision\":" + Quoted(kv.mod_revision) +
                    ",\"version\":" + Quoted(kv.version);
  if (!kv.value.empty()) out += ",\"value\":" + Bytes(kv.value);
  if (kv.lease != 0) out += ",\"lease\":" + Quoted(kv.lease);
  return out + "}";
}

}  // namespace fencepost::testing
