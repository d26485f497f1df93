// An election held in etcd (storage/election_source.h): the key PATH, or the
// key under PATH/, with the lowest create_revision holds it. That covers
// etcd's concurrency.Election and `etcdctl elect NAME` (keys NAME/<lease>)
// and fencepost's own etcd leases (the key PREFIX/NAME itself). Every one
// of them binds its key to a lease (a session), so a key without one is
// nobody's candidacy (a stray `etcdctl put`) and is passed over.

#include <algorithm>
#include <boost/asio/ssl/context.hpp>
#include <memory>
#include <string>

#include "storage/election_source.h"
#include "storage/etcd_client.h"
#include "storage/etcd_json.h"
#include "storage/etcd_paging.h"
#include "storage/etcd_watch.h"

namespace fencepost::storage {

namespace {

// The longest holder ID kept (for the log).
constexpr std::size_t kMaxId = 256;
// The candidates under PATH/ read at once, oldest first: the holder is the
// first with a lease among them.
constexpr int kCandidates = 16;

class EtcdElection final : public ElectionSource {
 public:
  EtcdElection(boost::asio::io_context& io, const ElectionSpec& spec,
               std::chrono::milliseconds timeout)
      : io_(io),
        spec_(spec.etcd),
        client_(io, spec.etcd, timeout),
        tls_(spec.etcd.tls ? EtcdClient::TlsContext(spec.etcd) : nullptr) {}

  void Start(std::function<void()> changed) override {
    // The key PATH, and the keys under PATH/: two watches, so that no
    // neighbour (PATH-x, PATH.cfg) is watched.
    const std::string under = spec_.prefix + "/";
    for (EtcdWatch::Range range :
         {EtcdWatch::Range{spec_.prefix, ""},
          EtcdWatch::Range{under, etcd::PrefixEnd(under)}}) {
      EtcdWatch::Handlers handlers;
      handlers.event = [changed](const http::JsonValue&) { changed(); };
      handlers.opened = changed;
      handlers.reset = changed;
      watches_.push_back(std::make_unique<EtcdWatch>(
          io_, spec_, tls_, std::move(range), std::move(handlers)));
      watches_.back()->Start();
    }
  }

  void Stop() override {
    for (const auto& watch : watches_) watch->Stop();
  }

  Awaitable<ElectionHolder> ReadHolder() override {
    // One transaction, so both ranges are read at one revision; etcd's
    // reads are linearizable unless asked otherwise.
    const std::string under = spec_.prefix + "/";
    std::string body = "{\"success\":[{\"request_range\":{\"key\":\"" +
                       EncodeBase64(spec_.prefix) +
                       "\"}},{\"request_range\":{\"key\":\"" +
                       EncodeBase64(under) + "\",\"range_end\":\"" +
                       EncodeBase64(etcd::PrefixEnd(under)) +
                       "\",\"sort_order\":\"ASCEND\",\"sort_target\":"
                       "\"CREATE\",\"limit\":\"" +
                       std::to_string(kCandidates) + "\"}}]}";
    const EtcdApi::Reply reply =
        co_await client_.Call("/v3/kv/txn", std::move(body), true);
    ElectionHolder holder;
    if (!reply.ok) {
      holder.error = reply.error.empty() ? "etcd did not answer" : reply.error;
      co_return holder;
    }
    const http::JsonValue* responses = etcd::ResponsesOf(reply.json, 2);
    const std::vector<http::JsonValue>* exact =
        responses ? etcd::RangeKvsAt(*responses, 0) : nullptr;
    const std::vector<http::JsonValue>* below =
        responses ? etcd::RangeKvsAt(*responses, 1) : nullptr;
    if (exact == nullptr || below == nullptr) {
      holder.error = "etcd's answer to the election's read is not two ranges";
      co_return holder;
    }
    std::int64_t lowest = 0;
    const http::JsonValue* found = nullptr;
    for (const auto* kvs : {exact, below}) {
      for (const http::JsonValue& kv : *kvs) {
        const std::int64_t created = etcd::Int64Of(kv.Find("create_revision"));
        if (created <= 0) {
          holder.error = "etcd's answer has a key without its create_revision";
          co_return holder;
        }
        if (etcd::Int64Of(kv.Find("lease")) == 0) continue;  // no candidacy
        if (found == nullptr || created < lowest) {
          lowest = created;
          found = &kv;
        }
      }
    }
    if (found == nullptr && etcd::RangeCountAt(*responses, 1) > kCandidates) {
      holder.error =
          "the oldest keys under the election's PATH/ have no "
          "lease (nobody's candidacy): remove them";
      co_return holder;
    }
    if (found != nullptr) {
      holder.token = static_cast<fence::Token>(lowest);
      etcd::BytesOf(*found, "value", &holder.id);
      if (holder.id.size() > kMaxId) holder.id.resize(kMaxId);
    }
    co_return holder;
  }

 private:
  boost::asio::io_context& io_;
  const EtcdSpec spec_;  // `prefix`: PATH without its leading '/'
  EtcdClient client_;
  std::shared_ptr<boost::asio::ssl::context> tls_;
  std::vector<std::unique_ptr<EtcdWatch>> watches_;
};

}  // namespace

std::unique_ptr<ElectionSource> MakeEtcdElection(
    boost::asio::io_context& io, const ElectionSpec& spec,
    std::chrono::milliseconds timeout) {
  return std::make_unique<EtcdElection>(io, spec, timeout);
}

}  // namespace fencepost::storage
