#include "sigv4/canonical.h"

#include <algorithm>
#include <map>
#include <utility>

#include "codec/percent.h"

namespace fencepost::sigv4 {
namespace {

bool Unreserved(unsigned char c) {
  return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') ||
         (c >= '0' && c <= '9') || c == '-' || c == '.' || c == '_' || c == '~';
}

bool Whitespace(char c) {
  return c == ' ' || c == '\t' || c == '\r' || c == '\n';
}

char Lower(char c) { return (c >= 'A' && c <= 'Z') ? char(c - 'A' + 'a') : c; }

// RFC 3986 section 5.2.4 on an absolute path, with empty segments dropped
// as well: "//a/./b/../c/" is "/a/c/". A path whose last segment is empty,
// "." or ".." keeps its trailing slash.
std::string RemoveDotSegments(std::string_view path) {
  std::vector<std::string_view> kept;
  bool trailing_slash = false;
  path.remove_prefix(1);  // the leading '/'
  for (bool last = false; !last;) {
    size_t slash = path.find('/');
    last = slash == std::string_view::npos;
    std::string_view segment = path.substr(0, slash);
    if (!last) path.remove_prefix(slash + 1);
    if (segment == "..") {
      if (!kept.empty()) kept.pop_back();
    } else if (segment != "." && !segment.empty()) {
      kept.push_back(segment);
    }
    trailing_slash = segment == ".." || segment == "." || segment.empty();
  }
  std::string out;
  for (std::string_view segment : kept) {
    out.push_back('/');
    out.append(segment);
  }
  if (out.empty() || trailing_slash) out.push_back('/');
  return out;
}

}  // namespace

std::string UriEncode(std::string_view bytes, bool keep_slash) {
  static constexpr char kDigits[] = "0123456789ABCDEF";
  std::string out;
  out.reserve(bytes.size());
  for (unsigned char c : bytes) {
    if (Unreserved(c) || (keep_slash && c == '/')) {
      out.push_back(char(c));
    } else {
      out.push_back('%');
      out.push_back(kDigits[c >> 4]);
      out.push_back(kDigits[c & 0xf]);
    }
  }
  return out;
}

std::string CanonicalUri(std::string_view path, PathStyle style) {
  std::string absolute;
  if (path.empty() || path.front() != '/') absolute.push_back('/');
  absolute.append(path);
  if (style == PathStyle::kNormalized) absolute = RemoveDotSegments(absolute);
  return UriEncode(absolute, /*keep_slash=*/true);
}

std::optional<std::vector<QueryParam>> ParseQuery(std::string_view raw) {
  std::vector<QueryParam> params;
  while (!raw.empty()) {
    size_t amp = raw.find('&');
    std::string_view piece = raw.substr(0, amp);
    raw = amp == std::string_view::npos ? std::string_view()
                                        : raw.substr(amp + 1);
    if (piece.empty()) continue;
    size_t eq = piece.find('=');
    auto name =
        codec::PercentDecode(piece.substr(0, eq), codec::PercentMode::kStrict);
    auto value = codec::PercentDecode(eq == std::string_view::npos
                                          ? std::string_view()
                                          : piece.substr(eq + 1),
                                      codec::PercentMode::kStrict);
    if (!name || !value) return std::nullopt;
    params.push_back({std::move(*name), std::move(*value)});
  }
  return params;
}

std::string CanonicalQuery(std::span<const QueryParam> params) {
  std::vector<std::pair<std::string, std::string>> encoded;
  encoded.reserve(params.size());
  for (const QueryParam& p : params) {
    encoded.emplace_back(UriEncode(p.name, false), UriEncode(p.value, false));
  }
  std::sort(encoded.begin(), encoded.end());
  std::string out;
  for (const auto& [name, value] : encoded) {
    if (!out.empty()) out.push_back('&');
    out.append(name).append("=").append(value);
  }
  return out;
}

std::string CanonicalHeaderValue(std::string_view value) {
  std::string out;
  out.reserve(value.size());
  bool space = false;
  for (char c : value) {
    if (Whitespace(c)) {
      space = !out.empty();
      continue;
    }
    if (space) out.push_back(' ');
    space = false;
    out.push_back(c);
  }
  return out;
}

CanonicalHeaders CanonicalizeHeaders(std::span<const Header> headers) {
  std::map<std::string, std::string> by_name;  // sorted by name
  for (const Header& h : headers) {
    std::string name;
    name.reserve(h.name.size());
    for (char c : h.name) name.push_back(Lower(c));
    auto [it, inserted] = by_name.try_emplace(std::move(name));
    if (!inserted) it->second.push_back(',');
    it->second.append(CanonicalHeaderValue(h.value));
  }
  CanonicalHeaders out;
  for (const auto& [name, value] : by_name) {
    out.text.append(name).append(":").append(value).append("\n");
    if (!out.signed_headers.empty()) out.signed_headers.push_back(';');
    out.signed_headers.append(name);
  }
  return out;
}

CanonicalRequest Canonicalize(const Request& request) {
  CanonicalHeaders headers = CanonicalizeHeaders(request.headers);
  CanonicalRequest out;
  out.text.append(request.method).append("\n");
  out.text.append(CanonicalUri(request.path, request.path_style)).append("\n");
  out.text.append(CanonicalQuery(request.query)).append("\n");
  out.text.append(headers.text).append("\n");
  out.text.append(headers.signed_headers).append("\n");
  out.text.append(request.payload_hash);
  out.signed_headers = std::move(headers.signed_headers);
  return out;
}

bool EqualsLowerCase(std::string_view name, std::string_view lower) {
  if (name.size() != lower.size()) return false;
  for (std::size_t i = 0; i < name.size(); ++i) {
    char c = name[i];
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
    if (c != lower[i]) return false;
  }
  return true;
}

std::string_view TrimSpaces(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) {
    s.remove_prefix(1);
  }
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) {
    s.remove_suffix(1);
  }
  return s;
}

}  // namespace fencepost::sigv4
