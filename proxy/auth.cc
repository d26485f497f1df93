#include "proxy/auth.h"

#include <boost/beast/core/string.hpp>
#include <fstream>
#include <stdexcept>

#include "http/fields.h"

namespace fencepost::proxy {
namespace {

// A token file line: surrounding blanks and a CR of a CRLF file go.
std::string_view TrimLine(std::string_view s) {
  if (!s.empty() && s.back() == '\r') s.remove_suffix(1);
  return fencepost::http::TrimOws(s);
}

// Compares without an early exit, so the time taken does not tell how many
// leading bytes matched.
bool ConstantTimeEquals(std::string_view a, std::string_view b) {
  unsigned char diff = a.size() == b.size() ? 0 : 1;
  const std::size_t n = std::max(a.size(), b.size());
  for (std::size_t i = 0; i < n; ++i) {
    const unsigned char x = i < a.size() ? a[i] : 0;
    const unsigned char y = i < b.size() ? b[i] : 0;
    diff |= x ^ y;
  }
  return diff == 0;
}

}  // namespace

BearerAuth BearerAuth::FromFile(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw std::runtime_error("--auth-token-file: cannot read " + path);
  std::vector<std::string> tokens;
  for (std::string line; std::getline(in, line);) {
    const std::string_view token = TrimLine(line);
    if (token.empty() || token.front() == '#') continue;
    tokens.emplace_back(token);
  }
  if (tokens.empty()) {
    throw std::runtime_error("--auth-token-file: " + path + " holds no token");
  }
  return BearerAuth(std::move(tokens));
}

bool BearerAuth::Allows(const Request& request) const {
  if (!enabled()) return true;
  if (request.count(boost::beast::http::field::authorization) != 1) {
    return false;
  }
  const std::string_view value = fencepost::http::TrimOws(
      request[boost::beast::http::field::authorization]);
  constexpr std::string_view kScheme = "bearer ";
  if (value.size() <= kScheme.size() ||
      !boost::beast::iequals(value.substr(0, kScheme.size()), kScheme)) {
    return false;
  }
  const std::string_view presented =
      fencepost::http::TrimOws(value.substr(kScheme.size()));
  bool allowed = false;
  for (const std::string& token : tokens_) {
    allowed |= ConstantTimeEquals(presented, token);
  }
  return allowed;
}

}  // namespace fencepost::proxy
