#include "tests/testing/effect_target.h"

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/string_body.hpp>
#include <boost/beast/http/write.hpp>
#include <stdexcept>

#include "tests/testing/upstreams.h"

namespace fencepost::testing {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;

namespace {

std::string Field(const http::request<http::string_body>& req,
                  const char* name) {
  const auto it = req.find(name);
  return it == req.end() ? "" : std::string(it->value());
}

}  // namespace

EffectTarget::EffectTarget(std::uint16_t port) {
  listen_fd_ = ListenLoopback(port, &port_);
  acceptor_ = std::thread([this] { AcceptLoop(); });
}

EffectTarget::~EffectTarget() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
    held_ = false;
    for (int fd : connections_) ::shutdown(fd, SHUT_RDWR);
  }
  changed_.notify_all();
  ::shutdown(listen_fd_, SHUT_RDWR);
  acceptor_.join();
  ::close(listen_fd_);
  // No thread is added once the acceptor has returned.
  for (auto& t : threads_) t.join();
}

std::string EffectTarget::url() const {
  return "http://127.0.0.1:" + std::to_string(port_);
}

void EffectTarget::Hold() {
  std::lock_guard lock(mu_);
  held_ = true;
}

void EffectTarget::Release() {
  {
    std::lock_guard lock(mu_);
    held_ = false;
  }
  changed_.notify_all();
}

std::vector<EffectTarget::Call> EffectTarget::Calls() const {
  std::lock_guard lock(mu_);
  return calls_;
}

std::vector<EffectTarget::Call> EffectTarget::CallsWith(
    const std::string& id) const {
  std::vector<Call> out;
  for (Call& c : Calls()) {
    if (c.idempotency_key == id) out.push_back(std::move(c));
  }
  return out;
}

bool EffectTarget::AwaitCalls(std::size_t count,
                              std::chrono::milliseconds timeout) {
  std::unique_lock lock(mu_);
  return changed_.wait_for(lock, timeout,
                           [&] { return calls_.size() >= count; });
}

bool EffectTarget::AwaitAnswered(std::size_t count,
                                 std::chrono::milliseconds timeout) {
  std::unique_lock lock(mu_);
  return changed_.wait_for(lock, timeout, [&] { return answered_ >= count; });
}

void EffectTarget::AcceptLoop() {
  while (true) {
    const int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
    std::lock_guard lock(mu_);
    if (stopping_) {
      if (fd >= 0) ::close(fd);
      return;
    }
    if (fd < 0) continue;
    connections_.push_back(fd);
    threads_.emplace_back([this, fd] { Serve(fd); });
  }
}

void EffectTarget::Serve(int fd) {
  asio::io_context io;
  tcp::socket socket(io);
  socket.assign(tcp::v4(), fd);
  beast::flat_buffer buffer;
  while (true) {
    http::request<http::string_body> req;
    beast::error_code ec;
    http::read(socket, buffer, req, ec);
    if (ec) break;
    Call call{std::string(req.method_string()), std::string(req.target()),
              Field(req, "Idempotency-Key"),    Field(req, "Fencing-Token"),
              Field(req, "Content-Type"),       req.body()};
    std::size_t nth = 0;
    {
      std::unique_lock lock(mu_);
      calls_.push_back(call);
      nth = static_cast<std::size_t>(
          std::count_if(calls_.begin(), calls_.end(), [&](const Call& c) {
            return c.idempotency_key == call.idempotency_key;
          }));
      changed_.notify_all();
      changed_.wait(lock, [&] { return !held_ || stopping_; });
      if (stopping_) break;
    }
    if (call.target.find("/drop") != std::string::npos) break;
    http::response<http::string_body> res(http::status::created, req.version());
    res.set(http::field::content_type, "application/json");
    res.body() = "{\"id\":\"" + call.idempotency_key +
                 "\",\"call\":" + std::to_string(nth) + "}";
    res.prepare_payload();
    res.keep_alive(req.keep_alive());
    http::write(socket, res, ec);
    {
      std::lock_guard lock(mu_);
      answered_ += !ec;
    }
    changed_.notify_all();
    if (ec || !req.keep_alive()) break;
  }
  beast::error_code ignored;
  socket.shutdown(tcp::socket::shutdown_both, ignored);
  // The socket closes its descriptor: forget it before the number is
  // reused, so the destructor shuts down no stranger's socket.
  std::lock_guard lock(mu_);
  std::erase(connections_, fd);
}

}  // namespace fencepost::testing
