#include "proxy/framing.h"

#include <boost/beast/core/string.hpp>

#include "http/fields.h"

namespace fencepost::proxy {

namespace beast = boost::beast;
namespace http = beast::http;
using fencepost::http::TrimOws;

std::optional<std::string> FramingError(const Request& req) {
  const auto te = req.count(http::field::transfer_encoding);
  const auto cl = req.count(http::field::content_length);
  if (te > 0 && cl > 0) {
    return "both Content-Length and Transfer-Encoding are present";
  }
  if (te > 0 && req.version() < 11) {
    // RFC 9112 section 6.1: faulty framing; the connection must close.
    return "Transfer-Encoding in an HTTP/1.0 request";
  }
  if (te > 1 ||
      (te == 1 && !beast::iequals(TrimOws(req[http::field::transfer_encoding]),
                                  "chunked"))) {
    return "Transfer-Encoding must be exactly 'chunked'";
  }
  if (cl > 1) {
    auto range = req.equal_range(http::field::content_length);
    const std::string_view first = TrimOws(range.first->value());
    for (auto it = range.first; it != range.second; ++it) {
      if (TrimOws(it->value()) != first)
        return "differing Content-Length headers";
    }
  }
  return std::nullopt;
}

std::optional<std::string> HostError(const Request& req) {
  const auto hosts = req.count(http::field::host);
  if (hosts > 1) return "more than one Host header";
  if (hosts == 0 && req.version() >= 11) {
    return "an HTTP/1.1 request needs a Host header";
  }
  return std::nullopt;
}

bool HasObsFold(std::string_view head) {
  head = head.substr(0, head.find("\r\n\r\n"));
  for (std::size_t at = head.find("\r\n"); at != std::string_view::npos;
       at = head.find("\r\n", at + 2)) {
    if (at + 2 < head.size() && (head[at + 2] == ' ' || head[at + 2] == '\t')) {
      return true;
    }
  }
  return false;
}

}  // namespace fencepost::proxy
