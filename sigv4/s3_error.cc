#include "sigv4/s3_error.h"

#include <utility>

namespace fencepost::sigv4 {

namespace {

// The text of the first <name>...</name> in `xml`, as S3ErrorDocument
// keeps it.
std::string Element(std::string_view xml, std::string_view name) {
  const std::string open = "<" + std::string(name) + ">";
  const std::string close = "</" + std::string(name) + ">";
  const std::size_t start = xml.find(open);
  if (start == std::string_view::npos) return "";
  const std::size_t from = start + open.size();
  const std::size_t end = xml.find(close, from);
  if (end == std::string_view::npos) return "";
  const std::string_view raw = xml.substr(from, end - from);
  static constexpr std::pair<std::string_view, char> kEntities[] = {
      {"&amp;", '&'},
      {"&lt;", '<'},
      {"&gt;", '>'},
      {"&quot;", '"'},
      {"&apos;", '\''}};
  std::string out;
  for (std::size_t i = 0; i < raw.size() && out.size() < kMaxS3ErrorField;) {
    char c = raw[i++];
    if (c == '&') {
      for (const auto& [entity, decoded] : kEntities) {
        if (raw.substr(i - 1, entity.size()) == entity) {
          c = decoded;
          i += entity.size() - 1;
          break;
        }
      }
    }
    // A line break or tab in a message becomes a space; any other control
    // character is dropped.
    if (c == '\n' || c == '\r' || c == '\t') {
      out.push_back(' ');
    } else if (static_cast<unsigned char>(c) >= 0x20 && c != 0x7f) {
      out.push_back(c);
    }
  }
  return out;
}

}  // namespace

std::optional<S3ErrorDocument> ParseS3ErrorDocument(std::string_view body) {
  const std::size_t start = body.find("<Error>");
  const std::string_view error =
      start == std::string_view::npos ? body : body.substr(start);
  S3ErrorDocument document{Element(error, "Code"), Element(error, "Message"),
                           Element(error, "RequestId")};
  if (start == std::string_view::npos && document.code.empty() &&
      document.message.empty() && document.request_id.empty()) {
    return std::nullopt;
  }
  return document;
}

}  // namespace fencepost::sigv4
