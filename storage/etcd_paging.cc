#include "storage/etcd_paging.h"

#include "storage/etcd_txn.h"

namespace fencepost::storage::etcd {

std::string PrefixEnd(std::string prefix) {
  while (!prefix.empty()) {
    if (static_cast<unsigned char>(prefix.back()) < 0xff) {
      prefix.back() = static_cast<char>(prefix.back() + 1);
      return prefix;
    }
    prefix.pop_back();
  }
  return std::string(1, '\0');  // every key
}

std::string PageRange(const std::string& base, const std::string& prefix,
                      const std::string& after, std::size_t limit) {
  std::string from = base + prefix;
  if (!after.empty() && after >= prefix) from = base + after + '\0';
  return RangeFrom(from, PrefixEnd(base + prefix), limit);
}

std::optional<std::string> Page::Next() const {
  if (!more || items.empty()) return std::nullopt;
  return items.back().name;
}

std::optional<Page> ReadPage(const Json& answer, std::string_view base) {
  const std::vector<Json>* kvs = KvsOf(answer);
  if (kvs == nullptr) return std::nullopt;
  Page page;
  for (const Json& kv : *kvs) {
    std::string key;
    PageItem item;
    if (!BytesOf(kv, "key", &key) || key.compare(0, base.size(), base) != 0 ||
        !BytesOf(kv, "value", &item.value)) {
      return std::nullopt;
    }
    item.name = key.substr(base.size());
    item.mod_revision = Int64Of(kv.Find("mod_revision"));
    page.items.push_back(std::move(item));
  }
  page.more = More(answer);
  return page;
}

}  // namespace fencepost::storage::etcd
