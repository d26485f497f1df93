#include "tests/testing/http_client.h"

#include <boost/asio/connect.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/read.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http.hpp>
#include <stdexcept>

namespace fencepost::testing {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;

struct HttpClient::Impl {
  asio::io_context io;
  tcp::socket socket{io};
  beast::flat_buffer buffer;
};

namespace {

// Runs the io_context until `done` or `seconds` pass; on timeout the socket is
// closed, which fails the pending operation.
// Returns whether it completed in time.
bool RunFor(asio::io_context& io, tcp::socket& socket, double seconds,
            const bool& done) {
  io.restart();
  io.run_for(std::chrono::milliseconds(static_cast<int>(seconds * 1000)));
  if (done) return true;
  boost::system::error_code ignored;
  socket.close(ignored);
  io.restart();
  io.run();
  return false;
}

}  // namespace

HttpClient::HttpClient(std::uint16_t port, double seconds)
    : impl_(std::make_unique<Impl>()), seconds_(seconds) {
  impl_->socket.connect({asio::ip::make_address("127.0.0.1"), port});
  impl_->socket.set_option(tcp::no_delay(true));
}

HttpClient::~HttpClient() = default;

void HttpClient::Send(const std::string& bytes) {
  asio::write(impl_->socket, asio::buffer(bytes));
}

HttpResponse HttpClient::ReadResponse(bool head) {
  http::response_parser<http::string_body> parser;
  parser.body_limit(512u << 20);   // the largest value a test stores
  parser.header_limit(64u << 10);  // fencepost relays long kept fields
  parser.skip(head);
  bool done = false;
  boost::system::error_code ec;
  http::async_read(impl_->socket, impl_->buffer, parser,
                   [&](boost::system::error_code e, std::size_t) {
                     ec = e;
                     done = true;
                   });
  if (!RunFor(impl_->io, impl_->socket, seconds_, done)) {
    throw std::runtime_error("no response within " + std::to_string(seconds_) +
                             " s");
  }
  if (ec) throw boost::system::system_error(ec);
  HttpResponse out;
  out.status = parser.get().result_int();
  for (const auto& field : parser.get()) {
    std::string name(field.name_string());
    for (char& c : name) c = static_cast<char>(std::tolower(c));
    out.headers[name] = std::string(field.value());
  }
  out.body = parser.get().body();
  return out;
}

HttpResponse HttpClient::Request(const std::string& method,
                                 const std::string& target,
                                 const Headers& headers,
                                 const std::string& body) {
  http::request<http::string_body> req;
  req.method_string(method);
  req.target(target);
  req.version(11);
  req.set(http::field::host, "127.0.0.1");
  for (const auto& [name, value] : headers) req.insert(name, value);
  if (!body.empty() || method == "PUT" || method == "POST" ||
      method == "PATCH") {
    req.body() = body;
    req.prepare_payload();
  }
  http::write(impl_->socket, req);
  return ReadResponse(method == "HEAD");
}

HttpResponse HttpClient::Raw(const std::string& bytes) {
  Send(bytes);
  return ReadResponse();
}

bool HttpClient::ClosedByPeer(double seconds) {
  // Bytes already buffered are not a close.
  if (impl_->buffer.size() > 0) return false;
  char c;
  bool done = false;
  boost::system::error_code ec;
  impl_->socket.async_read_some(asio::buffer(&c, 1),
                                [&](boost::system::error_code e, std::size_t) {
                                  ec = e;
                                  done = true;
                                });
  return RunFor(impl_->io, impl_->socket, seconds, done) &&
         (ec == asio::error::eof || ec == asio::error::connection_reset);
}

HttpResponse Fetch(std::uint16_t port, const std::string& method,
                   const std::string& target, const Headers& headers,
                   const std::string& body) {
  HttpClient client(port);
  return client.Request(method, target, headers, body);
}

}  // namespace fencepost::testing
