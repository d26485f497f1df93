#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "codec/hex.h"

namespace fencepost::codec {

// How PercentDecode treats what is not a well-formed escape.
enum class PercentMode {
  // Paths (keys, S3 object names, SigV4's canonical parts): every '%'
  // starts two hex digits, or the input is refused; '+' is itself.
  kStrict,
  // Query values (application/x-www-form-urlencoded): '+' is a space, and a
  // '%' not followed by two hex digits is kept as it is. Never refuses.
  kLenientQuery,
};

// `in` with each %XX replaced by its byte, once (a decoded '%' is not decoded
// again). Returns nullopt only in kStrict mode, for a malformed escape. The
// result may hold any byte, NUL and invalid UTF-8 included: callers check.
std::optional<std::string> PercentDecode(std::string_view in, PercentMode mode);

}  // namespace fencepost::codec
