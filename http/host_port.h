#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace fencepost::http {

// HOST:PORT as URLs, Host fields and logs spell it (RFC 3986 section 3.2.2):
// a host with a ':' (an IPv6 literal) in brackets. Cannot fail.
std::string FormatHostPort(std::string_view host, std::string_view port);
std::string FormatHostPort(std::string_view host, std::uint16_t port);

// The parts of an authority "HOST[:PORT]" or "[V6][:PORT]".
struct HostPort {
  std::string host;                 // without brackets
  std::optional<std::string> port;  // what follows the ':', unchecked
  bool bracketed = false;           // the host was written in brackets
};

// Splits an authority. Without brackets the last ':' separates the port, so
// "::1:80" is host "::1", port "80". Returns nullopt for an unclosed '[' or
// anything but ":PORT" after the ']'. Neither part is validated further.
std::optional<HostPort> SplitHostPort(std::string_view authority);

// One server's "HOST:PORT" (or "[V6]:PORT"), as a list of servers in a URL
// names it: a host, and a port of 1 to 65535 in decimal digits; nullopt for
// anything else.
std::optional<HostPort> ParseServer(std::string_view authority);

}  // namespace fencepost::http
