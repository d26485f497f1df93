#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace fencepost::fence {

// The longest key (and so the longest fence name) in bytes.
inline constexpr std::size_t kMaxNameBytes = 1024;

// Why a request target is not a key; kOk when it is.
enum class KeyError {
  kOk,
  kEmpty,
  kTooLong,
  kBadPercentEncoding,
  kInvalidUtf8,
  kNul,
  kEmptySegment,  // leading or trailing '/', or "//"
  kDotSegment,    // a "." or ".." segment
};

// Turns a request target into a key: the path without its leading '/' and
// without any query string, percent-decoded once, then checked with
// ValidateKey. On success `key` holds the key; on failure it is unspecified.
KeyError DecodeKey(std::string_view target, std::string* key);

// Checks a decoded key: 1 to kMaxNameBytes bytes of valid UTF-8, no NUL, no
// empty segment and no "." or ".." segment.
KeyError ValidateKey(std::string_view key);

// Strict UTF-8 (RFC 3629): no overlong forms, no surrogates, nothing past
// U+10FFFF.
bool IsValidUtf8(std::string_view s);

// A short English explanation of `error`, for problem details.
std::string_view Describe(KeyError error);

}  // namespace fencepost::fence
