#include "s3/listing.h"

#include <algorithm>
#include <map>

#include "codec/base64.h"
#include "s3/error.h"
#include "s3/xml.h"

namespace fencepost::s3 {

// ListObjectsV2 within PREFIX.

namespace {

constexpr std::size_t kMaxListKeys = 1000;
constexpr std::size_t kMaxTokenBytes = 8192;
constexpr std::string_view kListParams[] = {
    "list-type",          "prefix",      "delimiter",   "max-keys",
    "continuation-token", "start-after", "fetch-owner", "encoding-type"};

ListQuery RefuseList(std::string why) {
  ListQuery query;
  query.error = std::move(why);
  return query;
}

bool StartsWithNoCase(std::string_view text, std::string_view lower_head) {
  if (text.size() < lower_head.size()) return false;
  for (std::size_t i = 0; i < lower_head.size(); ++i) {
    const char c = text[i];
    if ((c >= 'A' && c <= 'Z' ? char(c - 'A' + 'a') : c) != lower_head[i]) {
      return false;
    }
  }
  return true;
}

// max-keys as S3 takes it (0 to 2147483647), then at most 1000.
std::optional<std::string> MaxKeys(std::string_view text) {
  if (text.empty() || text.size() > 10 ||
      text.find_first_not_of("0123456789") != std::string_view::npos) {
    return std::nullopt;
  }
  const unsigned long long keys = std::stoull(std::string(text));
  if (keys > 2147483647ull) return std::nullopt;
  return std::to_string(std::min<unsigned long long>(keys, kMaxListKeys));
}

using ListParams = std::map<std::string, std::string, std::less<>>;

// The store's query for the client's parameters, each known and given once.
ListQuery ListQueryOf(const ListParams& given, std::string_view key_prefix) {
  const auto value = [&given](std::string_view name) -> const std::string* {
    const auto it = given.find(name);
    return it == given.end() ? nullptr : &it->second;
  };
  ListQuery query;
  const std::string* list_type = value("list-type");
  if (list_type == nullptr || *list_type != "2") {
    return RefuseList("Only ListObjectsV2 (list-type=2) is served");
  }
  query.store.push_back({"list-type", "2"});
  const std::string* prefix = value("prefix");
  std::string store_prefix(key_prefix);
  if (prefix != nullptr) store_prefix += *prefix;
  if (!store_prefix.empty()) query.store.push_back({"prefix", store_prefix});
  if (const std::string* delimiter = value("delimiter");
      delimiter != nullptr && !delimiter->empty()) {
    query.store.push_back({"delimiter", *delimiter});
  }
  if (const std::string* given_max = value("max-keys")) {
    const std::optional<std::string> max_keys = MaxKeys(*given_max);
    if (!max_keys) {
      return RefuseList(
          "Provided max-keys not an integer or within integer range");
    }
    query.store.push_back({"max-keys", *max_keys});
  }
  if (const std::string* token = value("continuation-token")) {
    std::optional<std::string> store_token =
        StoreContinuationToken(*token, key_prefix);
    if (!store_token) {
      return RefuseList("The continuation token provided is incorrect");
    }
    query.store.push_back({"continuation-token", std::move(*store_token)});
    query.continuation_token = *token;
  }
  if (const std::string* after = value("start-after");
      after != nullptr && !after->empty()) {
    query.store.push_back({"start-after", std::string(key_prefix) + *after});
  }
  if (const std::string* owner = value("fetch-owner")) {
    if (*owner != "true" && *owner != "false") {
      return RefuseList("Invalid fetch-owner: it is true or false");
    }
    query.store.push_back({"fetch-owner", *owner});
  }
  if (const std::string* encoding = value("encoding-type")) {
    if (*encoding != "url") {
      return RefuseList("Invalid Encoding Method specified in Request");
    }
    query.url_encoding = true;
  }
  return query;
}

// A key, prefix, delimiter or start-after as the client reads it.
std::string ForClient(std::string_view raw, bool url) {
  return EscapeXml(url ? sigv4::UriEncode(raw, true) : std::string(raw));
}

// `raw` less `key_prefix`, or nullopt when it is not under it or names
// PREFIX/ itself.
std::optional<std::string_view> Strip(std::string_view raw,
                                      std::string_view key_prefix) {
  if (raw.substr(0, key_prefix.size()) != key_prefix) return std::nullopt;
  raw.remove_prefix(key_prefix.size());
  if (raw.empty()) return std::nullopt;
  return raw;
}

// The client's listing as it is read from the store's.
struct ListPage {
  std::map<std::string, std::string, std::less<>> leaves;  // decoded
  std::string entries;  // Contents and CommonPrefixes, for the client
  std::size_t kept = 0;
  // Without encoding-type=url: the first name XML cannot carry, if any.
  std::optional<std::string> uncarried;
};

// A Contents or CommonPrefixes element (`entry`) for the client, its
// `key_name` child (Key, Prefix) without PREFIX and its other children as
// the store wrote them; nothing when it is not under PREFIX. False when it
// cannot be read.
bool AddEntry(const XmlElement& entry, std::string_view key_name,
              std::string_view key_prefix, bool url, ListPage* page) {
  std::optional<std::string> key;
  std::string others;
  std::size_t at = 0;
  XmlElement child;
  bool malformed = false;
  while (NextElement(entry.inner, &at, &child, &malformed)) {
    if (child.name != key_name) {
      others += child.raw;
    } else if (key || !(key = DecodeXmlText(child.inner))) {
      return false;
    }
  }
  if (malformed || !key) return false;
  const std::optional<std::string_view> stripped = Strip(*key, key_prefix);
  if (!stripped) return true;
  if (!url && !XmlCarries(*stripped) && !page->uncarried) {
    page->uncarried = std::string(*stripped);
  }
  const std::string name(entry.name);
  const std::string tag(key_name);
  page->entries += "<" + name + "><" + tag + ">" + ForClient(*stripped, url) +
                   "</" + tag + ">" + others + "</" + name + ">";
  ++page->kept;
  return true;
}

// One child of ListBucketResult into `page`; false, with why, when it
// cannot be read.
bool ReadChild(const XmlElement& child, std::string_view key_prefix, bool url,
               ListPage* page, std::string* error) {
  static constexpr std::string_view kLeaves[] = {"Prefix",
                                                 "Delimiter",
                                                 "StartAfter",
                                                 "ContinuationToken",
                                                 "NextContinuationToken",
                                                 "MaxKeys",
                                                 "IsTruncated"};
  if (child.name == "EncodingType") {
    *error = "the store encoded its listing unasked";
    return false;
  }
  if (child.name == "Contents" || child.name == "CommonPrefixes") {
    const bool contents = child.name == "Contents";
    if (AddEntry(child, contents ? "Key" : "Prefix", key_prefix, url, page)) {
      return true;
    }
    *error = "a " + std::string(child.name) +
             " of the store's listing is unreadable";
    return false;
  }
  if (std::find(std::begin(kLeaves), std::end(kLeaves), child.name) ==
      std::end(kLeaves)) {
    return true;  // Name (the bucket's, written anew), KeyCount, others
  }
  std::optional<std::string> text = DecodeXmlText(child.inner);
  if (!text || !page->leaves.emplace(child.name, std::move(*text)).second) {
    *error = "the store's " + std::string(child.name) + " is unreadable";
    return false;
  }
  return true;
}

// The client's ListBucketResult.
std::string WriteListing(const ListPage& page, std::string_view key_prefix,
                         const ListQuery& query, std::string_view bucket) {
  const auto leaf = [&page](std::string_view name) -> const std::string* {
    const auto it = page.leaves.find(name);
    return it == page.leaves.end() ? nullptr : &it->second;
  };
  const auto element = [](std::string_view name, std::string_view text) {
    return "<" + std::string(name) + ">" + std::string(text) + "</" +
           std::string(name) + ">";
  };
  const bool url = query.url_encoding;
  std::string out =
      "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<ListBucketResult "
      "xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\">";
  out += element("Name", EscapeXml(bucket));
  std::optional<std::string_view> prefix;
  if (const std::string* given = leaf("Prefix")) {
    prefix = Strip(*given, key_prefix);
  }
  out += element("Prefix", ForClient(prefix.value_or(""), url));
  if (const std::string* delimiter = leaf("Delimiter")) {
    out += element("Delimiter", ForClient(*delimiter, url));
  }
  if (const std::string* after = leaf("StartAfter")) {
    if (const auto stripped = Strip(*after, key_prefix)) {
      out += element("StartAfter", ForClient(*stripped, url));
    }
  }
  if (!query.continuation_token.empty()) {
    out += element("ContinuationToken", EscapeXml(query.continuation_token));
  }
  out += element("KeyCount", std::to_string(page.kept));
  if (const std::string* max_keys = leaf("MaxKeys")) {
    out += element("MaxKeys", EscapeXml(*max_keys));
  }
  if (url) out += element("EncodingType", "url");
  if (const std::string* truncated = leaf("IsTruncated")) {
    out += element("IsTruncated", EscapeXml(*truncated));
  }
  if (const std::string* next = leaf("NextContinuationToken")) {
    out += element("NextContinuationToken",
                   EscapeXml(ClientContinuationToken(*next, key_prefix)));
  }
  out += page.entries;
  out += "</ListBucketResult>";
  return out;
}

}  // namespace

ListQuery ParseListQuery(std::string_view client_query,
                         std::string_view key_prefix) {
  const auto params = sigv4::ParseQuery(client_query);
  if (!params) {
    return RefuseList("The query string is not percent-encoded correctly");
  }
  ListParams given;
  for (const sigv4::QueryParam& param : *params) {
    if (StartsWithNoCase(param.name, "x-amz-")) continue;
    if (param.name == "x-id" && param.value == "ListObjectsV2") continue;
    if (std::find(std::begin(kListParams), std::end(kListParams), param.name) ==
        std::end(kListParams)) {
      return RefuseList("ListObjectsV2 does not take the parameter " +
                        Bounded(param.name));
    }
    if (!given.emplace(param.name, param.value).second) {
      return RefuseList("The parameter " + param.name + " is given twice");
    }
  }
  return ListQueryOf(given, key_prefix);
}

std::string ClientContinuationToken(std::string_view store_token,
                                    std::string_view key_prefix) {
  if (!key_prefix.empty() &&
      store_token.substr(0, key_prefix.size()) == key_prefix) {
    return codec::EncodeBase64(
        "k" + std::string(store_token.substr(key_prefix.size())));
  }
  return codec::EncodeBase64("t" + std::string(store_token));
}

std::optional<std::string> StoreContinuationToken(std::string_view client_token,
                                                  std::string_view key_prefix) {
  std::string bytes;
  if (client_token.size() > kMaxTokenBytes ||
      !codec::DecodeBase64(client_token, &bytes) || bytes.empty()) {
    return std::nullopt;
  }
  if (bytes.front() == 'k') return std::string(key_prefix) + bytes.substr(1);
  if (bytes.front() == 't') return bytes.substr(1);
  return std::nullopt;
}

std::optional<std::string> RewriteListing(std::string_view store_xml,
                                          std::string_view key_prefix,
                                          const ListQuery& query,
                                          std::string_view bucket,
                                          std::string* error,
                                          bool* needs_url_encoding) {
  if (store_xml.size() > kMaxListingBytes) {
    *error = "the store's listing is larger than " +
             std::to_string(kMaxListingBytes) + " bytes";
    return std::nullopt;
  }
  std::size_t at = SkipProlog(store_xml);
  XmlElement root;
  bool malformed = false;
  if (at == std::string_view::npos ||
      !NextElement(store_xml, &at, &root, &malformed) ||
      root.name != "ListBucketResult") {
    *error = "the store's answer is not a ListBucketResult";
    return std::nullopt;
  }
  ListPage page;
  at = 0;
  XmlElement child;
  while (NextElement(root.inner, &at, &child, &malformed)) {
    if (!ReadChild(child, key_prefix, query.url_encoding, &page, error)) {
      return std::nullopt;
    }
  }
  if (malformed) {
    *error = "the store's ListBucketResult is not well-formed";
    return std::nullopt;
  }
  for (const std::string_view leaf : {"Prefix", "Delimiter", "StartAfter"}) {
    const auto it = page.leaves.find(leaf);
    if (!query.url_encoding && !page.uncarried && it != page.leaves.end() &&
        !XmlCarries(it->second)) {
      page.uncarried = std::string(
          Strip(it->second, key_prefix).value_or(std::string_view(it->second)));
    }
  }
  if (page.uncarried) {
    // Dropping or replacing what XML cannot carry would show another name.
    *error = "the listing holds the name " +
             sigv4::UriEncode(*page.uncarried, true) +
             " (percent-encoded here), which XML 1.0 cannot carry: list with "
             "encoding-type=url";
    if (needs_url_encoding != nullptr) *needs_url_encoding = true;
    return std::nullopt;
  }
  return WriteListing(page, key_prefix, query, bucket);
}

}  // namespace fencepost::s3
