#include "storage/election_source.h"

#include <string>

#include "http/host_port.h"

namespace fencepost::storage {

namespace {

// A PATH of an election: "/" and then steps that are not empty, "." or "..",
// of visible ASCII.
std::string CheckPath(std::string_view path) {
  if (path.size() < 2 || path.front() != '/' || path.back() == '/') {
    return "the election's PATH is /NAME[/NAME...], not '" + std::string(path) +
           "'";
  }
  std::string_view rest = path.substr(1);
  while (true) {
    const std::size_t slash = rest.find('/');
    const std::string_view step = rest.substr(0, slash);
    if (step.empty() || step == "." || step == "..") {
      return "the election's PATH has an empty, '.' or '..' step";
    }
    for (const char c : step) {
      if (c <= ' ' || c >= 0x7f) {
        return "the election's PATH has a byte that is not visible ASCII";
      }
    }
    if (slash == std::string_view::npos) return "";
    rest.remove_prefix(slash + 1);
  }
}

}  // namespace

std::string ParseElectionSpec(std::string_view url, ElectionSpec* spec) {
  ElectionSpec out;
  out.url = std::string(url);
  const std::size_t scheme_end = url.find("://");
  const std::string_view scheme = url.substr(0, scheme_end);
  if (scheme_end == std::string_view::npos) {
    return "an election is etcd[s]://HOST:PORT[,...]/PATH or "
           "zookeeper://HOST:PORT[,...]/PATH";
  }
  const std::string_view rest = url.substr(scheme_end + 3);
  const std::size_t slash = rest.find('/');
  if (slash == std::string_view::npos) return "the election has no /PATH";
  std::string_view path = rest.substr(slash);
  // etcd://HOST:PORT//NAME: a key that starts with '/' (Go's
  // concurrency.NewElection(session, "/NAME")).
  const bool rooted_key = path.starts_with("//");
  if (rooted_key && (scheme == "etcd" || scheme == "etcds")) {
    path.remove_prefix(1);
  }
  if (std::string problem = CheckPath(path); !problem.empty()) return problem;
  if (scheme == "etcd" || scheme == "etcds") {
    out.kind = ElectionSpec::Kind::kEtcd;
    if (std::string problem = ParseEtcdSpec(url, &out.etcd); !problem.empty()) {
      return problem;
    }
    // The key is PATH without its leading '/', unless it was doubled.
    out.etcd.prefix = std::string(rooted_key ? path : path.substr(1));
  } else if (scheme == "zookeeper" || scheme == "zk") {
    out.kind = ElectionSpec::Kind::kZooKeeper;
    std::string_view hosts = rest.substr(0, slash);
    if (hosts.empty()) return "no ZooKeeper server";
    while (true) {
      const std::size_t comma = hosts.find(',');
      const std::string_view one = hosts.substr(0, comma);
      if (!http::ParseServer(one)) {
        return "a ZooKeeper server is HOST:PORT, not '" + std::string(one) +
               "'";
      }
      if (comma == std::string_view::npos) break;
      hosts.remove_prefix(comma + 1);
    }
    out.hosts = std::string(rest.substr(0, slash));
    out.path = std::string(path);
    if (out.path == "/zookeeper" || out.path.starts_with("/zookeeper/")) {
      return "the election's PATH lies under ZooKeeper's own /zookeeper";
    }
  } else {
    return "an election is etcd[s]://HOST:PORT[,...]/PATH or "
           "zookeeper://HOST:PORT[,...]/PATH, not " +
           std::string(scheme) + "://";
  }
  *spec = std::move(out);
  return "";
}

std::unique_ptr<ElectionSource> MakeElectionSource(
    boost::asio::io_context& io, const ElectionSpec& spec,
    std::chrono::milliseconds timeout) {
  if (spec.kind == ElectionSpec::Kind::kEtcd) {
    return MakeEtcdElection(io, spec, timeout);
  }
  return MakeZooKeeperElection(io, spec, timeout);
}

}  // namespace fencepost::storage
