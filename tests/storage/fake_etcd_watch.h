#pragma once

// clang-format off
// Boost 1.74's awaitable.hpp uses std::exchange without including <utility>.
#include <utility>
// clang-format on

#include <boost/asio/awaitable.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <cstdint>
#include <list>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace fencepost::testing {

// etcd's watch (POST /v3/watch through its JSON gateway) on 127.0.0.1, for
// storage::EtcdWatch, on the test's io_context: a history of puts, one
// revision each, that a watch created from a revision is told from there
// (or, when that revision was compacted, a cancel with compact_revision, as
// etcd does); each open stream is told each put as it is made, with its
// previous value. Break closes every open stream (a network fault, a
// restarted member).
//
// Thread safety: the io_context's thread (the test's, run by the test).
class FakeEtcdWatch {
 public:
  explicit FakeEtcdWatch(boost::asio::io_context& io);
  ~FakeEtcdWatch();
  FakeEtcdWatch(const FakeEtcdWatch&) = delete;
  FakeEtcdWatch& operator=(const FakeEtcdWatch&) = delete;

  std::string port() const;
  // A put of `key` (the whole etcd key) at the next revision.
  void Put(const std::string& key, const std::string& value);
  // etcd's compaction: the history up to and including `revision` is gone.
  void Compact(std::int64_t revision);
  // Closes every open stream.
  void Break();

  std::int64_t revision() const { return revision_; }
  // The start_revision of every watch created, in order (0: from now).
  const std::vector<std::int64_t>& starts() const { return starts_; }
  std::size_t open_streams() const { return streams_.size(); }

 private:
  struct Change {
    std::int64_t revision;
    std::string key, value;
    std::optional<std::string> previous;
  };
  using Socket = boost::asio::ip::tcp::socket;

  boost::asio::awaitable<void> Accept();
  boost::asio::awaitable<void> Serve(std::shared_ptr<Socket> socket);
  // Sends one message of the stream, as one chunk; false when it failed.
  static bool Send(Socket& socket, const std::string& json);
  std::string Message(const Change& change) const;

  boost::asio::io_context& io_;
  boost::asio::ip::tcp::acceptor acceptor_;
  std::vector<Change> history_;
  std::map<std::string, std::string> values_;
  std::int64_t revision_ = 1;
  std::int64_t compacted_ = 0;
  std::vector<std::int64_t> starts_;
  std::list<std::shared_ptr<Socket>> streams_;
};

}  // namespace fencepost::testing
