#include "fence/key.h"

#include <string>

#include "codec/percent.h"
#include "codec/utf8.h"

namespace fencepost::fence {
namespace {

bool IsUnreserved(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
         (c >= '0' && c <= '9') || c == '-' || c == '.' || c == '_' || c == '~';
}

// RFC 3986 pchar without pct-encoded: unreserved / sub-delims / ':' / '@'.
bool IsPathChar(char c) {
  return IsUnreserved(c) ||
         std::string_view("!$&'()*+,;=:@").find(c) != std::string_view::npos;
}

// Whether every byte of `part` may stand raw (plus '/', and '?' in a query)
// and every '%' starts a well-formed escape.
KeyError CheckCharacters(std::string_view part, bool query) {
  for (std::size_t i = 0; i < part.size(); ++i) {
    const char c = part[i];
    if (c == '%') {
      if (i + 2 >= part.size() || codec::HexDigitValue(part[i + 1]) < 0 ||
          codec::HexDigitValue(part[i + 2]) < 0) {
        return KeyError::kBadPercentEncoding;
      }
      i += 2;
    } else if (c == '#') {
      return KeyError::kFragment;
    } else if (!IsPathChar(c) && c != '/' && !(query && c == '?')) {
      return KeyError::kBadCharacter;
    }
  }
  return KeyError::kOk;
}

}  // namespace

std::string_view QueryOf(std::string_view target) {
  const auto q = target.find('?');
  return q == std::string_view::npos ? std::string_view() : target.substr(q);
}

KeyError CheckTarget(std::string_view target) {
  if (target.empty() || target.front() != '/') return KeyError::kNotOriginForm;
  const std::string_view query = QueryOf(target);
  const std::string_view path = target.substr(0, target.size() - query.size());
  if (auto error = CheckCharacters(path, false); error != KeyError::kOk) {
    return error;
  }
  return CheckCharacters(query, true);
}

KeyError DecodeKey(std::string_view target, std::string* key) {
  if (auto error = CheckTarget(target); error != KeyError::kOk) return error;
  const std::string_view query = QueryOf(target);
  const std::string_view path =
      target.substr(1, target.size() - 1 - query.size());
  // Cannot fail: CheckTarget saw every escape well-formed.
  *key = *codec::PercentDecode(path, codec::PercentMode::kStrict);
  return ValidateKey(*key);
}

KeyError DecodeName(std::string_view target, const Scopes& scopes,
                    std::string* name) {
  if (KeyError error = CheckTarget(target); error != KeyError::kOk) {
    return error;
  }
  // The target is well-formed, so *name holds it decoded whatever the key's
  // checks found: a scope's prefix passed --fence-scope's own checks.
  const KeyError error = DecodeKey(target, name);
  return error != KeyError::kOk && scopes.IsScope(*name) ? KeyError::kOk
                                                         : error;
}

KeyError ValidateKey(std::string_view key) {
  if (key.empty()) return KeyError::kEmpty;
  if (key.size() > kMaxNameBytes) return KeyError::kTooLong;
  if (key.find('\0') != std::string_view::npos) return KeyError::kNul;
  if (!codec::IsValidUtf8(key)) return KeyError::kInvalidUtf8;

  std::size_t start = 0;
  while (true) {
    const std::size_t end = key.find('/', start);
    const std::string_view segment =
        key.substr(start, end == std::string_view::npos ? end : end - start);
    if (segment.empty()) return KeyError::kEmptySegment;
    if (segment == "." || segment == "..") return KeyError::kDotSegment;
    if (end == std::string_view::npos) break;
    start = end + 1;
  }
  return KeyError::kOk;
}

std::string_view Describe(KeyError error) {
  switch (error) {
    case KeyError::kOk:
      return "valid key";
    case KeyError::kNotOriginForm:
      return "the request target must start with '/' (origin form)";
    case KeyError::kFragment:
      return "the request target has a fragment ('#'), which stores drop";
    case KeyError::kBadCharacter:
      return "the request target has a character that must be "
             "percent-encoded";
    case KeyError::kEmpty:
      return "the key is empty";
    case KeyError::kTooLong: {
      static const std::string kTooLong =
          "the key is longer than " + std::to_string(kMaxNameBytes) + " bytes";
      return kTooLong;
    }
    case KeyError::kBadPercentEncoding:
      return "the key has a malformed percent-encoding";
    case KeyError::kInvalidUtf8:
      return "the key is not valid UTF-8";
    case KeyError::kNul:
      return "the key contains a NUL byte";
    case KeyError::kEmptySegment:
      return "the key has an empty segment (leading, trailing or double '/')";
    case KeyError::kDotSegment:
      return "the key has a '.' or '..' segment";
  }
  return "invalid key";
}

std::string UpstreamTarget(std::string_view base, std::string_view key,
                           std::string_view original_target) {
  std::string target(base);
  target += '/';
  target += EncodeKey(key);
  target += QueryOf(original_target);
  return target;
}

}  // namespace fencepost::fence
