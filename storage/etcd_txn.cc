#include "storage/etcd_txn.h"

#include "codec/base64.h"

namespace fencepost::storage::etcd {

namespace {

std::string Quoted(std::int64_t n) { return "\"" + std::to_string(n) + "\""; }

std::string Bytes(std::string_view bytes) {
  return "\"" + codec::EncodeBase64(bytes) + "\"";
}

std::string Compare(std::string_view key, std::string_view target,
                    std::string_view field, const std::string& operand) {
  return "{\"key\":" + Bytes(key) + ",\"target\":\"" + std::string(target) +
         "\",\"result\":\"EQUAL\",\"" + std::string(field) + "\":" + operand +
         "}";
}

void AppendList(std::string* out, std::string_view name,
                const std::vector<std::string>& items) {
  if (items.empty()) return;
  if (out->size() > 1) *out += ",";
  *out += "\"" + std::string(name) + "\":[";
  for (std::size_t i = 0; i < items.size(); ++i) {
    if (i > 0) *out += ",";
    *out += items[i];
  }
  *out += "]";
}

}  // namespace

std::string CompareMod(std::string_view key, std::int64_t revision) {
  return Compare(key, "MOD", "mod_revision", Quoted(revision));
}

std::string CompareCreate(std::string_view key, std::int64_t revision) {
  return Compare(key, "CREATE", "create_revision", Quoted(revision));
}

std::string CompareValue(std::string_view key, std::string_view value) {
  return Compare(key, "VALUE", "value", Bytes(value));
}

std::string CompareCreatedBefore(std::string_view key, std::string_view end,
                                 std::int64_t revision) {
  return "{\"key\":" + Bytes(key) + ",\"range_end\":" + Bytes(end) +
         ",\"target\":\"CREATE\",\"result\":\"LESS\","
         "\"create_revision\":" +
         Quoted(revision) + "}";
}

std::string PutOp(std::string_view key, std::string_view value,
                  PutOptions options) {
  std::string op =
      "{\"request_put\":{\"key\":" + Bytes(key) + ",\"value\":" + Bytes(value);
  if (options.lease != 0) op += ",\"lease\":" + Quoted(options.lease);
  if (options.prev_kv) op += ",\"prev_kv\":true";
  return op + "}}";
}

std::string DeleteOp(std::string_view key, bool prev_kv) {
  return "{\"request_delete_range\":{\"key\":" + Bytes(key) +
         (prev_kv ? ",\"prev_kv\":true}}" : "}}");
}

std::string RangeOp(std::string_view key, bool keys_only) {
  if (keys_only) {
    return "{\"request_range\":{\"key\":" + Bytes(key) +
           ",\"keys_only\":true}}";
  }
  return "{\"request_range\":" + RangeOne(key) + "}";
}

std::string CountOp(std::string_view key, std::string_view end) {
  return "{\"request_range\":{\"key\":" + Bytes(key) +
         ",\"range_end\":" + Bytes(end) + ",\"count_only\":true}}";
}

Txn& Txn::If(std::string compare) {
  compare_.push_back(std::move(compare));
  return *this;
}

Txn& Txn::Then(std::string op) {
  success_.push_back(std::move(op));
  return *this;
}

Txn& Txn::Else(std::string op) {
  failure_.push_back(std::move(op));
  return *this;
}

std::string Txn::Json() const {
  std::string out = "{";
  AppendList(&out, "compare", compare_);
  AppendList(&out, "success", success_);
  AppendList(&out, "failure", failure_);
  return out + "}";
}

std::string RangeOne(std::string_view key) {
  return "{\"key\":" + Bytes(key) + "}";
}

std::string CountOne(std::string_view key) {
  return "{\"key\":" + Bytes(key) + ",\"limit\":\"1\",\"count_only\":true}";
}

std::string RangeFrom(std::string_view key, std::string_view end,
                      std::size_t limit) {
  return "{\"key\":" + Bytes(key) + ",\"range_end\":" + Bytes(end) +
         ",\"limit\":" + Quoted(static_cast<std::int64_t>(limit)) + "}";
}

std::string LeaseId(std::int64_t id) { return "{\"ID\":" + Quoted(id) + "}"; }

std::string LeaseTtl(std::int64_t seconds) {
  return "{\"TTL\":" + Quoted(seconds) + "}";
}

}  // namespace fencepost::storage::etcd
