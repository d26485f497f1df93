#include "s3/multipart.h"

#include <charconv>

#include "codec/hex.h"
#include "s3/object_fields.h"
#include "s3/xml.h"
#include "sigv4/crypto.h"

namespace fencepost::s3 {

namespace {

constexpr std::string_view kIdForm = "fp1.";
constexpr std::size_t kMacHex = 24;

// The root element of `document`, if it has one.
std::optional<XmlElement> Root(std::string_view document) {
  std::size_t at = SkipProlog(document);
  if (at == std::string_view::npos) return std::nullopt;
  XmlElement root;
  bool malformed = false;
  if (!NextElement(document, &at, &root, &malformed)) return std::nullopt;
  return root;
}

std::string Mac(std::string_view key, std::string_view object,
                std::string_view token, std::string_view store_id) {
  std::string message = "fencepost upload id\n";
  message += object;
  message += '\n';
  message += token;
  message += '\n';
  message += store_id;
  return codec::HexOf(sigv4::HmacSha256(key, message)).substr(0, kMacHex);
}

}  // namespace

bool IsErrorDocument(std::string_view document) {
  const std::optional<XmlElement> root = Root(document);
  return root && root->name == "Error";
}

std::optional<std::string> ResultField(std::string_view document,
                                       std::string_view name) {
  const std::optional<XmlElement> root = Root(document);
  if (!root) return std::nullopt;
  std::size_t at = 0;
  XmlElement child;
  bool malformed = false;
  while (NextElement(root->inner, &at, &child, &malformed)) {
    if (child.name == name) return DecodeXmlText(child.inner);
  }
  return std::nullopt;
}

std::string EtagInResult(std::string_view document) {
  const std::optional<std::string> etag = ResultField(document, "ETag");
  return etag ? UnquoteEtag(*etag) : "";
}

std::optional<std::string> RewriteElements(
    std::string_view document, std::string_view name,
    const std::function<std::optional<std::string>(std::string_view)>&
        rewrite) {
  const std::string open = "<" + std::string(name) + ">";
  const std::string close = "</" + std::string(name) + ">";
  std::string out;
  std::size_t at = 0;
  for (;;) {
    const std::size_t start = document.find(open, at);
    if (start == std::string_view::npos) break;
    const std::size_t text = start + open.size();
    const std::size_t end = document.find(close, text);
    if (end == std::string_view::npos) return std::nullopt;
    const std::optional<std::string> decoded =
        DecodeXmlText(document.substr(text, end - text));
    if (!decoded) return std::nullopt;
    const std::optional<std::string> rewritten = rewrite(*decoded);
    if (!rewritten) return std::nullopt;
    out += document.substr(at, text - at);
    out += EscapeXml(*rewritten);
    at = end;
  }
  out += document.substr(at);
  return out;
}

std::string RemoveElements(std::string_view document, std::string_view name) {
  const std::string open = "<" + std::string(name) + ">";
  const std::string close = "</" + std::string(name) + ">";
  std::string out;
  std::size_t at = 0;
  for (;;) {
    const std::size_t start = document.find(open, at);
    const std::size_t end = start == std::string_view::npos
                                ? std::string_view::npos
                                : document.find(close, start + open.size());
    if (end == std::string_view::npos) break;
    out += document.substr(at, start - at);
    at = end + close.size();
  }
  out += document.substr(at);
  return out;
}

std::string MakeUploadId(std::string_view mac_key, std::string_view object,
                         std::uint64_t token, std::string_view store_id) {
  const std::string decimal = std::to_string(token);
  std::string id(kIdForm);
  id += decimal;
  id += '.';
  id += Mac(mac_key, object, decimal, store_id);
  id += '.';
  id += store_id;
  return id;
}

std::optional<UploadId> ReadUploadId(std::string_view mac_key,
                                     std::string_view object,
                                     std::string_view id) {
  if (id.substr(0, kIdForm.size()) != kIdForm) {
    return UploadId{std::string(id), std::nullopt};
  }
  const std::string_view rest = id.substr(kIdForm.size());
  const std::size_t dot = rest.find('.');
  if (dot == std::string_view::npos || dot == 0 || dot > 20) {
    return std::nullopt;
  }
  const std::string_view decimal = rest.substr(0, dot);
  const std::string_view mac = rest.substr(dot + 1, kMacHex);
  if (rest.size() < dot + 1 + kMacHex + 2 || rest[dot + 1 + kMacHex] != '.') {
    return std::nullopt;
  }
  const std::string_view store_id = rest.substr(dot + 2 + kMacHex);
  std::uint64_t token = 0;
  const auto [end, error] =
      std::from_chars(decimal.data(), decimal.data() + decimal.size(), token);
  if (error != std::errc() || end != decimal.data() + decimal.size() ||
      (decimal.size() > 1 && decimal[0] == '0') ||
      !sigv4::ConstantTimeEqual(mac, Mac(mac_key, object, decimal, store_id))) {
    return std::nullopt;
  }
  return UploadId{std::string(store_id), token};
}

}  // namespace fencepost::s3
