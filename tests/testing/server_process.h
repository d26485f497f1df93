#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <vector>

#include "tests/testing/exposition.h"

namespace fencepost::testing {

// The real fencepost binary, started on 127.0.0.1:0 for both ports. Its
// output goes to a log file, from which the bound ports are read. The
// destructor stops it if it still runs (SIGTERM, then SIGKILL after 10 s),
// and fails the running test when the log holds a sanitizer's report.
//
// A server ends only at the harness's word: when Kill or the destructor
// finds that it has exited although the harness had sent it no signal (it
// aborted, or something else killed it), or Kill's SIGKILL does not end it
// as SIGKILL does, the running test fails with the exit status and the
// log's tail. A test that expects the server to exit by itself waits for it
// with Wait, which hands it the status instead.
class ServerProcess {
 public:
  // Starts `fencepost serve --data-dir data_dir` (no --data-dir when it is
  // empty) plus `args`, with `env` (NAME=VALUE) added to its environment;
  // waits (at most `start_seconds`) for it to log its addresses. Throws if
  // it does not.
  // When `env` sets a FENCEPOST_TEST_* switch, the test build of the binary
  // (fencepost_test_switches) runs instead: only it reads those switches.
  // `wrapper` (e.g. strace and its flags) runs the binary when given. The
  // process gets its own process group, so Kill also ends a wrapper's child.
  ServerProcess(const std::string& data_dir,
                const std::vector<std::string>& args = {},
                const std::vector<std::string>& env = {},
                const std::vector<std::string>& wrapper = {},
                double start_seconds = 15);
  ~ServerProcess();
  ServerProcess(const ServerProcess&) = delete;
  ServerProcess& operator=(const ServerProcess&) = delete;

  std::uint16_t data_port() const { return data_port_; }
  std::uint16_t admin_port() const { return admin_port_; }
  // The S3 front door's port (served with --s3-listen 127.0.0.1:0), or 0.
  std::uint16_t s3_port() const { return s3_port_; }
  pid_t pid() const { return pid_; }

  // Sends `signal` without waiting. Any signal but SIGSTOP and SIGCONT
  // counts as the harness's word to end the process (see above).
  void Signal(int signal);
  // Waits (at most `seconds`) for the process to exit; returns its exit
  // status, 128 + signal when killed, or -1 on timeout.
  int Wait(double seconds = 15);
  // SIGKILL and reap; fails the running test if the process had already
  // exited by itself (see above).
  void Kill();
  std::string Log() const;
  // The process's peak resident set (VmHWM) in bytes; 0 if unknown.
  std::size_t PeakRss() const;

 private:
  // Reaps the process if it has exited; its status as Wait's, or -1.
  int Reap();
  // Fails the running test: the process exited with `status` by itself.
  void ExitedByItself(int status) const;

  pid_t pid_ = -1;
  bool signalled_ = false;  // the harness sent a signal that may end it
  std::string log_path_;
  std::uint16_t data_port_ = 0;
  std::uint16_t admin_port_ = 0;
  std::uint16_t s3_port_ = 0;
};

// The names of the FENCEPOST_* variables of this process's environment.
// The server reads FENCEPOST_<FLAG> for every flag and the client commands
// FENCEPOST_ADMIN and FENCEPOST_DATA, so one left in the shell the tests
// run in (FENCEPOST_MODE=observe) would change what is under test: every
// child the harness starts has these unset (listed before its fork), and
// gets only what the test gives it.
std::vector<std::string> FencepostVariables();

// The excerpt of `output` around a sanitizer's report (ASan, LSan, TSan,
// UBSan), or "" when it has none.
std::string SanitizerReport(const std::string& output);

struct RunResult {
  int exit_status = -1;
  std::string output;  // stdout and stderr together
};

// Runs the binary with `args` and `env` (NAME=VALUE entries added to the
// environment) to completion, at most 15 s.
RunResult RunFencepost(const std::vector<std::string>& args,
                       const std::vector<std::string>& env = {});

}  // namespace fencepost::testing
