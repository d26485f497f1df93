#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "proxy/http_types.h"

namespace fencepost::proxy {

// Framing Beast lets through but a proxy must not: a length that another
// parser could read differently (RFC 9112 section 6.3). Returns why, or
// nullopt when the request's framing is unambiguous.
std::optional<std::string> FramingError(const Request& req);

// What RFC 9112 requires of a request's Host field: exactly one in
// HTTP/1.1 (section 3.2), at most one in HTTP/1.0. Returns why not, or
// nullopt.
std::optional<std::string> HostError(const Request& req);

// Whether a header block (the raw bytes up to the blank line) uses obsolete
// line folding (RFC 9112 section 5.2): a line that starts with a space or
// tab. Beast joins it to the line before; a store behind the proxy might
// not, so fencepost refuses it.
bool HasObsFold(std::string_view header_bytes);

}  // namespace fencepost::proxy
