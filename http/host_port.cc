#include "http/host_port.h"

namespace fencepost::http {

std::string FormatHostPort(std::string_view host, std::string_view port) {
  std::string out;
  if (host.find(':') != std::string_view::npos) {
    out.append("[").append(host).append("]");
  } else {
    out.append(host);
  }
  return out.append(":").append(port);
}

std::string FormatHostPort(std::string_view host, std::uint16_t port) {
  return FormatHostPort(host, std::to_string(port));
}

std::optional<HostPort> SplitHostPort(std::string_view authority) {
  HostPort out;
  std::size_t colon = std::string_view::npos;
  if (!authority.empty() && authority.front() == '[') {
    const std::size_t close = authority.find(']');
    if (close == std::string_view::npos) return std::nullopt;
    out.host = authority.substr(1, close - 1);
    out.bracketed = true;
    if (close + 1 < authority.size()) {
      if (authority[close + 1] != ':') return std::nullopt;
      colon = close + 1;
    }
  } else {
    colon = authority.rfind(':');
    out.host = authority.substr(0, colon);
  }
  if (colon != std::string_view::npos) out.port = authority.substr(colon + 1);
  return out;
}

std::optional<HostPort> ParseServer(std::string_view authority) {
  std::optional<HostPort> parsed = SplitHostPort(authority);
  if (!parsed || parsed->host.empty() || !parsed->port) return std::nullopt;
  const std::string& port = *parsed->port;
  if (port.empty() || port.size() > 5 ||
      port.find_first_not_of("0123456789") != std::string::npos) {
    return std::nullopt;
  }
  const int number = std::stoi(port);
  if (number < 1 || number > 65535) return std::nullopt;
  return parsed;
}

}  // namespace fencepost::http
