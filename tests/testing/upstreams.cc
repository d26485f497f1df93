#include "tests/testing/upstreams.h"

#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/string_body.hpp>
#include <boost/beast/http/write.hpp>
#include <cctype>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <random>
#include <sstream>
#include <stdexcept>

#include "tests/testing/temp_dir.h"

namespace fencepost::testing {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;

namespace {

bool CanConnect(std::uint16_t port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(port);
  const bool ok =
      ::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0;
  ::close(fd);
  return ok;
}

// Claims `port` for this test: a directory named after it under the claims
// directory that tests/coordination/lib.sh's free_port shares, made
// atomically, so no other test (of either harness) is handed the port
// while its server binds it. A claim older than 10 minutes is free again.
bool Claim(std::uint16_t port) {
  namespace fs = std::filesystem;
  const char* tmp = std::getenv("TMPDIR");
  const fs::path claims =
      fs::path(tmp != nullptr && *tmp != '\0' ? tmp : "/tmp") /
      "fencepost-ports";
  std::error_code ec;
  fs::create_directories(claims, ec);
  const fs::path claim = claims / std::to_string(port);
  if (fs::create_directory(claim, ec)) return true;
  const auto written = fs::last_write_time(claim, ec);
  if (ec ||
      fs::file_time_type::clock::now() - written < std::chrono::minutes(10)) {
    return false;
  }
  fs::remove(claim, ec);
  return fs::create_directory(claim, ec);
}

std::string Lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(c));
  return s;
}

// The entity tag of a value below /refuses/ and /forbids/.
std::string Tag(const std::string& value) {
  return "\"" + std::to_string(std::hash<std::string>{}(value)) + "\"";
}

bool Tagged(const std::string& target) {
  return target.rfind("/refuses/", 0) == 0 || target.rfind("/forbids/", 0) == 0;
}

// Whether the write's If-Match or If-None-Match: * fails against `value`
// (null when there is none).
bool PreconditionFails(const http::request<http::string_body>& req,
                       const std::string* value) {
  const auto if_match = req.find(http::field::if_match);
  if (if_match != req.end()) {
    const std::string_view list = if_match->value();
    if (value == nullptr ||
        (list != "*" && list.find(Tag(*value)) == std::string_view::npos)) {
      return true;
    }
  }
  return req.count(http::field::if_none_match) > 0 && value != nullptr;
}

}  // namespace

int ListenLoopback(std::uint16_t port, std::uint16_t* bound) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  const int one = 1;
  ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(port);
  if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 ||
      ::listen(fd, 64) != 0) {
    ::close(fd);
    throw std::runtime_error("cannot listen on 127.0.0.1:" +
                             std::to_string(port));
  }
  socklen_t len = sizeof addr;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  *bound = ntohs(addr.sin_port);
  return fd;
}

std::uint16_t FreePort() {
  // Outside the ephemeral range: a port the kernel hands out for port 0 can
  // be taken by any process's next outgoing connection before the server
  // that was meant to have it binds it.
  int low = 32768, high = 60999;
  std::ifstream("/proc/sys/net/ipv4/ip_local_port_range") >> low >> high;
  std::uniform_int_distribution<int> pick;
  if (low > 11000) {
    pick = std::uniform_int_distribution<int>(10000, low - 1);
  } else if (high < 64535) {
    pick = std::uniform_int_distribution<int>(high + 1, 65535);
  } else {
    throw std::runtime_error("no ports outside the ephemeral range");
  }
  std::random_device seed;
  for (int attempt = 0; attempt < 200; ++attempt) {
    const auto port = static_cast<std::uint16_t>(pick(seed));
    if (!Claim(port)) continue;  // handed out to a test already
    try {
      std::uint16_t bound = 0;
      ::close(ListenLoopback(port, &bound));
      return port;
    } catch (const std::runtime_error&) {
      // Taken: pick another.
    }
  }
  throw std::runtime_error("no free port of 127.0.0.1 in 200 tries");
}

FakeUpstream::FakeUpstream(std::chrono::milliseconds stall, std::uint16_t port)
    : stall_(stall) {
  listen_fd_ = ListenLoopback(port, &port_);
  acceptor_ = std::thread([this] { AcceptLoop(); });
}

FakeUpstream::~FakeUpstream() {
  stopping_ = true;
  ::shutdown(listen_fd_, SHUT_RDWR);
  acceptor_.join();
  ::close(listen_fd_);
  {
    std::lock_guard lock(mu_);
    for (int fd : connections_) ::shutdown(fd, SHUT_RDWR);
  }
  for (auto& t : threads_) t.join();
}

std::string FakeUpstream::Value(const std::string& target) {
  std::lock_guard lock(mu_);
  auto it = values_.find(target);
  return it == values_.end() ? "" : it->second;
}

std::vector<FakeUpstream::Seen> FakeUpstream::Applied() {
  std::lock_guard lock(mu_);
  return applied_;
}

std::vector<FakeUpstream::Seen> FakeUpstream::Requests() {
  std::lock_guard lock(mu_);
  return seen_;
}

void FakeUpstream::AcceptLoop() {
  while (!stopping_) {
    const int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) {
      if (stopping_) return;
      continue;
    }
    std::lock_guard lock(mu_);
    connections_.push_back(fd);
    threads_.emplace_back([this, fd] { Serve(fd); });
  }
}

void FakeUpstream::Serve(int fd) {
  asio::io_context io;
  tcp::socket socket(io);
  socket.assign(tcp::v4(), fd);
  beast::flat_buffer buffer;
  while (!stopping_) {
    http::request<http::string_body> req;
    beast::error_code ec;
    http::read(socket, buffer, req, ec);
    if (ec) break;
    Seen seen{std::string(req.method_string()), std::string(req.target()), {}};
    for (const auto& field : req) {
      seen.headers[Lower(std::string(field.name_string()))] =
          std::string(field.value());
    }
    {
      std::lock_guard lock(mu_);
      seen_.push_back(seen);
    }
    http::response<http::string_body> res(http::status::ok, req.version());
    const std::string target(req.target());
    const bool lies = target.rfind("/lies/", 0) == 0 &&
                      (req.count(http::field::if_match) > 0 ||
                       req.count(http::field::if_none_match) > 0);
    // The status a conditional write below /refuses/ or /forbids/ is
    // refused with, unapplied; 0 when it is not.
    unsigned refused = 0;
    if (Tagged(target) && (req.count(http::field::if_match) > 0 ||
                           req.count(http::field::if_none_match) > 0)) {
      std::lock_guard lock(mu_);
      const auto it = values_.find(target);
      if (target.rfind("/refuses/", 0) == 0) {
        refused = 412;
      } else if (PreconditionFails(
                     req, it == values_.end() ? nullptr : &it->second)) {
        refused = 403;
      }
    }
    if (refused != 0) {
      res.result(refused);
    } else if (req.method() == http::verb::put ||
               req.method() == http::verb::post ||
               req.method() == http::verb::patch) {
      const bool stalled = req.body().rfind("stall:", 0) == 0;
      if (stalled) std::this_thread::sleep_for(stall_);
      if (req.body().rfind("jitter:", 0) == 0) {
        // 0-15 ms, from the body's own bytes.
        const std::size_t wait = std::hash<std::string>{}(req.body()) % 16;
        std::this_thread::sleep_for(std::chrono::milliseconds(wait));
      }
      if (req.body().rfind("early:", 0) == 0) {
        // Interim answers before the final one.
        const std::string interim =
            "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 103 Early Hints\r\n"
            "Link: </x>; rel=preload\r\n\r\n";
        asio::write(socket, asio::buffer(interim), ec);
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
      }
      std::unique_lock lock(mu_);
      const bool dropped = req.body().rfind("drop:", 0) == 0;
      if (dropped && std::count(dropped_.begin(), dropped_.end(), req.body())) {
        res.result(http::status::precondition_failed);  // it landed before
      } else {
        const bool existed = values_.count(target) > 0;
        values_[target] = req.body();
        applied_.push_back(seen);
        if (stalled) ++stalled_applied_;
        res.result(existed ? http::status::no_content : http::status::created);
        if (dropped) {
          dropped_.push_back(req.body());
          break;  // applied, and the connection closed unanswered
        }
      }
    } else if (req.method() == http::verb::delete_) {
      std::lock_guard lock(mu_);
      values_.erase(target);
      res.result(http::status::no_content);
    } else if (req.method() == http::verb::get) {
      std::lock_guard lock(mu_);
      auto it = values_.find(target);
      if (it == values_.end()) {
        res.result(http::status::not_found);
      } else {
        res.body() = it->second;
        if (Tagged(target)) res.set(http::field::etag, Tag(it->second));
      }
    }
    if (lies) res.result(http::status::precondition_failed);
    if (req.count("Echo-Location")) {
      res.set(http::field::location, req["Echo-Location"]);
    }
    if (req.count("Echo-Content-Location")) {
      res.set(http::field::content_location, req["Echo-Content-Location"]);
    }
    if (res.result() != http::status::no_content) res.prepare_payload();
    res.keep_alive(req.keep_alive());
    http::write(socket, res, ec);
    if (ec || !req.keep_alive()) break;
  }
  beast::error_code ignored;
  socket.shutdown(tcp::socket::shutdown_both, ignored);
}

ChildProcess::ChildProcess(const std::vector<std::string>& argv,
                           const std::string& log) {
  std::vector<std::string> copy = argv;
  std::vector<char*> args;
  for (std::string& a : copy) args.push_back(a.data());
  args.push_back(nullptr);
  pid_ = fork();
  if (pid_ < 0) throw std::runtime_error("fork failed");
  if (pid_ == 0) {
    const int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    dup2(fd, 1);
    dup2(fd, 2);
    execvp(args[0], args.data());
    _exit(127);
  }
}

ChildProcess::~ChildProcess() {
  if (pid_ <= 0) return;
  kill(pid_, SIGTERM);
  for (int i = 0; i < 1000; ++i) {
    if (waitpid(pid_, nullptr, WNOHANG) == pid_) return;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  kill(pid_, SIGKILL);
  waitpid(pid_, nullptr, 0);
}

NginxProcess::NginxProcess(const std::string& root, const std::string& work,
                           const NginxOptions& options)
    : work_(work) {
  namespace fs = std::filesystem;
  fs::create_directories(root);
  fs::create_directories(work + "/tmp");
  const char* binary =
      fs::exists("/usr/sbin/nginx") ? "/usr/sbin/nginx" : "nginx";
  for (int attempt = 0; attempt < 5 && pid_ < 0; ++attempt) {
    port_ = FreePort();
    const std::string t = work + "/tmp";
    std::ofstream(work + "/nginx.conf")
        << "daemon off;\nmaster_process off;\nworker_processes 1;\n"
        << "pid " << work << "/nginx.pid;\nerror_log " << work
        << "/error.log;\nevents { worker_connections 64; }\nhttp {\n"
        << "  access_log " << work << "/access.log;\n"
        << "  log_format view '$request_method\\t$uri\\t$http_authorization';\n"
        << "  access_log " << work << "/view.log view;\n"
        << "  client_body_temp_path " << t << ";\n  proxy_temp_path " << t
        << ";\n  fastcgi_temp_path " << t << ";\n  uwsgi_temp_path " << t
        << ";\n  scgi_temp_path " << t << ";\n"
        << "  server {\n    listen 127.0.0.1:" << port_
        << (options.tls_cert.empty() ? "" : " ssl") << ";\n"
        << (options.tls_cert.empty()
                ? ""
                : "    ssl_certificate " + options.tls_cert +
                      ";\n    ssl_certificate_key " + options.tls_key + ";\n")
        << "    client_max_body_size 0;\n    root " << root << ";\n"
        << (options.proxy_port == 0
                ? std::string("    location / { dav_methods PUT DELETE; "
                              "create_full_put_path on; }\n")
                : "    location / { proxy_pass http://127.0.0.1:" +
                      std::to_string(options.proxy_port) +
                      "; proxy_set_header Host $http_host; "
                      "proxy_request_buffering off; }\n")
        << "  }\n}\n";
    const pid_t pid = fork();
    if (pid < 0) throw std::runtime_error("fork failed");
    if (pid == 0) {
      const int log = ::open((work + "/stderr.log").c_str(),
                             O_WRONLY | O_CREAT | O_TRUNC, 0644);
      dup2(log, 1);
      dup2(log, 2);
      const std::string conf = work + "/nginx.conf";
      const std::string errors = work + "/error.log";
      execlp(binary, binary, "-c", conf.c_str(), "-e", errors.c_str(),
             static_cast<char*>(nullptr));
      _exit(127);
    }
    for (int i = 0; i < 500; ++i) {
      if (CanConnect(port_)) {
        pid_ = pid;
        break;
      }
      int status = 0;
      if (waitpid(pid, &status, WNOHANG) == pid) break;  // e.g. port taken
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    if (pid_ < 0) {
      kill(pid, SIGKILL);
      waitpid(pid, nullptr, 0);
    }
  }
  if (pid_ < 0) {
    throw std::runtime_error("nginx did not start: " +
                             ReadFile(work + "/error.log"));
  }
}

NginxProcess::~NginxProcess() {
  if (pid_ > 0) {
    kill(pid_, SIGTERM);
    waitpid(pid_, nullptr, 0);
  }
}

std::string NginxProcess::AccessLog() const {
  return ReadFile(work_ + "/access.log");
}

namespace {

// nginx's log escaping undone: it writes bytes below 0x20, from 0x7F, '"'
// and a backslash as \xHH.
std::string Unescape(std::string_view logged) {
  std::string out;
  for (std::size_t i = 0; i < logged.size(); ++i) {
    if (logged[i] == '\\' && i + 3 < logged.size() && logged[i + 1] == 'x') {
      out.push_back(static_cast<char>(
          std::stoi(std::string(logged.substr(i + 2, 2)), nullptr, 16)));
      i += 3;
    } else {
      out.push_back(logged[i]);
    }
  }
  return out;
}

}  // namespace

std::vector<NginxProcess::Seen> NginxProcess::AwaitRequests(
    std::size_t count, std::string_view method) const {
  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (true) {
    std::vector<Seen> seen = Requests();
    const auto matching = static_cast<std::size_t>(std::count_if(
        seen.begin(), seen.end(),
        [&](const Seen& s) { return method.empty() || s.method == method; }));
    if (matching >= count || std::chrono::steady_clock::now() >= deadline) {
      return seen;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

std::vector<NginxProcess::Seen> NginxProcess::Requests() const {
  std::vector<Seen> out;
  std::istringstream in(ReadFile(work_ + "/view.log"));
  for (std::string line; std::getline(in, line);) {
    const auto tab1 = line.find('\t');
    const auto tab2 = line.find('\t', tab1 + 1);
    if (tab1 == std::string::npos || tab2 == std::string::npos) continue;
    Seen seen;
    seen.method = line.substr(0, tab1);
    seen.uri = Unescape(line.substr(tab1 + 1, tab2 - tab1 - 1));
    seen.authorization = Unescape(line.substr(tab2 + 1));
    if (seen.authorization == "-") seen.authorization.clear();
    out.push_back(std::move(seen));
  }
  return out;
}

}  // namespace fencepost::testing
