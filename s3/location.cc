#include "s3/location.h"

#include <charconv>
#include <stdexcept>

#include "codec/percent.h"

namespace fencepost::s3 {

namespace {

std::invalid_argument Bad(std::string_view what, std::string_view text) {
  return std::invalid_argument(std::string(what) + ": '" + std::string(text) +
                               "'");
}

bool IsLowerAlnum(char c) {
  return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
}

// Whether `host` is an IPv4 or IPv6 literal: a bucket cannot go before it.
bool IsIpLiteral(std::string_view host) {
  if (host.find(':') != std::string_view::npos) return true;
  for (const char c : host) {
    if (c != '.' && (c < '0' || c > '9')) return false;
  }
  return true;
}

std::string Bracketed(const std::string& host) {
  return host.find(':') != std::string::npos ? "[" + host + "]" : host;
}

// `port`, the digits after an endpoint's host, as a number.
std::uint16_t Port(std::string_view port, std::string_view url) {
  unsigned value = 0;
  const auto [end, ec] =
      std::from_chars(port.data(), port.data() + port.size(), value);
  if (port.empty() || ec != std::errc() || end != port.data() + port.size() ||
      value == 0 || value > 65535) {
    throw Bad("the port must be 1 to 65535", url);
  }
  return static_cast<std::uint16_t>(value);
}

}  // namespace

std::optional<Addressing> ParseAddressing(std::string_view text) {
  if (text == "path") return Addressing::kPath;
  if (text == "virtual") return Addressing::kVirtual;
  return std::nullopt;
}

std::string Endpoint::Authority() const {
  return Bracketed(host) + ":" + std::to_string(port);
}

bool Endpoint::HasDefaultPort() const { return port == (tls ? 443 : 80); }

Endpoint ParseEndpoint(std::string_view url) {
  Endpoint out;
  std::string_view rest;
  if (url.rfind("https://", 0) == 0) {
    rest = url.substr(8);
  } else if (url.rfind("http://", 0) == 0) {
    out.tls = false;
    out.port = 80;
    rest = url.substr(7);
  } else {
    throw Bad("an S3 endpoint is http://HOST[:PORT] or https://...", url);
  }
  const auto slash = rest.find('/');
  if (slash != std::string_view::npos && rest.substr(slash) != "/") {
    throw Bad("an S3 endpoint has no path, query or fragment", url);
  }
  std::string_view authority = rest.substr(0, slash);
  if (authority.find_first_of("@?#") != std::string_view::npos) {
    throw Bad("an S3 endpoint has no user info, query or fragment", url);
  }
  std::optional<std::string_view> port;
  if (!authority.empty() && authority.front() == '[') {
    const auto close = authority.find(']');
    if (close == std::string_view::npos) throw Bad("unclosed '['", url);
    out.host = std::string(authority.substr(1, close - 1));
    const std::string_view after = authority.substr(close + 1);
    if (!after.empty() && after.front() != ':') throw Bad("bad host", url);
    if (!after.empty()) port = after.substr(1);
  } else {
    const auto colon = authority.find(':');
    out.host = std::string(authority.substr(0, colon));
    if (colon != std::string_view::npos) port = authority.substr(colon + 1);
  }
  if (out.host.empty()) throw Bad("an S3 endpoint needs a host", url);
  for (const char c : out.host) {
    const auto u = static_cast<unsigned char>(c);
    if (u <= ' ' || u >= 0x7f) throw Bad("bad character in the host", url);
  }
  if (port) out.port = Port(*port, url);
  return out;
}

std::string DefaultEndpoint(std::string_view region) {
  return "https://s3." + std::string(region) + ".amazonaws.com";
}

Addressing DefaultAddressing(const Endpoint& endpoint) {
  constexpr std::string_view kAws = ".amazonaws.com";
  const std::string_view host = endpoint.host;
  const bool aws = host.size() > kAws.size() &&
                   host.substr(host.size() - kAws.size()) == kAws;
  return aws ? Addressing::kVirtual : Addressing::kPath;
}

bool IsBucketName(std::string_view name) {
  if (name.size() < 3 || name.size() > 63) return false;
  if (!IsLowerAlnum(name.front()) || !IsLowerAlnum(name.back())) return false;
  for (const char c : name) {
    if (!IsLowerAlnum(c) && c != '.' && c != '-') return false;
  }
  return name.find("..") == std::string_view::npos;
}

BucketUrl ParseBucketUrl(std::string_view url) {
  constexpr std::string_view kScheme = "s3://";
  if (url.rfind(kScheme, 0) != 0) throw Bad("not s3://BUCKET[/PREFIX]", url);
  std::string_view rest = url.substr(kScheme.size());
  const auto slash = rest.find('/');
  BucketUrl out;
  out.bucket = std::string(rest.substr(0, slash));
  if (!IsBucketName(out.bucket)) {
    throw Bad(
        "BUCKET must be 3 to 63 of a-z 0-9 . -, starting and ending with a "
        "letter or digit",
        url);
  }
  std::string_view prefix =
      slash == std::string_view::npos ? "" : rest.substr(slash + 1);
  if (prefix.find_first_of("?#") != std::string_view::npos) {
    throw Bad("s3://BUCKET/PREFIX has no query or fragment", url);
  }
  while (!prefix.empty() && prefix.back() == '/') prefix.remove_suffix(1);
  std::optional<std::string> decoded =
      codec::PercentDecode(prefix, codec::PercentMode::kStrict);
  if (!decoded) throw Bad("PREFIX has a '%' without two hex digits", url);
  for (const char c : *decoded) {
    if (static_cast<unsigned char>(c) < ' ' || c == '\x7f') {
      throw Bad("PREFIX has a control character", url);
    }
  }
  out.prefix = std::move(*decoded);
  return out;
}

void Location::Check() const {
  if (addressing != Addressing::kVirtual) return;
  if (IsIpLiteral(endpoint.host)) {
    throw std::invalid_argument(
        "virtual-hosted addressing needs a host name, not an IP address, in "
        "the endpoint: use --s3-addressing path");
  }
  if (endpoint.tls && bucket.find('.') != std::string::npos) {
    throw std::invalid_argument(
        "the bucket '" + bucket +
        "' has a '.', which no wildcard certificate covers under "
        "virtual-hosted addressing over https: use --s3-addressing path");
  }
}

std::string Location::HostName() const {
  return addressing == Addressing::kVirtual ? bucket + "." + endpoint.host
                                            : endpoint.host;
}

std::string Location::BaseUrl() const {
  return std::string(endpoint.tls ? "https://" : "http://") +
         Bracketed(HostName()) + ":" + std::to_string(endpoint.port);
}

std::string Location::Host() const {
  const std::string name = Bracketed(HostName());
  if (endpoint.HasDefaultPort()) return name;
  return name + ":" + std::to_string(endpoint.port);
}

std::string ObjectKey(std::string_view prefix, std::string_view key) {
  if (prefix.empty()) return std::string(key);
  std::string out(prefix);
  out += '/';
  out += key;
  return out;
}

std::string ObjectPath(const Location& location, std::string_view object_key) {
  std::string path = "/";
  if (location.addressing == Addressing::kPath) {
    path += location.bucket;
    if (!object_key.empty()) path += '/';
  }
  path += object_key;
  return path;
}

}  // namespace fencepost::s3
