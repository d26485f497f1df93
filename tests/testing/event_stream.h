#pragma once

// A client of GET /v1/watch for the tests: its own socket to 127.0.0.1,
// the chunked stream read as it comes (every event arrives whole within a
// chunk, so the chunk-size lines are skipped by shape). Header-only.

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

namespace fencepost::testing {

struct Event {
  std::uint64_t id = 0;
  std::string type;
  std::string data;
};

class Watcher {
 public:
  Watcher(std::uint16_t port, const std::string& target,
          const std::string& last_id = "", int receive_buffer = 0) {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    if (receive_buffer > 0) {
      ::setsockopt(fd_, SOL_SOCKET, SO_RCVBUF, &receive_buffer,
                   sizeof receive_buffer);
    }
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(port);
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    EXPECT_EQ(::connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr),
              0);
    std::string request = "GET " + target + " HTTP/1.1\r\nHost: 127.0.0.1\r\n";
    if (!last_id.empty()) request += "Last-Event-ID: " + last_id + "\r\n";
    request += "\r\n";
    EXPECT_EQ(::send(fd_, request.data(), request.size(), MSG_NOSIGNAL),
              static_cast<ssize_t>(request.size()));
  }
  ~Watcher() { ::close(fd_); }
  Watcher(const Watcher&) = delete;
  Watcher& operator=(const Watcher&) = delete;

  // Whether the stream is open (within 10 s): its head and first chunk
  // ("retry: ...") have come, which the server sends once the stream is
  // subscribed; from then on every change under its prefix reaches it.
  bool Opened() {
    const auto until =
        std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (raw_.find("\r\n\r\n") == std::string::npos ||
           raw_.find("retry: ") == std::string::npos) {
      if (std::chrono::steady_clock::now() >= until || !Read(100)) {
        return false;
      }
    }
    return raw_.rfind("HTTP/1.1 200", 0) == 0;
  }
  // Reads until `n` events have come (or 10 s pass); returns them all.
  std::vector<Event> Events(std::size_t n) {
    const auto until =
        std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (events_.size() < n && std::chrono::steady_clock::now() < until &&
           Read(100)) {
    }
    return events_;
  }
  // Reads for `ms` more; returns every event so far.
  std::vector<Event> EventsFor(int ms) {
    const auto until =
        std::chrono::steady_clock::now() + std::chrono::milliseconds(ms);
    while (std::chrono::steady_clock::now() < until && Read(50)) {
    }
    return events_;
  }
  // Whether the server ended the stream (EOF) within 10 s.
  bool Ended() {
    const auto until =
        std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (std::chrono::steady_clock::now() < until) {
      if (!Read(100)) return eof_;
    }
    return false;
  }
  const std::string& raw() const { return raw_; }

 private:
  // Reads what is there (waiting up to `ms`); false at EOF or an error.
  bool Read(int ms) {
    pollfd p{fd_, POLLIN, 0};
    if (::poll(&p, 1, ms) <= 0) return true;
    char buffer[65536];
    const ssize_t n = ::recv(fd_, buffer, sizeof buffer, 0);
    if (n <= 0) {
      eof_ = n == 0;
      return false;
    }
    raw_.append(buffer, static_cast<std::size_t>(n));
    Parse();
    return true;
  }
  void Parse() {
    std::size_t end;
    while ((end = raw_.find("\n\n", parsed_)) != std::string::npos) {
      Event event;
      std::size_t at = parsed_;
      while (at < end) {
        std::size_t eol = raw_.find('\n', at);
        if (eol == std::string::npos || eol > end) eol = end;
        const std::string line = raw_.substr(at, eol - at);
        if (line.rfind("id: ", 0) == 0) event.id = std::stoull(line.substr(4));
        if (line.rfind("event: ", 0) == 0) event.type = line.substr(7);
        if (line.rfind("data: ", 0) == 0) event.data = line.substr(6);
        at = eol + 1;
      }
      if (!event.type.empty()) events_.push_back(event);
      parsed_ = end + 2;
    }
  }

  int fd_ = -1;
  std::string raw_;
  std::size_t parsed_ = 0;
  std::vector<Event> events_;
  bool eof_ = false;
};

}  // namespace fencepost::testing
