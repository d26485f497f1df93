#include "storage/etcd_json.h"

#include <charconv>

namespace fencepost::storage::etcd {

std::int64_t Int64Of(const Json* value) {
  if (value == nullptr) return 0;
  std::int64_t out = 0;
  const std::string& text = value->text;
  const auto [end, ec] =
      std::from_chars(text.data(), text.data() + text.size(), out);
  if (ec != std::errc() || end != text.data() + text.size()) return -1;
  return out;
}

bool BytesOf(const Json& kv, std::string_view field, std::string* out) {
  out->clear();
  const Json* value = kv.Find(field);
  if (value == nullptr) return true;
  return http::DecodeBase64(value->text, out);
}

const std::vector<Json>* KvsOf(const Json& range) {
  static const std::vector<Json> kNone;
  const Json* kvs = range.Find("kvs");
  if (kvs == nullptr) return &kNone;
  if (kvs->kind != Json::Kind::kArray) return nullptr;
  return &kvs->items;
}

const std::vector<Json>* RangeKvsAt(const Json& responses, std::size_t i) {
  if (i >= responses.items.size()) return nullptr;
  const Json* range = responses.items[i].Find("response_range");
  return range != nullptr ? KvsOf(*range) : nullptr;
}

std::int64_t RangeCountAt(const Json& responses, std::size_t i) {
  if (i >= responses.items.size()) return -1;
  const Json* range = responses.items[i].Find("response_range");
  return range != nullptr ? Int64Of(range->Find("count")) : -1;
}

const Json* ResponsesOf(const Json& answer, std::size_t count) {
  static const Json kEmpty{Json::Kind::kArray, {}, {}, {}};
  const Json* responses = answer.Find("responses");
  if (responses == nullptr) return count == 0 ? &kEmpty : nullptr;
  if (responses->kind != Json::Kind::kArray ||
      responses->items.size() != count) {
    return nullptr;
  }
  return responses;
}

bool Succeeded(const Json& answer) {
  const Json* succeeded = answer.Find("succeeded");
  return succeeded != nullptr && succeeded->text == "true";
}

std::int64_t RevisionOf(const Json& answer) {
  const Json* header = answer.Find("header");
  return header != nullptr ? Int64Of(header->Find("revision")) : 0;
}

bool More(const Json& answer) {
  const Json* more = answer.Find("more");
  return more != nullptr && more->text == "true";
}

}  // namespace fencepost::storage::etcd
