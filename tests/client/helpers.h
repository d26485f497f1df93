#pragma once

#include <sys/types.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "client/client.h"
#include "tests/testing/refusing_port.h"
#include "tests/testing/server_process.h"

namespace fencepost::client::testing {

// Polls `condition` every 10 ms until it holds or `timeout` passes.
bool Eventually(const std::function<bool()>& condition,
                std::chrono::milliseconds timeout = std::chrono::seconds(10));

// Client options for `url` (a function: g++ 12 warns about designated
// initializers that leave members to their defaults).
Client::Options Options(
    const std::string& url,
    std::chrono::milliseconds timeout = std::chrono::seconds(5),
    const std::string& ca_file = "");

std::string DataUrl(const fencepost::testing::ServerProcess& server);
std::string AdminUrl(const fencepost::testing::ServerProcess& server);
Client::Options AdminOptions(const fencepost::testing::ServerProcess& server);

using fencepost::testing::RefusingPort;

// A socket listening on 127.0.0.1 that never accepts nor answers: the
// kernel completes connections into its backlog, requests get no reply.
class SilentListener {
 public:
  SilentListener();
  ~SilentListener();
  SilentListener(const SilentListener&) = delete;
  SilentListener& operator=(const SilentListener&) = delete;
  std::uint16_t port() const { return port_; }

 private:
  int fd_ = -1;
  std::uint16_t port_ = 0;
};

// A TCP relay on 127.0.0.1 to `target_port`, run by its own thread, that
// can be frozen: from Freeze() on it forwards nothing and accepts nothing
// more, keeping every connection open, as a partitioned network does.
class Relay {
 public:
  explicit Relay(std::uint16_t target_port);
  ~Relay();
  Relay(const Relay&) = delete;
  Relay& operator=(const Relay&) = delete;
  std::uint16_t port() const { return port_; }
  void Freeze();

 private:
  void Loop();

  std::uint16_t target_port_;
  int listen_fd_ = -1;
  std::uint16_t port_ = 0;
  std::atomic<bool> frozen_{false};
  std::atomic<bool> done_{false};
  std::thread thread_;
};

// In `dir`: ca.pem (a throwaway CA), server.pem/server.key (a certificate
// for IP 127.0.0.1 only, signed by it) and other-ca.pem (an unrelated CA),
// made with the openssl command. False when openssl is missing or fails.
bool MakeCertificates(const std::string& dir);

// Runs the fencepost binary with `args` in its own process, its stdout and
// stderr going to a file, so a test can signal it while it runs. It gets
// none of the FENCEPOST_* variables of the tests' environment (see
// fencepost::testing::FencepostVariables).
//
// A `serve` ends only at the test's word, as ServerProcess's do: when the
// destructor finds that it exited although the test had sent it no signal
// through Signal, the running test fails with its status and output's
// tail. The destructor stops a `serve` with SIGTERM first (so that a
// sanitizer's checks at exit run), any other command with SIGKILL; and a
// sanitizer's report in any command's output fails the running test.
class CommandProcess {
 public:
  explicit CommandProcess(const std::vector<std::string>& args);
  ~CommandProcess();
  CommandProcess(const CommandProcess&) = delete;
  CommandProcess& operator=(const CommandProcess&) = delete;
  pid_t pid() const { return pid_; }
  // Any signal but SIGSTOP and SIGCONT is the test's word to end it.
  void Signal(int signal);
  // The exit status (128 + signal when killed), or -1 after `timeout`; the
  // status is the test's to check, whoever ended the process.
  int Wait(std::chrono::milliseconds timeout = std::chrono::seconds(15));
  std::string Output() const;

 private:
  pid_t pid_ = -1;
  bool serve_ = false;
  bool signalled_ = false;  // the test sent a signal that may end it
  std::string output_path_;
};

}  // namespace fencepost::client::testing
