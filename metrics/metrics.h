#pragma once

#include <prometheus/counter.h>
#include <prometheus/family.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>

#include <array>
#include <cstdint>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace fencepost::metrics {

enum class RejectReason {
  kStaleToken,
  kMissingToken,
  kInvalidToken,
  kPreconditionFailed,
};
// kS3: the S3 front door (--s3-listen), a data port speaking S3.
enum class Port { kData, kAdmin, kS3 };

// Owns the Prometheus registry and every metric family fencepost exports
// (SPEC's metric table), and serializes them in the text exposition format
// 0.0.4. No label ever carries a key: methods outside a fixed set count as
// "OTHER".
//
// Thread safety: every method may be called from any thread.
class Metrics {
 public:
  // `backend` is the label value of fencepost_backend_errors_total; version
  // and revision those of fencepost_build_info.
  explicit Metrics(std::string_view backend, std::string_view version = "",
                   std::string_view revision = "");

  void WriteAccepted(bool advanced);
  void WriteRejected(RejectReason reason);
  // A stale write refused: counts it and observes how far behind it was.
  void StaleRejected(std::uint64_t presented, std::uint64_t current);
  void WouldReject();
  // A storage failure answered 5xx, or a store's refusal of fencepost's own
  // request (S3's SignatureDoesNotMatch, say): `code` names its kind (the
  // store's error code, else the problem type). A code of more than 64
  // characters or others than A-Z a-z 0-9 . _ -, and every code past the
  // 64th distinct one, counts as "other"; "" is the series with no code.
  void BackendError(std::string_view code = "");
  void OutcomeUnknown();
  // A write refused with 503 because the commit queue was full.
  void Overloaded();
  void SetFences(double count);
  // Leases: a grant (counted as an accepted write too, by the caller), a
  // renewal, a denied acquire, a release, and expiries noticed; the gauge
  // of live leases.
  void LeaseGranted();
  void LeaseRenewed();
  void LeaseDenied();
  void LeaseReleased();
  void LeasesExpired(std::size_t count);
  // A grant refused because --max-leases leases were live.
  void LeaseLimitReached();
  void SetLeasesHeld(double count);
  // Watches, read at each scrape: watchers now (event streams and long
  // polls), and the events published and watchers dropped since start.
  void SetWatches(double watchers, std::uint64_t events_total,
                  std::uint64_t dropped_total);
  void SetMap(double used_bytes, double size_bytes, double max_bytes);
  void Request(Port port, std::string_view method, unsigned status,
               double seconds);
  // Connections: opened and closed (the gauge), refused at the cap, idle
  // ones shed to make room, and failed accepts.
  void ConnectionOpened(Port port);
  void ConnectionClosed(Port port);
  void ConnectionRefused(Port port);
  void ConnectionShed(Port port);
  void AcceptFailed(Port port);
  // --fence-store etcd://: one request to etcd (`path` /v3/kv/txn or
  // /v3/kv/range), and a write decided again after a failed compare, by
  // `cause`: fence, value, turn, lease or lease-limit (any other counts
  // nowhere).
  void EtcdRequest(std::string_view path, double seconds, bool ok);
  void EtcdTxnRetry(std::string_view cause);
  // Elections watched at their source (--election; `scope` is a configured
  // SCOPE, so the label has few values): a new holder seen, whether the
  // source answered its last read, a holder whose token was below the fence
  // (never obeyed), and a token refused because the source did not confirm
  // it. AddElection registers a scope's series (up at 0).
  void AddElection(const std::string& scope);
  void ElectionHolderChanged(const std::string& scope);
  void SetElectionUp(const std::string& scope, bool up);
  void ElectionBehind(const std::string& scope);
  void UnverifiedToken();
  // Fenced side effects (--effect-target; `target` is a configured NAME):
  // AddEffectTarget registers its series at 0; Effect counts a request's
  // `outcome`: sent, replayed, stale, unknown or not_sent.
  void AddEffectTarget(const std::string& target);
  void Effect(const std::string& target, std::string_view outcome);
  // Counts kept in fixed buckets elsewhere: counts[i] those at or below
  // bounds[i] and above bounds[i - 1]; the last, above every bound.
  struct BucketCounts {
    std::span<const double> bounds;
    std::span<const std::uint64_t> counts;  // bounds.size() + 1
    double sum = 0;
  };
  // The write-ahead log's groups and syncs, read at each scrape (totals
  // since start, all shards): writes per group, each sync's duration, and
  // each group's wait from decision to answer. The histograms catch up to
  // them; the first call fixes their buckets.
  void SetLog(const BucketCounts& group_writes,
              const BucketCounts& sync_seconds,
              const BucketCounts& group_wait_seconds);

  std::string Serialize() const;

 private:
  // The counter of `code` (see BackendError), made on first use.
  prometheus::Counter& BackendErrorCounter(std::string_view code);

  std::shared_ptr<prometheus::Registry> registry_;
  prometheus::Counter* accepted_;
  std::array<prometheus::Counter*, 4> rejected_;
  prometheus::Counter* advances_;
  prometheus::Gauge* fences_;
  prometheus::Counter* lease_grants_;
  prometheus::Counter* lease_renewals_;
  prometheus::Counter* lease_denied_;
  prometheus::Counter* lease_releases_;
  prometheus::Counter* lease_expirations_;
  prometheus::Counter* lease_limit_reached_;
  prometheus::Gauge* leases_held_;
  prometheus::Gauge* watchers_;
  prometheus::Counter* watch_events_;
  prometheus::Counter* watchers_dropped_;
  prometheus::Gauge* map_used_;
  prometheus::Gauge* map_size_;
  prometheus::Gauge* map_max_;
  prometheus::Histogram* token_lag_;
  prometheus::Family<prometheus::Counter>* requests_;
  // The request counters already looked up, by (port, method, status): the
  // family's own lookup builds a label map per call.
  std::mutex request_mu_;
  std::unordered_map<std::uint32_t, prometheus::Counter*> request_children_;
  std::array<prometheus::Histogram*, 3> durations_;
  prometheus::Family<prometheus::Counter>* backend_errors_;
  std::string backend_;
  std::mutex backend_errors_mu_;
  std::unordered_map<std::string, prometheus::Counter*> backend_error_codes_;
  prometheus::Counter* would_reject_;
  prometheus::Counter* outcome_unknown_;
  prometheus::Counter* overloaded_;
  std::array<prometheus::Gauge*, 3> connections_;
  std::array<prometheus::Counter*, 3> connections_refused_;
  std::array<prometheus::Counter*, 3> connections_shed_;
  std::array<prometheus::Counter*, 3> accept_errors_;
  std::array<prometheus::Histogram*, 2> etcd_durations_;  // txn, range
  prometheus::Counter* etcd_errors_;
  std::array<prometheus::Counter*, 5> etcd_retries_;  // kRetryCauses' order
  struct ElectionSeries {
    prometheus::Counter* holder_changes = nullptr;
    prometheus::Gauge* up = nullptr;
    prometheus::Counter* behind = nullptr;
  };
  std::mutex elections_mu_;
  std::unordered_map<std::string, ElectionSeries> elections_;
  ElectionSeries* Election(const std::string& scope);
  prometheus::Counter* unverified_tokens_;
  // Per effect target, per outcome (kEffectOutcomes' order).
  std::mutex effects_mu_;
  std::unordered_map<std::string, std::array<prometheus::Counter*, 5>> effects_;
  // A histogram that catches up to totals counted elsewhere (SetLog).
  struct CaughtUp {
    prometheus::Histogram* histogram = nullptr;  // registered at first
    std::vector<std::uint64_t> counts;           // observed so far
    double sum = 0;
  };
  void CatchUp(CaughtUp& to, const char* name, const char* help,
               const BucketCounts& now);
  std::mutex log_mu_;
  CaughtUp group_writes_, sync_seconds_, group_wait_seconds_;
};

}  // namespace fencepost::metrics
