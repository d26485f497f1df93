#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#include "codec/key.h"
#include "codec/utf8.h"
#include "fence/scope.h"

namespace fencepost::fence {

// The longest key (and so the longest fence name) in bytes.
inline constexpr std::size_t kMaxNameBytes = 1024;

// Why a request target is not a key; kOk when it is.
enum class KeyError {
  kOk,
  kNotOriginForm,  // the target does not start with '/' (RFC 9112 3.2.1)
  kFragment,       // a '#': clients never send fragments, stores drop them
  kBadCharacter,   // a byte that must be percent-encoded appears raw
  kEmpty,
  kTooLong,
  kBadPercentEncoding,
  kInvalidUtf8,
  kNul,
  kEmptySegment,  // leading or trailing '/', or "//"
  kDotSegment,    // a "." or ".." segment
};

// Checks a request target's shape, whatever it names: origin form (RFC 9112
// section 3.2.1), no fragment, and in the path and query only the
// characters RFC 3986 allows unencoded (unreserved, sub-delims, ':', '@',
// '/', and '?' in the query) and well-formed percent escapes. Every route of
// both ports passes this before it is served; DecodeKey starts with it.
KeyError CheckTarget(std::string_view target);

// Turns a request target into a key. The target must be in origin form
// (RFC 9112 section 3.2.1): '/' then the path, then optionally '?' and a
// query; no fragment. Path and query hold only the characters RFC 3986
// allows unencoded (unreserved, sub-delims, ':', '@', '/', and '?' in the
// query) and well-formed percent escapes. The key is the path without its
// leading '/', percent-decoded once, then checked with ValidateKey; the
// query is not part of it. On success `key` holds the key; on failure it is
// unspecified.
KeyError DecodeKey(std::string_view target, std::string* key);

// Turns a target that names a fence or a lease (the admin port's
// /v1/fences/NAME and /v1/leases/NAME, without their path) into its name:
// a key, as DecodeKey, or exactly the prefix of a configured scope, which
// names that scope's fence although it need not be a key (`orders/` ends
// in '/'). On failure, DecodeKey's error.
KeyError DecodeName(std::string_view target, const Scopes& scopes,
                    std::string* name);

// The canonical path of a valid key, without the leading '/' (codec/key.h,
// which the client library shares). DecodeKey("/" + EncodeKey(k)) == k for
// every valid key, and a store that decodes the path once and resolves dot
// segments names the same resource, so a forwarding backend sends this
// instead of the client's spelling: the resource the store writes is then
// exactly the key that was fenced.
using codec::EncodeKey;

// The query of a target, with its '?' ("" when there is none).
std::string_view QueryOf(std::string_view target);

// The target a forwarding backend sends for `key`, received as
// `original_target`: `base` (a canonical path prefix without a trailing
// '/', or ""), '/', EncodeKey(key), then the original target's query. The
// one formula the http:// backend and its fuzz target share.
std::string UpstreamTarget(std::string_view base, std::string_view key,
                           std::string_view original_target);

// Checks a decoded key: 1 to kMaxNameBytes bytes of valid UTF-8
// (codec::IsValidUtf8), no NUL, no empty segment and no "." or ".." segment.
KeyError ValidateKey(std::string_view key);

// Strict UTF-8 (RFC 3629), codec/'s: keys and JSON strings share it.
using codec::IsValidUtf8;

// A short English explanation of `error`, for problem details.
std::string_view Describe(KeyError error);

}  // namespace fencepost::fence
