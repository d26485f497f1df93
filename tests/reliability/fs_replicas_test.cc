// fs: replicas: two fencepost processes serving one directory, their fences
// and turns in a real etcd (Debian's etcd-server, started by
// tests/coordination/etcd.sh on free ports of 127.0.0.1). A conditional
// write decides its precondition over the file as its replica read it, and
// again once its turn among the replicas is taken: another replica may have
// written the file in between. One replica's way to etcd goes through a
// relay the test can hold, so that "in between" happens every time.

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "tests/coordination/shell.h"
#include "tests/testing/http_client.h"
#include "tests/testing/server_process.h"
#include "tests/testing/temp_dir.h"

namespace fencepost::reliability {
namespace {

using testing::Fetch;
using testing::ServerProcess;
using testing::Shell;
using testing::ShellLine;

// A TCP relay on 127.0.0.1 to `port`: what the server answers passes at
// once; what clients send passes unless the relay is held, when it is kept
// (and recorded) until Release.
class HoldingRelay {
 public:
  explicit HoldingRelay(std::uint16_t port) : target_(port) {
    listen_fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in addr = Loopback(0);
    socklen_t len = sizeof addr;
    EXPECT_EQ(::bind(listen_fd_, reinterpret_cast<sockaddr*>(&addr), len), 0);
    EXPECT_EQ(::listen(listen_fd_, 16), 0);
    ::getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&addr), &len);
    port_ = ntohs(addr.sin_port);
    acceptor_ = std::thread([this] { Accept(); });
  }
  ~HoldingRelay() {
    stopping_ = true;
    ::shutdown(listen_fd_, SHUT_RDWR);
    acceptor_.join();
    ::close(listen_fd_);
    for (auto& pump : pumps_) pump.join();
  }
  HoldingRelay(const HoldingRelay&) = delete;
  HoldingRelay& operator=(const HoldingRelay&) = delete;

  std::uint16_t port() const { return port_; }
  void Hold() {
    std::lock_guard lock(mu_);
    held_.clear();
    holding_ = true;
  }
  void Release() { holding_ = false; }
  // Whether what the clients sent while held came to hold `text`, within
  // 10 s.
  bool AwaitHeld(const std::string& text) {
    const auto until =
        std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (std::chrono::steady_clock::now() < until) {
      {
        std::lock_guard lock(mu_);
        if (held_.find(text) != std::string::npos) return true;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
    return false;
  }

 private:
  static sockaddr_in Loopback(std::uint16_t port) {
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(port);
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    return addr;
  }
  void Accept() {
    while (!stopping_) {
      const int client = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
      if (client < 0) continue;
      const int server = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
      sockaddr_in addr = Loopback(target_);
      if (::connect(server, reinterpret_cast<sockaddr*>(&addr), sizeof addr)) {
        ::close(client);
        ::close(server);
        continue;
      }
      pumps_.emplace_back([this, client, server] { Pump(client, server); });
    }
  }
  // Both ways until either side closes or the relay stops.
  void Pump(int client, int server) {
    std::string pending;  // from the client, held
    char buffer[65536];
    while (!stopping_) {
      if (!holding_ && !pending.empty()) {
        if (::send(server, pending.data(), pending.size(), MSG_NOSIGNAL) < 0) {
          break;
        }
        pending.clear();
      }
      pollfd fds[2] = {{client, POLLIN, 0}, {server, POLLIN, 0}};
      if (::poll(fds, 2, 5) <= 0) continue;
      if (fds[0].revents != 0) {
        const ssize_t n = ::recv(client, buffer, sizeof buffer, 0);
        if (n <= 0) break;
        if (holding_) {
          std::lock_guard lock(mu_);
          held_.append(buffer, static_cast<std::size_t>(n));
        }
        pending.append(buffer, static_cast<std::size_t>(n));
      }
      if (fds[1].revents != 0) {
        const ssize_t n = ::recv(server, buffer, sizeof buffer, 0);
        if (n <= 0 || ::send(client, buffer, static_cast<std::size_t>(n),
                             MSG_NOSIGNAL) < 0) {
          break;
        }
      }
    }
    ::close(client);
    ::close(server);
  }

  const std::uint16_t target_;
  int listen_fd_ = -1;
  std::uint16_t port_ = 0;
  std::atomic<bool> stopping_ = false;
  std::atomic<bool> holding_ = false;
  std::mutex mu_;
  std::string held_;
  std::vector<std::thread> pumps_;  // the acceptor's alone until it ends
  std::thread acceptor_;
};

std::string Base64(const std::string& in) {
  static constexpr char kAlphabet[] =
      "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  for (std::size_t i = 0; i < in.size(); i += 3) {
    std::uint32_t n = static_cast<unsigned char>(in[i]) << 16;
    if (i + 1 < in.size()) n |= static_cast<unsigned char>(in[i + 1]) << 8;
    if (i + 2 < in.size()) n |= static_cast<unsigned char>(in[i + 2]);
    out += kAlphabet[(n >> 18) & 63];
    out += kAlphabet[(n >> 12) & 63];
    out += i + 1 < in.size() ? kAlphabet[(n >> 6) & 63] : '=';
    out += i + 2 < in.size() ? kAlphabet[n & 63] : '=';
  }
  return out;
}

class FsReplicasTest : public ::testing::Test {
 protected:
  void SetUp() override {
    url_ =
        ShellLine(std::string(FENCEPOST_ETCD_SH) + " start " + (dir_ / "etcd"));
    ASSERT_FALSE(url_.empty()) << "etcd did not start";
    port_ =
        static_cast<std::uint16_t>(std::stoi(url_.substr(url_.rfind(':') + 1)));
  }
  void TearDown() override {
    Shell(std::string(FENCEPOST_ETCD_SH) + " stop " + (dir_ / "etcd"));
  }
  // A replica serving fs:DIR, its fences in etcd at `etcd_port`.
  std::unique_ptr<ServerProcess> Replica(std::uint16_t etcd_port) {
    return std::make_unique<ServerProcess>(
        "", std::vector<std::string>{
                "--fence-store",
                "etcd://127.0.0.1:" + std::to_string(etcd_port) + "/fs",
                "--backend", "fs:" + store_, "--fence-store-timeout", "10"});
  }
  // Whether a replica holds the turn of the fence `name` (within 10 s it
  // does not, or false).
  bool AwaitTurnEnded(const std::string& name) {
    const std::string body = R"({"key":")" + Base64("fs/turns/" + name) + "\"}";
    for (int i = 0; i < 2000; ++i) {
      auto range = Fetch(port_, "POST", "/v3/kv/range", {}, body);
      if (range.status == 200 &&
          range.body.find("\"kvs\"") == std::string::npos) {
        return true;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    return false;
  }

  testing::TempDir dir_;
  std::string store_ = dir_ / "store";
  std::string url_;
  std::uint16_t port_ = 0;
};

// B reads the file (its tag, or that there is none), then its fence commit
// waits in the relay while A writes the file under the same precondition.
// Once B has its turn, the file is no longer what B read: 412, and A's
// write stands. (Without the decision over the file as it is in B's turn,
// both writes of one tag land, and a create-only write overwrites.)
TEST_F(FsReplicasTest, AConditionalWriteIsDecidedAgainInItsTurn) {
  HoldingRelay relay(port_);
  auto a = Replica(port_);
  auto b = Replica(relay.port());
  auto put = Fetch(b->data_port(), "PUT", "/doc", {{"Fencing-Token", "1"}},
                   "first");  // B has its etcd lease before the relay holds
  ASSERT_EQ(put.status, 201) << put.body;
  const std::string tag = put.header("etag");
  // B ends its turn in etcd after its answer: held by the relay, that
  // would leave the turn taken for A.
  ASSERT_TRUE(AwaitTurnEnded("doc"));
  struct Case {
    std::string key;
    std::string condition, value;
  };
  for (const Case& c : std::vector<Case>{{"doc", "If-Match", tag},
                                         {"new", "If-None-Match", "*"}}) {
    SCOPED_TRACE(c.condition);
    relay.Hold();
    testing::HttpResponse from_b;
    std::thread writer([&] {
      from_b = Fetch(b->data_port(), "PUT", "/" + c.key,
                     {{"Fencing-Token", "1"}, {c.condition, c.value}}, "B");
    });
    // B's fence commit: B has read the file before it.
    ASSERT_TRUE(relay.AwaitHeld("/v3/kv/txn"));
    auto from_a = Fetch(a->data_port(), "PUT", "/" + c.key,
                        {{"Fencing-Token", "1"}, {c.condition, c.value}}, "A");
    EXPECT_EQ(from_a.status / 100, 2) << from_a.body;
    ASSERT_TRUE(AwaitTurnEnded(c.key));
    relay.Release();
    writer.join();
    EXPECT_EQ(from_b.status, 412) << from_b.body;
    EXPECT_EQ(testing::ReadFile(store_ + "/" + c.key), "A");
  }
}

}  // namespace
}  // namespace fencepost::reliability
