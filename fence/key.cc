#include "fence/key.h"

namespace fencepost::fence {
namespace {

int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

}  // namespace

bool IsValidUtf8(std::string_view s) {
  std::size_t i = 0;
  while (i < s.size()) {
    const auto c = static_cast<unsigned char>(s[i]);
    std::size_t len;
    unsigned char lo = 0x80, hi = 0xBF;
    if (c < 0x80) {
      ++i;
      continue;
    } else if (c >= 0xC2 && c <= 0xDF) {
      len = 2;
    } else if (c >= 0xE0 && c <= 0xEF) {
      len = 3;
      if (c == 0xE0) lo = 0xA0;
      if (c == 0xED) hi = 0x9F;
    } else if (c >= 0xF0 && c <= 0xF4) {
      len = 4;
      if (c == 0xF0) lo = 0x90;
      if (c == 0xF4) hi = 0x8F;
    } else {
      return false;
    }
    if (i + len > s.size()) return false;
    const auto second = static_cast<unsigned char>(s[i + 1]);
    if (second < lo || second > hi) return false;
    for (std::size_t k = 2; k < len; ++k) {
      const auto cont = static_cast<unsigned char>(s[i + k]);
      if (cont < 0x80 || cont > 0xBF) return false;
    }
    i += len;
  }
  return true;
}

KeyError DecodeKey(std::string_view target, std::string* key) {
  if (const auto q = target.find('?'); q != std::string_view::npos) {
    target = target.substr(0, q);
  }
  if (!target.empty() && target.front() == '/') target.remove_prefix(1);

  key->clear();
  key->reserve(target.size());
  for (std::size_t i = 0; i < target.size(); ++i) {
    if (target[i] != '%') {
      key->push_back(target[i]);
      continue;
    }
    if (i + 2 >= target.size()) return KeyError::kBadPercentEncoding;
    const int hi = HexValue(target[i + 1]);
    const int lo = HexValue(target[i + 2]);
    if (hi < 0 || lo < 0) return KeyError::kBadPercentEncoding;
    key->push_back(static_cast<char>(hi * 16 + lo));
    i += 2;
  }
  return ValidateKey(*key);
}

KeyError ValidateKey(std::string_view key) {
  if (key.empty()) return KeyError::kEmpty;
  if (key.size() > kMaxNameBytes) return KeyError::kTooLong;
  if (key.find('\0') != std::string_view::npos) return KeyError::kNul;
  if (!IsValidUtf8(key)) return KeyError::kInvalidUtf8;

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
    case KeyError::kEmpty:
      return "the key is empty";
    case KeyError::kTooLong:
      return "the key is longer than 1024 bytes";
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

}  // namespace fencepost::fence
