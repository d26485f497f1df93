#pragma once

// What the server's session loop (server.cc) and its event streams and long
// polls (server_watch.cc) both write and read with.

#include <boost/beast/core/flat_buffer.hpp>
#include <cstddef>
#include <string>

#include "proxy/http_types.h"

namespace fencepost::proxy {

// The status line and header fields of `res`, exactly as they are set: one
// string, written with the body in one gather write.
std::string Head(const Response& res);

// Room to read into `buffer` without passing its limit.
std::size_t Room(const boost::beast::flat_buffer& buffer);

}  // namespace fencepost::proxy
