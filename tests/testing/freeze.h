#pragma once

// SIGSTOP takes effect asynchronously: kill() returns once the signal is
// queued, and each thread of the process stops only when it next runs. A
// test that freezes a server and then expects it not to answer must wait
// until every thread is stopped, or a thread still running may answer.

#include <signal.h>
#include <sys/types.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>

namespace fencepost::testing {

// The state letter of /proc/PID/task/TID/stat; '?' when unreadable.
inline char ThreadState(const std::filesystem::path& stat_file) {
  std::ifstream in(stat_file);
  std::string line;
  if (!std::getline(in, line)) return '?';
  // "tid (comm) S ...": comm may hold spaces and parentheses.
  const auto close = line.rfind(')');
  if (close == std::string::npos || close + 2 >= line.size()) return '?';
  return line[close + 2];
}

// Sends SIGSTOP to `pid` and waits, at most `timeout`, until all of its
// threads are stopped. False when the signal failed or the wait ran out.
inline bool Freeze(pid_t pid, std::chrono::milliseconds timeout =
                                  std::chrono::milliseconds(5000)) {
  if (::kill(pid, SIGSTOP) != 0) return false;
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  const std::filesystem::path tasks = "/proc/" + std::to_string(pid) + "/task";
  while (std::chrono::steady_clock::now() < deadline) {
    bool all_stopped = true;
    std::error_code error;
    for (const auto& task : std::filesystem::directory_iterator(tasks, error)) {
      const char state = ThreadState(task.path() / "stat");
      // T: stopped; t: traced; Z/X: a thread already gone.
      if (state != 'T' && state != 't' && state != 'Z' && state != 'X') {
        all_stopped = false;
        break;
      }
    }
    if (error) return false;
    if (all_stopped) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return false;
}

}  // namespace fencepost::testing
