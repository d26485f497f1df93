#include "s3/object_fields.h"

#include <algorithm>
#include <iterator>

#include "sigv4/canonical.h"

namespace fencepost::s3 {

namespace {

std::string Lower(std::string_view text) {
  std::string out(text);
  for (char& c : out) {
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  }
  return out;
}

}  // namespace

bool NamesFencingToken(std::string_view lower_name) {
  std::string spelled(lower_name);
  std::replace(spelled.begin(), spelled.end(), '_', '-');
  return spelled == "x-amz-meta-fencing-token";
}

bool KeptWithObject(std::string_view name) {
  static constexpr std::string_view kKept[] = {
      "content-encoding", "cache-control", "content-disposition",
      "content-language", "expires"};
  const std::string lower = Lower(name);
  if (lower.rfind("x-amz-meta-", 0) == 0) {
    return lower.size() > 11 && !NamesFencingToken(lower);
  }
  return std::find(std::begin(kKept), std::end(kKept), lower) !=
         std::end(kKept);
}

std::string StoredContentEncoding(std::string_view value) {
  std::string out;
  while (!value.empty()) {
    const std::size_t comma = std::min(value.find(','), value.size());
    const std::string_view coding = sigv4::TrimSpaces(value.substr(0, comma));
    value.remove_prefix(std::min(comma + 1, value.size()));
    if (coding.empty() || Lower(coding) == "aws-chunked") continue;
    if (!out.empty()) out += ",";
    out += coding;
  }
  return out;
}

std::string UnquoteEtag(std::string_view etag) {
  std::string_view weak;
  if (etag.substr(0, 2) == "W/") {
    weak = etag.substr(0, 2);
    etag.remove_prefix(2);
  }
  if (etag.size() >= 2 && etag.front() == '"' && etag.back() == '"') {
    etag = etag.substr(1, etag.size() - 2);
  }
  return std::string(weak) + std::string(etag);
}

}  // namespace fencepost::s3
