#pragma once

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <chrono>
#include <functional>
#include <memory>
#include <string>

#include "metrics/metrics.h"
#include "proxy/config.h"
#include "proxy/data_dir_lock.h"
#include "proxy/effects.h"
#include "proxy/elections.h"
#include "proxy/server.h"
#include "proxy/service.h"
#include "proxy/test_switches.h"
#include "storage/backend.h"
#include "storage/etcd_fences.h"
#include "storage/etcd_watch.h"
#include "storage/fences.h"
#include "storage/local_engine.h"

namespace fencepost::proxy {

// A serving process's parts, built in order by Build and owned together:
// the data directory's lock, the io_context, the metrics, the fence store
// (LMDB shards or etcd), the backend, the Service (after the start-up
// checks of leases and scopes) and the Server listening on both ports.
// Destroyed in the reverse order; the data directory is marked stopped
// last, so that every return after the lock is taken is a clean stop (a
// crash never runs it).
class Assembly {
 public:
  // Why the process must not serve: the message (for stderr, after
  // "fencepost: ") and the exit status.
  struct Failure {
    std::string message;
    int exit_status = 2;
  };

  // Builds everything for `config`, or returns nullptr with *failure set.
  static std::unique_ptr<Assembly> Build(const Config& config,
                                         const TestSwitches& test,
                                         Failure* failure);
  Assembly(const Assembly&) = delete;
  Assembly& operator=(const Assembly&) = delete;
  ~Assembly();

  boost::asio::io_context& io() { return io_; }
  Service& service() { return *service_; }
  Server& server() { return *server_; }
  // nullptr unless the fences are in etcd.
  storage::EtcdFences* etcd() { return etcd_.get(); }
  // Ends etcd's watch and the elections' (at shutdown: their streams and
  // timers would keep the loop busy).
  void StopWatching() {
    if (etcd_watch_) etcd_watch_->Stop();
    if (elections_) elections_->Stop();
    if (effects_) effects_->Stop();
  }
  const boost::asio::ip::tcp::endpoint& data() const { return data_; }
  const boost::asio::ip::tcp::endpoint& admin() const { return admin_; }
  // The S3 front door's address (with --s3-listen).
  const boost::asio::ip::tcp::endpoint& s3() const { return s3_; }

  // After io().run() returned: stops the LMDB shards' threads, and tells
  // the data directory's lock what the backend's holds have still to run.
  void Stop();

 private:
  Assembly() = default;
  // Each step sets *failure and returns false when the process must stop.
  // --backend s3://: credentials loaded (none found is a failure), the
  // endpoint resolved.
  bool MakeS3Backend(const Config& config, const TestSwitches& test,
                     Failure* failure);
  // --s3-listen: the S3 front door over the s3:// backend, its clients'
  // keys loaded.
  bool ListenS3(const Config& config, Failure* failure);
  bool OpenEtcd(const Config& config, Failure* failure);
  // Where the store's changes go (storage/changes.h), on the io thread:
  // to the service's watchers and counts, or, before the service exists,
  // a lease that ran out to the counts and the log (metrics_ set).
  storage::ChangeSink Changes();
  bool OpenEngine(const Config& config, const TestSwitches& test,
                  Failure* failure);
  bool MakeBackend(const Config& config, const TestSwitches& test,
                   Failure* failure);
  // How long every fence of a store kept elsewhere (http://, s3://) is
  // held from the start: what the last process left (DataDirLock), logged.
  std::chrono::milliseconds StartHold();
  bool MakeService(const Config& config, Failure* failure);
  bool MakeServer(const Config& config, Failure* failure);
  // With --fence-store etcd://: etcd's watch feeds the watchers every
  // replica's changes (storage::EtcdWatch).
  bool WatchEtcd(const Config& config, Failure* failure);
  // With --election: the elections followed (proxy/elections.h), once no
  // live lease of fencepost's own holds an elected fence.
  bool FollowElections(const Config& config, Failure* failure);
  // With --effect-target: the gate of the calls out (proxy/effects.h),
  // its records kept with the fences.
  bool MakeEffects(const Config& config, Failure* failure);

  // Destroyed last: marks the directory stopped once all else is done.
  DataDirLock lock_;
  boost::asio::io_context io_{1};
  std::unique_ptr<metrics::Metrics> metrics_;
  std::unique_ptr<storage::LocalEngine> engine_;  // unless in etcd
  std::unique_ptr<storage::EtcdFences> etcd_;
  storage::Fences* fences_ = nullptr;  // the engine's, or etcd_
  std::unique_ptr<storage::Backend> backend_;
  std::unique_ptr<Service> service_;
  std::unique_ptr<Server> server_;
  std::unique_ptr<storage::EtcdWatch> etcd_watch_;    // with etcd_
  std::unique_ptr<Elections> elections_;              // with --election
  std::unique_ptr<storage::Backend> effect_records_;  // with --effect-target
  std::unique_ptr<Effects> effects_;                  // with --effect-target
  boost::asio::ip::tcp::endpoint data_, admin_, s3_;
  std::unique_ptr<S3Door> s3_door_;  // with --s3-listen
};

}  // namespace fencepost::proxy
