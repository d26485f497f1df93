#pragma once

#include <boost/beast/http/fields.hpp>
#include <string>
#include <string_view>

namespace fencepost::http {

// Strips optional whitespace (SP and HTAB, RFC 9110 section 5.6.3) from both
// ends of a field value or list element.
constexpr std::string_view TrimOws(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) {
    s.remove_prefix(1);
  }
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) {
    s.remove_suffix(1);
  }
  return s;
}

// `text` with its ASCII letters in lower case (field names, tokens).
inline std::string AsciiLower(std::string_view text) {
  std::string out(text);
  for (char& c : out) {
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  }
  return out;
}

// Removes the hop-by-hop fields (RFC 9110 section 7.6.1: Connection and the
// fields its list names, Keep-Alive, Proxy-Connection, TE, Trailer,
// Transfer-Encoding, Upgrade) from `fields`. Cannot fail.
void StripHopByHop(boost::beast::http::fields& fields);

}  // namespace fencepost::http
