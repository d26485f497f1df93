#pragma once

// The far end of a fenced side effect (--effect-target NAME=URL) for the
// effect tests: a real HTTP server on 127.0.0.1 that stands for a payment
// API or a webhook receiver, and records every call that reaches it, so a
// test counts what was sent, not what fencepost says it sent.

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace fencepost::testing {

// Each call is recorded as it arrives, then answered 201 with Content-Type
// application/json and the body {"id":"ID","call":N} (ID its
// Idempotency-Key, N how many calls with that key had arrived, itself
// included), so a replayed answer says which call it came from. A call
// whose path contains "/drop" is recorded and its connection closed
// without an answer, as a target that fails after it got the call. While held
// (Hold), a call is recorded and then left unanswered until Release or the
// destructor; an answer to a client that went away is dropped. HTTP/1.1
// keep-alive and HTTP/1.0 (nginx's proxy) alike; every read blocks without
// a deadline, and the destructor ends them by shutting the sockets down.
// Thread-safe.
class EffectTarget {
 public:
  struct Call {
    std::string method;
    std::string target;  // the request target: path and query
    std::string idempotency_key;
    std::string fencing_token;
    std::string content_type;
    std::string body;
  };

  // Listens on 127.0.0.1:`port` (0: a port the kernel chooses); throws
  // when it cannot.
  explicit EffectTarget(std::uint16_t port = 0);
  ~EffectTarget();
  EffectTarget(const EffectTarget&) = delete;
  EffectTarget& operator=(const EffectTarget&) = delete;

  std::uint16_t port() const { return port_; }
  // http://127.0.0.1:PORT
  std::string url() const;

  void Hold();
  void Release();

  std::vector<Call> Calls() const;
  // The calls that carried Idempotency-Key `id`.
  std::vector<Call> CallsWith(const std::string& id) const;
  // Whether `count` calls have arrived (answered) within `timeout`.
  bool AwaitCalls(std::size_t count, std::chrono::milliseconds timeout);
  bool AwaitAnswered(std::size_t count, std::chrono::milliseconds timeout);

 private:
  void AcceptLoop();
  void Serve(int fd);

  int listen_fd_ = -1;
  std::uint16_t port_ = 0;
  mutable std::mutex mu_;
  std::condition_variable changed_;
  bool stopping_ = false;
  bool held_ = false;
  std::vector<Call> calls_;
  std::size_t answered_ = 0;
  std::vector<int> connections_;
  std::vector<std::thread> threads_;
  std::thread acceptor_;
};

}  // namespace fencepost::testing
