#include "tests/testing/server_process.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string_view>
#include <thread>
#include <tuple>

#include "tests/testing/freeze.h"
#include "tests/testing/temp_dir.h"

namespace fencepost::testing {
namespace {

// Whether `env` sets a switch only the test build of the server reads.
bool UsesTestSwitches(const std::vector<std::string>& env) {
  for (const std::string& e : env) {
    if (e.rfind("FENCEPOST_TEST_", 0) == 0) return true;
  }
  return false;
}

pid_t Spawn(const std::vector<std::string>& args,
            const std::vector<std::string>& env, const std::string& log_path,
            const std::vector<std::string>& wrapper = {}) {
  std::vector<char*> argv;
  std::vector<std::string> prefix = wrapper;
  for (std::string& w : prefix) argv.push_back(w.data());
  std::string binary =
      UsesTestSwitches(env) ? FENCEPOST_TEST_SWITCHES_BINARY : FENCEPOST_BINARY;
  argv.push_back(binary.data());
  std::vector<std::string> copy = args;
  for (std::string& a : copy) argv.push_back(a.data());
  argv.push_back(nullptr);

  const std::vector<std::string> inherited = FencepostVariables();
  // LeakSanitizer's reports of libraries' own allocations (a sanitizer
  // build's servers; ignored by others), unless the caller chose.
  std::string lsan = "LSAN_OPTIONS=suppressions=" FENCEPOST_SOURCE_DIR
                     "/tests/testing/lsan.supp";
  const bool own_lsan = std::getenv("LSAN_OPTIONS") == nullptr;
  const pid_t pid = fork();
  if (pid < 0) throw std::runtime_error("fork failed");
  if (pid == 0) {
    const int fd = open(log_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    dup2(fd, 1);
    dup2(fd, 2);
    const int null = open("/dev/null", O_RDONLY);
    dup2(null, 0);
    for (const std::string& name : inherited) unsetenv(name.c_str());
    if (own_lsan) putenv(lsan.data());
    for (const std::string& e : env) putenv(const_cast<char*>(e.c_str()));
    setpgid(0, 0);
    if (prefix.empty()) {
      execv(binary.c_str(), argv.data());
    } else {
      execvp(prefix[0].c_str(), argv.data());
    }
    _exit(127);
  }
  return pid;
}

// A waitpid status as Wait returns it: the exit status, or 128 + signal.
int StatusOf(int status) {
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return -1;
}

int WaitFor(pid_t pid, double seconds) {
  const auto deadline = std::chrono::steady_clock::now() +
                        std::chrono::milliseconds(int(seconds * 1000));
  while (std::chrono::steady_clock::now() < deadline) {
    int status = 0;
    const pid_t r = waitpid(pid, &status, WNOHANG);
    if (r == pid && StatusOf(status) >= 0) return StatusOf(status);
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return -1;
}

// A sanitizer's report in a server's output fails the test that ran it.
void FailOnSanitizerReport(const std::string& output) {
  if (std::string report = SanitizerReport(output); !report.empty()) {
    ADD_FAILURE() << "the server's sanitizer reported:\n" << report;
  }
}

// Whether `pid` is dying: its main thread is a zombie while the rest of
// its threads exit (waitpid cannot reap it yet).
bool Dying(pid_t pid) {
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  std::getline(stat, line);
  const auto close = line.rfind(')');
  return close != std::string::npos && line.compare(close, 4, ") Z ") == 0;
}

}  // namespace

std::vector<std::string> FencepostVariables() {
  std::vector<std::string> names;
  for (char** e = environ; *e != nullptr; ++e) {
    const std::string_view entry = *e;
    if (entry.rfind("FENCEPOST_", 0) == 0) {
      names.emplace_back(entry.substr(0, entry.find('=')));
    }
  }
  return names;
}

std::string SanitizerReport(const std::string& output) {
  for (const char* marker : {"ERROR: AddressSanitizer", "ERROR: LeakSanitizer",
                             "WARNING: ThreadSanitizer", "runtime error:",
                             "ERROR: UndefinedBehaviorSanitizer"}) {
    const auto at = output.find(marker);
    if (at != std::string::npos) {
      return output.substr(at > 2000 ? at - 2000 : 0, 8000);
    }
  }
  return "";
}

ServerProcess::ServerProcess(const std::string& data_dir,
                             const std::vector<std::string>& args,
                             const std::vector<std::string>& env,
                             const std::vector<std::string>& wrapper,
                             double start_seconds) {
  static int counter = 0;
  log_path_ = "/tmp/fencepost-server-" + std::to_string(getpid()) + "-" +
              std::to_string(counter++) + ".log";
  std::vector<std::string> all = {"serve", "--listen", "127.0.0.1:0",
                                  "--admin-listen", "127.0.0.1:0"};
  if (!data_dir.empty()) {
    all.push_back("--data-dir");
    all.push_back(data_dir);
  }
  all.insert(all.end(), args.begin(), args.end());
  pid_ = Spawn(all, env, log_path_, wrapper);

  const auto deadline =
      std::chrono::steady_clock::now() +
      std::chrono::milliseconds(static_cast<int>(start_seconds * 1000));
  while (std::chrono::steady_clock::now() < deadline) {
    const std::string log = ReadFile(log_path_);
    // The start-up line's fields, in either log format: data=127.0.0.1:N
    // and admin=..., or "data":"127.0.0.1:N" and "admin":"...". The line
    // ends with a newline once written whole.
    for (const auto& [started, data_field, admin_field] :
         {std::tuple{" event=started", " data=127.0.0.1:", " admin=127.0.0.1:"},
          std::tuple{"\"event\":\"started\"",
                     "\"data\":\"127.0.0.1:", "\"admin\":\"127.0.0.1:"}}) {
      const auto at = log.find(started);
      if (at == std::string::npos) continue;
      const auto begin = log.rfind('\n', at) + 1;  // npos + 1 == 0
      const auto end = log.find('\n', at);
      if (end == std::string::npos) continue;
      const std::string line = log.substr(begin, end - begin);
      const auto data = line.find(data_field);
      const auto admin = line.find(admin_field);
      if (data == std::string::npos || admin == std::string::npos) continue;
      data_port_ = static_cast<std::uint16_t>(
          std::stoi(line.substr(data + std::strlen(data_field))));
      admin_port_ = static_cast<std::uint16_t>(
          std::stoi(line.substr(admin + std::strlen(admin_field))));
      // The S3 front door's line comes before it, in either format.
      for (const char* s3_field : {" s3=127.0.0.1:", "\"s3\":\"127.0.0.1:"}) {
        const auto s3 = log.find(s3_field);
        if (s3 != std::string::npos && s3 < at) {
          s3_port_ = static_cast<std::uint16_t>(
              std::stoi(log.substr(s3 + std::strlen(s3_field))));
        }
      }
      return;
    }
    int status = 0;
    if (waitpid(pid_, &status, WNOHANG) == pid_) {
      pid_ = -1;
      throw std::runtime_error("fencepost exited at start: " + log);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  signalled_ = true;
  Kill();
  throw std::runtime_error("fencepost did not start: " + ReadFile(log_path_));
}

ServerProcess::~ServerProcess() {
  // A clean stop first, so that a sanitizer's checks at exit (leaks) run
  // and report; SIGKILL only if it does not stop in time.
  if (pid_ > 0 && !signalled_) {
    if (const int status = Reap(); status >= 0) {
      ExitedByItself(status);
    } else if (Dying(pid_)) {
      ExitedByItself(WaitFor(pid_, 15));
      pid_ = -1;
    }
  }
  if (pid_ > 0) {
    signalled_ = true;
    kill(-pid_, SIGTERM);
    Wait(10);
  }
  Kill();
  FailOnSanitizerReport(ReadFile(log_path_));
  unlink(log_path_.c_str());
}

void ServerProcess::Signal(int signal) {
  if (pid_ <= 0) return;
  if (signal == SIGSTOP) {
    ASSERT_TRUE(Freeze(pid_)) << "the server did not stop";
    return;
  }
  if (signal != SIGCONT) signalled_ = true;
  kill(pid_, signal);
}

int ServerProcess::Reap() {
  int status = 0;
  if (pid_ <= 0 || waitpid(pid_, &status, WNOHANG) != pid_) return -1;
  pid_ = -1;
  return StatusOf(status);
}

void ServerProcess::ExitedByItself(int status) const {
  const std::string log = ReadFile(log_path_);
  ADD_FAILURE() << "the server exited by itself (status " << status
                << "; 128 + N: signal N), not at the harness's word; "
                << "its log ends:\n"
                << log.substr(log.size() > 4000 ? log.size() - 4000 : 0);
}

int ServerProcess::Wait(double seconds) {
  if (pid_ <= 0) return -1;
  const int status = WaitFor(pid_, seconds);
  if (status >= 0) pid_ = -1;
  return status;
}

void ServerProcess::Kill() {
  if (pid_ <= 0) return;
  const bool signalled = signalled_;
  if (const int status = Reap(); status >= 0) {
    if (!signalled) ExitedByItself(status);
    return;
  }
  if (!signalled && Dying(pid_)) {
    const int status = WaitFor(pid_, 15);
    pid_ = -1;
    ExitedByItself(status);
    return;
  }
  signalled_ = true;
  kill(-pid_, SIGKILL);  // the whole group: a wrapper's child too
  kill(pid_, SIGKILL);
  const int status = WaitFor(pid_, 15);
  pid_ = -1;
  // It exited between the look and the SIGKILL.
  if (!signalled && status != 128 + SIGKILL) ExitedByItself(status);
}

std::string ServerProcess::Log() const { return ReadFile(log_path_); }

std::size_t ServerProcess::PeakRss() const {
  std::ifstream status("/proc/" + std::to_string(pid_) + "/status");
  for (std::string line; std::getline(status, line);) {
    if (line.rfind("VmHWM:", 0) == 0) {
      return std::stoull(line.substr(6)) * 1024;  // in kB
    }
  }
  return 0;
}

RunResult RunFencepost(const std::vector<std::string>& args,
                       const std::vector<std::string>& env) {
  char path[] = "/tmp/fencepost-run-XXXXXX";
  const int fd = mkstemp(path);
  close(fd);
  const pid_t pid = Spawn(args, env, path);
  RunResult result;
  result.exit_status = WaitFor(pid, 15);
  if (result.exit_status < 0) {
    kill(pid, SIGKILL);
    WaitFor(pid, 5);
  }
  result.output = ReadFile(path);
  unlink(path);
  FailOnSanitizerReport(result.output);
  return result;
}

}  // namespace fencepost::testing
