// The HTTP ceiling row of the benchmark table: a Beast server on the same
// stack as fencepost (Asio coroutines, one io thread, keep-alive) that reads
// each request and answers 204 without doing anything else.
//
//   null_server PORT

// clang-format off
// Boost 1.74's awaitable.hpp uses std::exchange without including <utility>.
#include <utility>
// clang-format on

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/signal_set.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/http/empty_body.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/string_body.hpp>
#include <boost/beast/http/write.hpp>
#include <cstdio>
#include <cstdlib>

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;

namespace {

asio::awaitable<void> Serve(tcp::socket socket) {
  beast::tcp_stream stream(std::move(socket));
  beast::flat_buffer buffer;
  beast::error_code ec;
  auto token = asio::redirect_error(asio::use_awaitable, ec);
  while (true) {
    http::request<http::string_body> request;
    co_await http::async_read(stream, buffer, request, token);
    if (ec) break;
    http::response<http::empty_body> response(http::status::no_content,
                                              request.version());
    response.keep_alive(request.keep_alive());
    co_await http::async_write(stream, response, token);
    if (ec || !request.keep_alive()) break;
  }
  stream.socket().shutdown(tcp::socket::shutdown_send, ec);
}

asio::awaitable<void> Accept(tcp::acceptor& acceptor) {
  while (true) {
    beast::error_code ec;
    tcp::socket socket = co_await acceptor.async_accept(
        asio::redirect_error(asio::use_awaitable, ec));
    if (ec) co_return;
    socket.set_option(tcp::no_delay(true), ec);
    asio::co_spawn(acceptor.get_executor(), Serve(std::move(socket)),
                   asio::detached);
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: null_server PORT\n");
    return 2;
  }
  asio::io_context io(1);
  tcp::acceptor acceptor(io, {asio::ip::make_address("127.0.0.1"),
                              static_cast<unsigned short>(std::atoi(argv[1]))});
  asio::signal_set signals(io, SIGINT, SIGTERM);
  signals.async_wait([&](const beast::error_code&, int) { io.stop(); });
  asio::co_spawn(io, Accept(acceptor), asio::detached);
  io.run();
  return 0;
}
