#include "http/fields.h"

#include <string>
#include <vector>

namespace fencepost::http {

namespace beast_http = boost::beast::http;

void StripHopByHop(beast_http::fields& fields) {
  // Collected first: erasing while iterating would invalidate the walk.
  std::vector<std::string> named;
  for (const auto& field : fields) {
    if (field.name() != beast_http::field::connection) continue;
    std::string_view list = field.value();
    while (!list.empty()) {
      const std::size_t comma = list.find(',');
      const std::string_view name = TrimOws(list.substr(0, comma));
      if (!name.empty()) named.emplace_back(name);
      list = comma == std::string_view::npos ? "" : list.substr(comma + 1);
    }
  }
  for (const std::string& name : named) fields.erase(name);
  for (beast_http::field f :
       {beast_http::field::connection, beast_http::field::keep_alive,
        beast_http::field::proxy_connection, beast_http::field::te,
        beast_http::field::trailer, beast_http::field::transfer_encoding,
        beast_http::field::upgrade}) {
    fields.erase(f);
  }
}

}  // namespace fencepost::http
