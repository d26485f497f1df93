// A port of 127.0.0.1 that refuses connections, for tests of unreachable
// servers. Header-only: test programs that do not link the testing library
// use it too.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdint>
#include <stdexcept>

namespace fencepost::testing {

// Bound and never listening while it lives, so connecting is refused and no
// other process can be given the port meanwhile (a port bound and released
// at once could be, by its next bind to port 0).
class RefusingPort {
 public:
  // On `port`, or on one the kernel chooses.
  explicit RefusingPort(std::uint16_t port = 0)
      : fd_(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0)) {
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    address.sin_port = htons(port);
    socklen_t length = sizeof address;
    if (fd_ < 0 ||
        ::bind(fd_, reinterpret_cast<sockaddr*>(&address), length) != 0 ||
        ::getsockname(fd_, reinterpret_cast<sockaddr*>(&address), &length) !=
            0) {
      if (fd_ >= 0) ::close(fd_);
      throw std::runtime_error("cannot bind a port of 127.0.0.1");
    }
    port_ = ntohs(address.sin_port);
  }
  ~RefusingPort() { ::close(fd_); }
  RefusingPort(const RefusingPort&) = delete;
  RefusingPort& operator=(const RefusingPort&) = delete;
  std::uint16_t port() const { return port_; }

 private:
  int fd_;
  std::uint16_t port_ = 0;
};

}  // namespace fencepost::testing
