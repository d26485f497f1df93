#pragma once

// clang-format off
// Boost 1.74's awaitable.hpp uses std::exchange without including <utility>.
#include <utility>
// clang-format on

#include <sys/types.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

namespace fencepost::testing {

// A free TCP port on 127.0.0.1, outside the kernel's ephemeral range (bound,
// released), that no other test of the machine was handed in the last 10
// minutes (claimed as tests/coordination/lib.sh's free_port claims): two
// calls never return one port. A program that is no test may still bind it.
std::uint16_t FreePort();

// A listening TCP socket on 127.0.0.1:`port` (0: an ephemeral one), its
// port in *bound. Throws std::runtime_error when it cannot listen.
int ListenLoopback(std::uint16_t port, std::uint16_t* bound);

// A small legacy store for the http:// backend's tests: PUT stores the body
// under the target, GET returns it, DELETE removes it, HEAD answers 200. A PUT
// whose body starts with "stall:" is held `stall` before it is applied; it is
// applied even when the client has given up meanwhile (the delayed-write
// hazard); one whose body starts with "early:" is answered 100 and 103
// first; one whose body starts with "jitter:" waits 0-15 ms (set by its
// bytes) before it is applied. It answers no ETag and ignores If-Match and
// If-None-Match, except below /lies/, where a write that carries either is
// applied all the same and answered 412. A PUT whose body starts with
// "drop:" is applied and its connection closed without an answer; the same
// body sent again is answered 412, as a store that honours If-Match answers
// a conditional write that already landed. A request carrying
// Echo-Location or Echo-Content-Location is answered with that value in
// Location or Content-Location. Below /refuses/ and /forbids/ a GET answers
// an ETag; below /refuses/ every write that carries If-Match or
// If-None-Match is answered 412 and not applied (as Ceph RGW 16.2 answers
// If-Match with its own ETag); below /forbids/ they are checked, and one
// that fails is answered 403 instead of 412 and not applied. Every request
// is recorded as it arrives, and every write again as it is applied.
class FakeUpstream {
 public:
  struct Seen {
    std::string method;
    std::string target;
    std::map<std::string, std::string> headers;  // names in lower case
  };

  explicit FakeUpstream(
      std::chrono::milliseconds stall = std::chrono::milliseconds(1000),
      std::uint16_t port = 0);
  ~FakeUpstream();
  FakeUpstream(const FakeUpstream&) = delete;
  FakeUpstream& operator=(const FakeUpstream&) = delete;

  std::uint16_t port() const { return port_; }
  // The stored value, or "" when there is none.
  std::string Value(const std::string& target);
  std::vector<Seen> Requests();
  // The PUTs, POSTs and PATCHes in the order they were applied.
  std::vector<Seen> Applied();
  // How many stalled writes have been applied so far.
  int stalled_applied() const { return stalled_applied_; }

 private:
  void AcceptLoop();
  void Serve(int fd);

  std::chrono::milliseconds stall_;
  int listen_fd_ = -1;
  std::uint16_t port_ = 0;
  std::atomic<bool> stopping_ = false;
  std::atomic<int> stalled_applied_ = 0;
  std::mutex mu_;
  std::map<std::string, std::string> values_;
  std::vector<Seen> seen_;
  std::vector<Seen> applied_;
  std::vector<std::string> dropped_;  // the "drop:" bodies applied
  std::vector<int> connections_;
  std::vector<std::thread> threads_;
  std::thread acceptor_;
};

// Any program, started in the foreground with its output in `log`; the
// destructor stops it (SIGTERM, then SIGKILL after 10 s).
class ChildProcess {
 public:
  ChildProcess(const std::vector<std::string>& argv, const std::string& log);
  ~ChildProcess();
  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;

  // For signals other than the destructor's.
  pid_t pid() const { return pid_; }

 private:
  pid_t pid_ = -1;
};

// Debian's nginx on 127.0.0.1 as a WebDAV store (PUT and DELETE enabled) over
// a root directory, in the foreground, logging to files under `work`. With
// `tls`, it serves TLS with that certificate and key (PEM); with
// `proxy_port`, it is a reverse proxy to 127.0.0.1:proxy_port instead, the
// Host field passed on as the client sent it (so a signature over it holds).
struct NginxOptions {
  std::string tls_cert;
  std::string tls_key;
  std::uint16_t proxy_port = 0;
};
class NginxProcess {
 public:
  NginxProcess(const std::string& root, const std::string& work,
               const NginxOptions& options = {});
  ~NginxProcess();
  NginxProcess(const NginxProcess&) = delete;
  NginxProcess& operator=(const NginxProcess&) = delete;

  std::uint16_t port() const { return port_; }
  std::string AccessLog() const;

  // What nginx made of each request, in order: the method, the normalised
  // path it served ($uri: decoded, dot segments resolved) and the
  // Authorization it received ("" for none).
  struct Seen {
    std::string method;
    std::string uri;
    std::string authorization;
  };
  std::vector<Seen> Requests() const;
  // Requests(), once at least `count` requests of `method` ("" for any) are
  // in the log, or after 5 s: nginx logs a request after it answered it, so
  // the client can see the answer before the log line is written.
  std::vector<Seen> AwaitRequests(std::size_t count,
                                  std::string_view method = "") const;

 private:
  pid_t pid_ = -1;
  std::uint16_t port_ = 0;
  std::string work_;
};

}  // namespace fencepost::testing
