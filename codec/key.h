#pragma once

#include <string>
#include <string_view>

namespace fencepost::codec {

// A key (or lease name) as it goes into a request path, without the leading
// '/': unreserved characters (RFC 3986 section 2.3) and '/' as they are,
// every other byte as an upper-case percent escape. The server decodes the
// path once back to the key, so this is the key's canonical spelling.
std::string EncodeKey(std::string_view key);

}  // namespace fencepost::codec
