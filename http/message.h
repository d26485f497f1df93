#pragma once

#include <boost/beast/http/message.hpp>
#include <boost/beast/http/string_body.hpp>

namespace fencepost::http {

// The request and response every layer passes around: whole bodies in a
// std::string (bodies are bounded by --max-body and the upstream's limit).
using Request = boost::beast::http::request<boost::beast::http::string_body>;
using Response = boost::beast::http::response<boost::beast::http::string_body>;

}  // namespace fencepost::http
