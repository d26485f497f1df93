#pragma once

// For the tests that run the scripts of tests/coordination (which start and
// stop real etcd, ZooKeeper and PostgreSQL servers): one shell command.

#include <stdio.h>
#include <sys/wait.h>

#include <array>
#include <string>

namespace fencepost::testing {

// Runs `command` with /bin/sh; returns its standard output (and its error,
// when the command redirects it). `*status`, when given, gets the exit
// status (-1 when the command could not be run).
inline std::string Shell(const std::string& command, int* status = nullptr) {
  std::string out;
  FILE* pipe = ::popen(command.c_str(), "r");
  if (pipe == nullptr) {
    if (status != nullptr) *status = -1;
    return out;
  }
  std::array<char, 4096> buffer;
  std::size_t n = 0;
  while ((n = ::fread(buffer.data(), 1, buffer.size(), pipe)) > 0) {
    out.append(buffer.data(), n);
  }
  const int rc = ::pclose(pipe);
  if (status != nullptr) *status = WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
  return out;
}

// Shell(), with the last newline taken off; "" when the command failed.
inline std::string ShellLine(const std::string& command) {
  int status = 0;
  std::string out = Shell(command, &status);
  if (status != 0) return "";
  if (!out.empty() && out.back() == '\n') out.pop_back();
  return out;
}

}  // namespace fencepost::testing
