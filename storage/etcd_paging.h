#pragma once

// Listings in etcd: a page of the keys under a base whose names start with
// a prefix, after a name, and what the page's answer holds.

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "storage/etcd_json.h"

namespace fencepost::storage::etcd {

// The smallest key above every key that starts with `prefix` ("\0", every
// key, when there is none).
std::string PrefixEnd(std::string prefix);

// The body of a range request (POST /v3/kv/range) for up to `limit` keys
// under `base` whose names (the rest of the key) start with `prefix`, after
// the name `after` ("" or below `prefix`: from the first).
std::string PageRange(const std::string& base, const std::string& prefix,
                      const std::string& after, std::size_t limit);

// One key of a page: its name (the key less `base`), value and revision.
struct PageItem {
  std::string name;
  std::string value;
  std::int64_t mod_revision = 0;
};

struct Page {
  std::vector<PageItem> items;
  bool more = false;  // etcd holds more keys in the range
  // Where the next page starts: the last name, when there are more.
  std::optional<std::string> Next() const;
};

// The page a range answer holds; nullopt when a kv is not base64 or not
// under `base`.
std::optional<Page> ReadPage(const Json& answer, std::string_view base);

}  // namespace fencepost::storage::etcd
