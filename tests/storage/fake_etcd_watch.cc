#include "tests/storage/fake_etcd_watch.h"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/read.hpp>
#include <boost/asio/read_until.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>
#include <cstdio>

#include "codec/base64.h"

namespace fencepost::testing {

namespace asio = boost::asio;
using asio::ip::tcp;

namespace {

std::string Quoted(std::int64_t n) { return "\"" + std::to_string(n) + "\""; }

std::string Kv(const std::string& key, const std::string& value,
               std::int64_t revision) {
  return "{\"key\":\"" + codec::EncodeBase64(key) +
         "\",\"create_revision\":\"1\",\"mod_revision\":" + Quoted(revision) +
         ",\"version\":\"1\",\"value\":\"" + codec::EncodeBase64(value) + "\"}";
}

std::string Header(std::int64_t revision) {
  return "{\"header\":{\"cluster_id\":\"1\",\"member_id\":\"1\","
         "\"revision\":" +
         Quoted(revision) + ",\"raft_term\":\"2\"}";
}

// The start_revision of a create_request (0 when it has none).
std::int64_t StartOf(const std::string& body) {
  static constexpr std::string_view kField = "\"start_revision\":\"";
  const std::size_t at = body.find(kField);
  if (at == std::string::npos) return 0;
  return std::stoll(body.substr(at + kField.size()));
}

}  // namespace

FakeEtcdWatch::FakeEtcdWatch(asio::io_context& io)
    : io_(io),
      acceptor_(io, tcp::endpoint(asio::ip::address_v4::loopback(), 0)) {
  asio::co_spawn(io_, Accept(), asio::detached);
}

FakeEtcdWatch::~FakeEtcdWatch() {
  boost::system::error_code ignored;
  acceptor_.close(ignored);
  Break();
}

std::string FakeEtcdWatch::port() const {
  return std::to_string(acceptor_.local_endpoint().port());
}

void FakeEtcdWatch::Put(const std::string& key, const std::string& value) {
  Change change{++revision_, key, value, std::nullopt};
  if (auto it = values_.find(key); it != values_.end()) {
    change.previous = it->second;
  }
  values_[key] = value;
  history_.push_back(change);
  const std::string message = Message(change);
  for (const auto& socket : streams_) Send(*socket, message);
}

void FakeEtcdWatch::Compact(std::int64_t revision) {
  compacted_ = revision;
  std::erase_if(history_, [revision](const Change& change) {
    return change.revision <= revision;
  });
}

void FakeEtcdWatch::Break() {
  for (const auto& socket : streams_) {
    boost::system::error_code ignored;
    socket->shutdown(tcp::socket::shutdown_both, ignored);
    socket->close(ignored);
  }
  streams_.clear();
}

std::string FakeEtcdWatch::Message(const Change& change) const {
  std::string event =
      "{\"kv\":" + Kv(change.key, change.value, change.revision);
  if (change.previous) {
    event +=
        ",\"prev_kv\":" + Kv(change.key, *change.previous, change.revision - 1);
  }
  event += "}";
  return "{\"result\":" + Header(change.revision) + ",\"events\":[" + event +
         "]}}";
}

bool FakeEtcdWatch::Send(Socket& socket, const std::string& json) {
  char size[17];
  const int n = std::snprintf(size, sizeof size, "%zx", json.size() + 1);
  const std::string chunk =
      std::string(size, static_cast<std::size_t>(n)) + "\r\n" + json + "\n\r\n";
  boost::system::error_code ec;
  asio::write(socket, asio::buffer(chunk), ec);
  return !ec;
}

asio::awaitable<void> FakeEtcdWatch::Accept() {
  while (acceptor_.is_open()) {
    boost::system::error_code ec;
    auto socket = std::make_shared<Socket>(io_);
    co_await acceptor_.async_accept(
        *socket, asio::redirect_error(asio::use_awaitable, ec));
    if (ec) co_return;
    asio::co_spawn(io_, Serve(socket), asio::detached);
  }
}

asio::awaitable<void> FakeEtcdWatch::Serve(std::shared_ptr<Socket> socket) {
  boost::system::error_code ec;
  auto token = asio::redirect_error(asio::use_awaitable, ec);
  std::string in;
  const std::size_t head = co_await asio::async_read_until(
      *socket, asio::dynamic_buffer(in), "\r\n\r\n", token);
  if (ec) co_return;
  static constexpr std::string_view kLength = "Content-Length: ";
  const std::size_t at = in.find(kLength);
  const std::size_t length =
      at == std::string::npos ? 0 : std::stoul(in.substr(at + kLength.size()));
  if (in.size() < head + length) {
    co_await asio::async_read(*socket, asio::dynamic_buffer(in),
                              asio::transfer_exactly(head + length - in.size()),
                              token);
    if (ec) co_return;
  }
  const std::int64_t start = StartOf(in.substr(head));
  starts_.push_back(start);
  const std::string response =
      "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
      "Transfer-Encoding: chunked\r\n\r\n";
  asio::write(*socket, asio::buffer(response), ec);
  if (ec) co_return;
  Send(*socket, "{\"result\":" + Header(revision_) + ",\"created\":true}}");
  if (start > 0 && start <= compacted_) {
    // What etcd answers a watch from a compacted revision.
    Send(*socket, "{\"result\":" + Header(revision_) +
                      ",\"compact_revision\":" + Quoted(compacted_) +
                      ",\"canceled\":true}}");
    socket->close(ec);
    co_return;
  }
  if (start > 0) {
    for (const Change& change : history_) {
      if (change.revision >= start) Send(*socket, Message(change));
    }
  }
  streams_.push_back(socket);
  // Open until Break or the client closes it.
  char byte;
  co_await socket->async_read_some(asio::buffer(&byte, 1), token);
  std::erase(streams_, socket);
}

}  // namespace fencepost::testing
