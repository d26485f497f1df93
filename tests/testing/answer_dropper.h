#pragma once

#include <condition_variable>
#include <cstdint>
#include <list>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

namespace fencepost::testing {

// A TCP relay on 127.0.0.1 (a free port) in front of an HTTP/1.1 server at
// HOST:PORT (HOST an IPv4 address), which can lose a request's answer after
// the server has acted on it: the "outcome unknown" a client of a store
// must survive.
//
// Contract:
// - Each client connection gets its own upstream connection; bytes are
//   relayed both ways unchanged. The relay follows the HTTP framing of each
//   direction (Content-Length, chunked, HEAD, 1xx, 204/304, a body ending
//   at close) to pair each answer with its request on a keep-alive
//   connection; a connection it cannot frame (a header block over 64 KiB,
//   101 Switching Protocols) is relayed blindly from there on.
// - DropAnswersTo(method, path, n): the next n requests whose method is
//   `method` and whose request target (as sent: percent-encoded, with its
//   query) contains `path` are relayed to the server; the server's whole
//   final answer to each is read (interim 1xx answers are relayed) and
//   NOT relayed: the client's connection (and the server's) is closed
//   instead, so the client has sent its request and sees the connection
//   end without an answer. dropped() counts them, incremented before the
//   close.
// - Pause(): connections are still accepted, but nothing is relayed either
//   way until Resume() (each direction holds at most one read, 64 KiB).
// - requests(method) counts the requests seen (their header block relayed)
//   since the start; "" counts every method.
// - The destructor closes every connection and joins every thread.
class AnswerDropper {
 public:
  AnswerDropper(std::string host, std::uint16_t port);
  ~AnswerDropper();
  AnswerDropper(const AnswerDropper&) = delete;
  AnswerDropper& operator=(const AnswerDropper&) = delete;

  std::uint16_t port() const { return port_; }
  std::string endpoint() const;  // "http://127.0.0.1:PORT"

  void DropAnswersTo(std::string method, std::string path, int n);
  // The next n requests matching as for DropAnswersTo are held whole
  // before their first byte reaches the server, until ReleaseHeld();
  // held() counts those waiting now. For a test that acts on the store
  // between what a client decided and the write it then sent.
  void HoldRequestsTo(std::string method, std::string path, int n);
  void ReleaseHeld();
  int held() const;
  void Pause();
  void Resume();
  int requests(std::string_view method = "") const;
  int dropped() const;

 private:
  struct Connection;
  struct Rule {
    std::string method;
    std::string path;
    int remaining = 0;
    bool hold = false;  // HoldRequestsTo's, else DropAnswersTo's
  };
  enum class Fate { kRelay, kDrop, kHold };

  void AcceptLoop();
  void Serve(Connection* connection);
  void Requests(Connection* connection);
  void Answers(Connection* connection);
  // Whether the request METHOD TARGET is one whose answer to drop (and
  // counts it).
  Fate Matches(const std::string& method, const std::string& target);
  // Waits while a held request's release has not come; false when the
  // relay stops.
  bool AwaitRelease();
  // Waits while paused; false when the relay stops.
  bool AwaitRunning();
  // Sends all of `data` to `fd`; false when the peer is gone.
  static bool SendAll(int fd, std::string_view data);
  // shutdown(2) of both sockets of `connection`, unless already closed.
  void Cut(Connection* connection, int how_client, int how_upstream);
  void ReapFinished();

  std::string host_;
  std::uint16_t upstream_port_ = 0;
  std::uint16_t port_ = 0;
  int listen_fd_ = -1;
  mutable std::mutex mu_;
  std::condition_variable resumed_;
  bool paused_ = false;
  int held_ = 0;
  std::uint64_t releases_ = 0;  // ReleaseHeld calls
  bool stopping_ = false;
  std::vector<Rule> rules_;
  std::map<std::string, int, std::less<>> requests_;
  int dropped_ = 0;
  std::list<std::unique_ptr<Connection>> connections_;
  std::thread acceptor_;
};

}  // namespace fencepost::testing
