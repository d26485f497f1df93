#include "tests/client/helpers.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <stdexcept>
#include <thread>
#include <vector>

#include "tests/testing/temp_dir.h"

namespace fencepost::client::testing {
namespace {

int BoundSocket(std::uint16_t* port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) throw std::runtime_error("socket failed");
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  address.sin_port = 0;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof address) != 0) {
    ::close(fd);
    throw std::runtime_error("bind failed");
  }
  socklen_t length = sizeof address;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length);
  *port = ntohs(address.sin_port);
  return fd;
}

bool Run(const std::string& command) {
  return std::system((command + " >/dev/null 2>&1").c_str()) == 0;
}

}  // namespace

bool Eventually(const std::function<bool()>& condition,
                std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (!condition()) {
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return true;
}

Client::Options Options(const std::string& url,
                        std::chrono::milliseconds timeout,
                        const std::string& ca_file) {
  Client::Options options;
  options.url = url;
  options.timeout = timeout;
  options.ca_file = ca_file;
  return options;
}

std::string DataUrl(const fencepost::testing::ServerProcess& server) {
  return "http://127.0.0.1:" + std::to_string(server.data_port());
}

std::string AdminUrl(const fencepost::testing::ServerProcess& server) {
  return "http://127.0.0.1:" + std::to_string(server.admin_port());
}

Client::Options AdminOptions(const fencepost::testing::ServerProcess& server) {
  return Options(AdminUrl(server));
}

SilentListener::SilentListener() {
  fd_ = BoundSocket(&port_);
  if (::listen(fd_, 16) != 0) throw std::runtime_error("listen failed");
}

SilentListener::~SilentListener() { ::close(fd_); }

Relay::Relay(std::uint16_t target_port) : target_port_(target_port) {
  listen_fd_ = BoundSocket(&port_);
  if (::listen(listen_fd_, 16) != 0) throw std::runtime_error("listen failed");
  thread_ = std::thread([this] { Loop(); });
}

Relay::~Relay() {
  done_ = true;
  thread_.join();
  ::close(listen_fd_);
}

void Relay::Freeze() { frozen_ = true; }

void Relay::Loop() {
  std::vector<std::pair<int, int>> pairs;  // (client, server)
  while (!done_) {
    if (frozen_) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
      continue;
    }
    std::vector<pollfd> fds = {{listen_fd_, POLLIN, 0}};
    for (const auto& [a, b] : pairs) {
      fds.push_back({a, POLLIN, 0});
      fds.push_back({b, POLLIN, 0});
    }
    if (::poll(fds.data(), fds.size(), 10) <= 0 || frozen_) continue;
    const std::size_t polled = pairs.size();
    if ((fds[0].revents & POLLIN) != 0) {
      const int client = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
      const int server = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
      sockaddr_in address{};
      address.sin_family = AF_INET;
      address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
      address.sin_port = htons(target_port_);
      if (client >= 0 &&
          ::connect(server, reinterpret_cast<sockaddr*>(&address),
                    sizeof address) == 0) {
        pairs.emplace_back(client, server);
      } else {
        if (client >= 0) ::close(client);
        ::close(server);
      }
    }
    std::vector<std::pair<int, int>> alive;
    for (std::size_t i = 0; i < pairs.size(); ++i) {
      bool open = true;
      for (int side = 0; side < 2 && open && i < polled; ++side) {
        if ((fds[1 + 2 * i + side].revents & (POLLIN | POLLHUP | POLLERR)) ==
            0) {
          continue;
        }
        const int from = side == 0 ? pairs[i].first : pairs[i].second;
        const int to = side == 0 ? pairs[i].second : pairs[i].first;
        char buffer[16384];
        const ssize_t n = ::read(from, buffer, sizeof buffer);
        open = n > 0 && ::send(to, buffer, static_cast<std::size_t>(n),
                               MSG_NOSIGNAL) == n;
      }
      if (open) {
        alive.push_back(pairs[i]);
      } else {
        ::close(pairs[i].first);
        ::close(pairs[i].second);
      }
    }
    pairs = std::move(alive);
  }
  for (const auto& [a, b] : pairs) {
    ::close(a);
    ::close(b);
  }
}

bool MakeCertificates(const std::string& dir) {
  const std::string ec =
      "-newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 1 ";
  std::ofstream(dir + "/server.ext") << "subjectAltName=IP:127.0.0.1\n";
  return Run("openssl req -x509 " + ec + "-keyout " + dir + "/ca.key -out " +
             dir + "/ca.pem -subj /CN=client-test-ca") &&
         Run("openssl req -x509 " + ec + "-keyout " + dir +
             "/other-ca.key -out " + dir +
             "/other-ca.pem -subj /CN=other-ca") &&
         Run("openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 "
             "-nodes -keyout " +
             dir + "/server.key -out " + dir +
             "/server.csr -subj /CN=server") &&
         Run("openssl x509 -req -in " + dir + "/server.csr -CA " + dir +
             "/ca.pem -CAkey " + dir + "/ca.key -CAcreateserial -days 1 -out " +
             dir + "/server.pem -extfile " + dir + "/server.ext");
}

CommandProcess::CommandProcess(const std::vector<std::string>& args)
    : serve_(!args.empty() && args[0] == "serve") {
  static int counter = 0;
  output_path_ = "/tmp/fencepost-client-command-" + std::to_string(getpid()) +
                 "-" + std::to_string(counter++) + ".log";
  std::vector<std::string> copy = args;
  std::string binary = FENCEPOST_BINARY;
  std::vector<char*> argv = {binary.data()};
  for (std::string& a : copy) argv.push_back(a.data());
  argv.push_back(nullptr);
  const std::vector<std::string> inherited =
      fencepost::testing::FencepostVariables();
  pid_ = ::fork();
  if (pid_ < 0) throw std::runtime_error("fork failed");
  if (pid_ == 0) {
    const int fd =
        ::open(output_path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    ::dup2(fd, 1);
    ::dup2(fd, 2);
    const int null = ::open("/dev/null", O_RDONLY);
    ::dup2(null, 0);
    for (const std::string& name : inherited) ::unsetenv(name.c_str());
    ::execv(binary.c_str(), argv.data());
    ::_exit(127);
  }
}

CommandProcess::~CommandProcess() {
  if (pid_ > 0 && serve_ && !signalled_) {
    // Exited by itself (or is exiting): the status, without waiting.
    if (const int status = Wait(std::chrono::milliseconds(0)); status >= 0) {
      const std::string output = Output();
      ADD_FAILURE() << "the server exited by itself (status " << status
                    << "; 128 + N: signal N), not at the test's word; its "
                    << "output ends:\n"
                    << output.substr(output.size() > 4000 ? output.size() - 4000
                                                          : 0);
    }
  }
  if (pid_ > 0 && serve_) {
    ::kill(pid_, SIGTERM);
    Wait(std::chrono::seconds(10));
  }
  if (pid_ > 0) {
    ::kill(pid_, SIGKILL);
    Wait(std::chrono::seconds(5));
  }
  const std::string output = Output();
  if (const std::string report = fencepost::testing::SanitizerReport(output);
      !report.empty()) {
    ADD_FAILURE() << "the command's sanitizer reported:\n" << report;
  }
  ::unlink(output_path_.c_str());
}

void CommandProcess::Signal(int signal) {
  if (pid_ <= 0) return;
  if (signal != SIGSTOP && signal != SIGCONT) signalled_ = true;
  ::kill(pid_, signal);
}

int CommandProcess::Wait(std::chrono::milliseconds timeout) {
  if (pid_ <= 0) return -1;
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  do {
    int status = 0;
    if (::waitpid(pid_, &status, WNOHANG) == pid_) {
      pid_ = -1;
      if (WIFEXITED(status)) return WEXITSTATUS(status);
      if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
      return -1;
    }
    if (timeout.count() > 0) {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
  } while (std::chrono::steady_clock::now() < deadline);
  return -1;
}

std::string CommandProcess::Output() const {
  return fencepost::testing::ReadFile(output_path_);
}

}  // namespace fencepost::client::testing
