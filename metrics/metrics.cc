#include "metrics/metrics.h"

#include <prometheus/text_serializer.h>

namespace fencepost::metrics {
namespace {

using prometheus::BuildCounter;
using prometheus::BuildGauge;
using prometheus::BuildHistogram;

constexpr std::string_view kMethods[] = {"GET",   "HEAD",   "PUT",     "POST",
                                         "PATCH", "DELETE", "OPTIONS", "OTHER"};

// The index of `method` in kMethods; methods outside the set are OTHER.
std::uint32_t MethodIndex(std::string_view method) {
  std::uint32_t i = 0;
  while (i + 1 < std::size(kMethods) && kMethods[i] != method) ++i;
  return i;
}

// The causes of fencepost_etcd_txn_retries_total (the etcd store's
// etcd::ConflictName).
constexpr std::array<std::string_view, 5> kRetryCauses = {
    "fence", "value", "turn", "lease", "lease-limit"};

const char* PortLabel(Port port) {
  switch (port) {
    case Port::kData:
      return "data";
    case Port::kAdmin:
      return "admin";
    case Port::kS3:
      break;
  }
  return "s3";
}

}  // namespace

Metrics::Metrics(std::string_view backend, std::string_view version,
                 std::string_view revision)
    : registry_(std::make_shared<prometheus::Registry>()) {
  auto& r = *registry_;
  BuildGauge()
      .Name("fencepost_build_info")
      .Help("Always 1; the labels name the build.")
      .Register(r)
      .Add({{"version", std::string(version)},
            {"revision", std::string(revision)}})
      .Set(1);
  map_used_ = &BuildGauge()
                   .Name("fencepost_lmdb_map_used_bytes")
                   .Help("Bytes of the LMDB maps in use (all shards).")
                   .Register(r)
                   .Add({});
  map_size_ = &BuildGauge()
                   .Name("fencepost_lmdb_map_size_bytes")
                   .Help(
                       "Current size of the LMDB maps (all shards); they "
                       "grow up to --max-map-size.")
                   .Register(r)
                   .Add({});
  map_max_ = &BuildGauge()
                  .Name("fencepost_lmdb_map_max_bytes")
                  .Help(
                      "The most the LMDB maps may grow to (--max-map-size); "
                      "past it writes get 507.")
                  .Register(r)
                  .Add({});
  token_lag_ =
      &BuildHistogram()
           .Name("fencepost_rejected_token_lag")
           .Help(
               "How far below the fence a rejected token was "
               "(current - presented).")
           .Register(r)
           .Add({}, prometheus::Histogram::BucketBoundaries{
                        1, 10, 100, 1e3, 1e4, 1e5, 1e6, 1e9, 1e12, 1e15, 1e18});
  accepted_ = &BuildCounter()
                   .Name("fencepost_writes_accepted_total")
                   .Help(
                       "Fenced writes (PUT, DELETE, POST, PATCH, bumps) "
                       "accepted.")
                   .Register(r)
                   .Add({});
  auto& rejected = BuildCounter()
                       .Name("fencepost_writes_rejected_total")
                       .Help("Fenced writes rejected, by reason.")
                       .Register(r);
  rejected_ = {&rejected.Add({{"reason", "stale_token"}}),
               &rejected.Add({{"reason", "missing_token"}}),
               &rejected.Add({{"reason", "invalid_token"}}),
               &rejected.Add({{"reason", "precondition_failed"}})};
  advances_ = &BuildCounter()
                   .Name("fencepost_token_advances_total")
                   .Help(
                       "Accepted writes and bumps that raised a fence "
                       "(leadership churn).")
                   .Register(r)
                   .Add({});
  fences_ = &BuildGauge()
                 .Name("fencepost_fences")
                 .Help("Fence records held.")
                 .Register(r)
                 .Add({});
  const auto counter = [&r](const char* name, const char* help) {
    return &BuildCounter().Name(name).Help(help).Register(r).Add({});
  };
  lease_grants_ = counter("fencepost_lease_grants_total",
                          "Leases granted (each grant a new token).");
  lease_renewals_ = counter("fencepost_lease_renewals_total",
                            "Leases renewed by their holder.");
  lease_denied_ = counter("fencepost_lease_denied_total",
                          "Acquires refused: the lease was held by a live "
                          "holder.");
  lease_releases_ =
      counter("fencepost_lease_releases_total", "Leases released.");
  lease_expirations_ =
      counter("fencepost_lease_expirations_total",
              "Leases that ran out without a release, counted when noticed.");
  unverified_tokens_ =
      counter("fencepost_unverified_tokens_total",
              "Writes and bumps on an elected fence refused with 409 "
              "unverified-token: the election's source did not confirm the "
              "token as its holder's.");
  lease_limit_reached_ =
      counter("fencepost_lease_limit_reached_total",
              "Grants refused with 507: --max-leases leases were live.");
  leases_held_ = &BuildGauge()
                      .Name("fencepost_leases_held")
                      .Help("Live leases.")
                      .Register(r)
                      .Add({});
  watchers_ = &BuildGauge()
                   .Name("fencepost_watchers")
                   .Help(
                       "Watchers: event streams (GET /v1/watch) and long "
                       "polls (wait_above) open now.")
                   .Register(r)
                   .Add({});
  watch_events_ = counter("fencepost_watch_events_total",
                          "Events published to watchers: fence, lease and "
                          "rejection changes.");
  watchers_dropped_ = counter("fencepost_watchers_dropped_total",
                              "Event streams closed because their unsent "
                              "events passed 1 MiB.");
  requests_ = &BuildCounter()
                   .Name("fencepost_http_requests_total")
                   .Help("HTTP requests served.")
                   .Register(r);
  auto& durations = BuildHistogram()
                        .Name("fencepost_http_request_duration_seconds")
                        .Help("Time from request read to response written.")
                        .Register(r);
  const prometheus::Histogram::BucketBoundaries buckets = {
      0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025,
      0.05,   0.1,     0.25,   0.5,   1,      2.5,   5,    10};
  durations_ = {&durations.Add({{"port", "data"}}, buckets),
                &durations.Add({{"port", "admin"}}, buckets),
                &durations.Add({{"port", "s3"}}, buckets)};
  auto& etcd = BuildHistogram()
                   .Name("fencepost_etcd_request_duration_seconds")
                   .Help(
                       "Round trips to etcd (--fence-store etcd://), by "
                       "operation.")
                   .Register(r);
  etcd_durations_ = {&etcd.Add({{"op", "txn"}}, buckets),
                     &etcd.Add({{"op", "range"}}, buckets)};
  etcd_errors_ = &BuildCounter()
                      .Name("fencepost_etcd_errors_total")
                      .Help(
                          "etcd requests that failed: no answer, or an "
                          "error such as a lost quorum.")
                      .Register(r)
                      .Add({});
  auto& retries =
      BuildCounter()
          .Name("fencepost_etcd_txn_retries_total")
          .Help(
              "Writes decided again because an etcd transaction's compare "
              "failed, by cause: fence (a fence it compared moved), value "
              "(a value a conditional write was decided on changed), turn "
              "(a fence's turn held by a different replica, or this "
              "replica's turn lease ran out), lease (a lease's record or "
              "hold changed), lease-limit (a hold created since "
              "--max-leases counted).")
          .Register(r);
  for (std::size_t i = 0; i < kRetryCauses.size(); ++i) {
    etcd_retries_[i] = &retries.Add({{"cause", std::string(kRetryCauses[i])}});
  }
  backend_errors_ = &BuildCounter()
                         .Name("fencepost_backend_errors_total")
                         .Help(
                             "Storage failures answered 5xx, and the store's "
                             "refusals of fencepost's own requests, by code.")
                         .Register(r);
  backend_ = std::string(backend);
  BackendErrorCounter("");  // at zero from the start
  would_reject_ = &BuildCounter()
                       .Name("fencepost_writes_would_reject_total")
                       .Help(
                           "Observe mode: writes enforce mode would have "
                           "rejected, stored or forwarded anyway.")
                       .Register(r)
                       .Add({});
  outcome_unknown_ = &BuildCounter()
                          .Name("fencepost_upstream_outcome_unknown_total")
                          .Help("Upstream writes whose outcome is unknown.")
                          .Register(r)
                          .Add({});
  overloaded_ = &BuildCounter()
                     .Name("fencepost_writes_overloaded_total")
                     .Help(
                         "Writes and bumps refused with 503 because the "
                         "commit queue was full.")
                     .Register(r)
                     .Add({});
  auto& open = BuildGauge()
                   .Name("fencepost_connections")
                   .Help("Open client connections, by port.")
                   .Register(r);
  auto& refused = BuildCounter()
                      .Name("fencepost_connections_refused_total")
                      .Help(
                          "Connections refused (503, closed) because the "
                          "port was at its connection cap with none idle.")
                      .Register(r);
  auto& shed = BuildCounter()
                   .Name("fencepost_connections_shed_total")
                   .Help(
                       "Idle connections closed to make room for a new one "
                       "at the connection cap.")
                   .Register(r);
  auto& accept_errors = BuildCounter()
                            .Name("fencepost_accept_errors_total")
                            .Help(
                                "Failed accepts (out of descriptors, say), by "
                                "port.")
                            .Register(r);
  for (Port port : {Port::kData, Port::kAdmin, Port::kS3}) {
    const int i = static_cast<int>(port);
    const prometheus::Labels labels = {{"port", PortLabel(port)}};
    connections_[i] = &open.Add(labels);
    connections_refused_[i] = &refused.Add(labels);
    connections_shed_[i] = &shed.Add(labels);
    accept_errors_[i] = &accept_errors.Add(labels);
  }
}

void Metrics::ConnectionOpened(Port port) {
  connections_[static_cast<int>(port)]->Increment();
}
void Metrics::ConnectionClosed(Port port) {
  connections_[static_cast<int>(port)]->Decrement();
}
void Metrics::ConnectionRefused(Port port) {
  connections_refused_[static_cast<int>(port)]->Increment();
}
void Metrics::ConnectionShed(Port port) {
  connections_shed_[static_cast<int>(port)]->Increment();
}
void Metrics::AcceptFailed(Port port) {
  accept_errors_[static_cast<int>(port)]->Increment();
}

void Metrics::WriteAccepted(bool advanced) {
  accepted_->Increment();
  if (advanced) advances_->Increment();
}

void Metrics::WriteRejected(RejectReason reason) {
  rejected_[static_cast<int>(reason)]->Increment();
}

void Metrics::StaleRejected(std::uint64_t presented, std::uint64_t current) {
  WriteRejected(RejectReason::kStaleToken);
  token_lag_->Observe(
      current > presented ? static_cast<double>(current - presented) : 0.0);
}

void Metrics::SetMap(double used_bytes, double size_bytes, double max_bytes) {
  map_used_->Set(used_bytes);
  map_size_->Set(size_bytes);
  map_max_->Set(max_bytes);
}

void Metrics::WouldReject() { would_reject_->Increment(); }
prometheus::Counter& Metrics::BackendErrorCounter(std::string_view code) {
  constexpr std::size_t kMaxCodes = 64;
  const bool plain = code.size() <= 64 &&
                     code.find_first_not_of(
                         "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
                         "0123456789._-") == std::string_view::npos;
  std::string label(plain ? code : "other");
  std::lock_guard lock(backend_errors_mu_);
  auto found = backend_error_codes_.find(label);
  if (found == backend_error_codes_.end() &&
      backend_error_codes_.size() >= kMaxCodes) {
    label = "other";
    found = backend_error_codes_.find(label);
  }
  if (found != backend_error_codes_.end()) return *found->second;
  prometheus::Counter* counter =
      &backend_errors_->Add({{"backend", backend_}, {"code", label}});
  backend_error_codes_.emplace(label, counter);
  return *counter;
}

void Metrics::BackendError(std::string_view code) {
  BackendErrorCounter(code).Increment();
}
void Metrics::OutcomeUnknown() { outcome_unknown_->Increment(); }
void Metrics::Overloaded() { overloaded_->Increment(); }
void Metrics::SetFences(double count) { fences_->Set(count); }

void Metrics::Request(Port port, std::string_view method, unsigned status,
                      double seconds) {
  const std::uint32_t method_index = MethodIndex(method);
  const std::uint32_t key =
      (status << 8) | (method_index << 1) | static_cast<std::uint32_t>(port);
  prometheus::Counter* counter;
  {
    std::lock_guard lock(request_mu_);
    auto [it, added] = request_children_.try_emplace(key, nullptr);
    if (added) {
      it->second =
          &requests_->Add({{"port", PortLabel(port)},
                           {"method", std::string(kMethods[method_index])},
                           {"code", std::to_string(status)}});
    }
    counter = it->second;
  }
  counter->Increment();
  durations_[static_cast<int>(port)]->Observe(seconds);
}

void Metrics::EtcdRequest(std::string_view path, double seconds, bool ok) {
  etcd_durations_[path == "/v3/kv/txn" ? 0 : 1]->Observe(seconds);
  if (!ok) etcd_errors_->Increment();
}

void Metrics::EtcdTxnRetry(std::string_view cause) {
  for (std::size_t i = 0; i < kRetryCauses.size(); ++i) {
    if (kRetryCauses[i] == cause) etcd_retries_[i]->Increment();
  }
}

void Metrics::SetLog(const BucketCounts& group_writes,
                     const BucketCounts& sync_seconds,
                     const BucketCounts& group_wait_seconds) {
  std::lock_guard lock(log_mu_);
  CatchUp(group_writes_, "fencepost_log_group_writes",
          "Writes per group committed to the write-ahead log (groups that "
          "logged nothing included).",
          group_writes);
  CatchUp(sync_seconds_, "fencepost_log_sync_seconds",
          "Syncs of the write-ahead log, from submission to completion.",
          sync_seconds);
  CatchUp(group_wait_seconds_, "fencepost_log_group_wait_seconds",
          "Time a group of writes waited from its decision to its answer.",
          group_wait_seconds);
}

void Metrics::CatchUp(CaughtUp& to, const char* name, const char* help,
                      const BucketCounts& now) {
  if (to.histogram == nullptr) {
    to.histogram = &BuildHistogram()
                        .Name(name)
                        .Help(help)
                        .Register(*registry_)
                        .Add({}, prometheus::Histogram::BucketBoundaries(
                                     now.bounds.begin(), now.bounds.end()));
    to.counts.assign(now.counts.size(), 0);
  }
  // Totals only grow; the histogram takes what was added since.
  std::vector<double> added(to.counts.size(), 0);
  bool any = false;
  for (std::size_t i = 0; i < added.size() && i < now.counts.size(); ++i) {
    if (now.counts[i] <= to.counts[i]) continue;
    added[i] = static_cast<double>(now.counts[i] - to.counts[i]);
    to.counts[i] = now.counts[i];
    any = true;
  }
  if (!any) return;
  to.histogram->ObserveMultiple(added, now.sum - to.sum);
  to.sum = now.sum;
}

std::string Metrics::Serialize() const {
  return prometheus::TextSerializer().Serialize(registry_->Collect());
}

void Metrics::LeaseGranted() { lease_grants_->Increment(); }
void Metrics::LeaseRenewed() { lease_renewals_->Increment(); }
void Metrics::LeaseDenied() { lease_denied_->Increment(); }
void Metrics::LeaseLimitReached() { lease_limit_reached_->Increment(); }

void Metrics::AddElection(const std::string& scope) {
  std::lock_guard lock(elections_mu_);
  ElectionSeries& series = elections_[scope];
  if (series.up != nullptr) return;
  const prometheus::Labels labels{{"scope", scope}};
  series.holder_changes =
      &BuildCounter()
           .Name("fencepost_election_holder_changes_total")
           .Help("New holders of a watched election (--election), by scope.")
           .Register(*registry_)
           .Add(labels);
  series.up = &BuildGauge()
                   .Name("fencepost_election_up")
                   .Help(
                       "1 when the election's source answered its last "
                       "read, else 0; by scope.")
                   .Register(*registry_)
                   .Add(labels);
  series.behind =
      &BuildCounter()
           .Name("fencepost_election_holder_behind_total")
           .Help(
               "Holders the election's source named with a token below "
               "the fence (never obeyed: a fence never goes down).")
           .Register(*registry_)
           .Add(labels);
}

Metrics::ElectionSeries* Metrics::Election(const std::string& scope) {
  std::lock_guard lock(elections_mu_);
  const auto it = elections_.find(scope);
  return it == elections_.end() ? nullptr : &it->second;
}

void Metrics::ElectionHolderChanged(const std::string& scope) {
  if (ElectionSeries* series = Election(scope)) {
    series->holder_changes->Increment();
  }
}

void Metrics::SetElectionUp(const std::string& scope, bool up) {
  if (ElectionSeries* series = Election(scope)) series->up->Set(up ? 1 : 0);
}

void Metrics::ElectionBehind(const std::string& scope) {
  if (ElectionSeries* series = Election(scope)) series->behind->Increment();
}

void Metrics::UnverifiedToken() { unverified_tokens_->Increment(); }

namespace {
constexpr std::array<std::string_view, 5> kEffectOutcomes = {
    "sent", "replayed", "stale", "unknown", "not_sent"};
}  // namespace

void Metrics::AddEffectTarget(const std::string& target) {
  std::lock_guard lock(effects_mu_);
  auto& series = effects_[target];
  auto& family =
      BuildCounter()
          .Name("fencepost_effects_total")
          .Help(
              "Requests for fenced side effects (--effect-target), by target "
              "and outcome: sent, replayed (a recorded answer), stale (a "
              "token below the fence: nothing sent), unknown (sent, no "
              "answer), not_sent (the target could not be reached).")
          .Register(*registry_);
  for (std::size_t i = 0; i < kEffectOutcomes.size(); ++i) {
    series[i] = &family.Add(
        {{"target", target}, {"outcome", std::string(kEffectOutcomes[i])}});
  }
}

void Metrics::Effect(const std::string& target, std::string_view outcome) {
  std::lock_guard lock(effects_mu_);
  const auto it = effects_.find(target);
  if (it == effects_.end()) return;
  for (std::size_t i = 0; i < kEffectOutcomes.size(); ++i) {
    if (kEffectOutcomes[i] == outcome) it->second[i]->Increment();
  }
}
void Metrics::LeaseReleased() { lease_releases_->Increment(); }
void Metrics::LeasesExpired(std::size_t count) {
  if (count > 0) lease_expirations_->Increment(static_cast<double>(count));
}
void Metrics::SetLeasesHeld(double count) { leases_held_->Set(count); }

void Metrics::SetWatches(double watchers, std::uint64_t events_total,
                         std::uint64_t dropped_total) {
  watchers_->Set(watchers);
  // The hub counts; the counters catch up at each scrape.
  const auto catch_up = [](prometheus::Counter* counter, std::uint64_t total) {
    const double now = static_cast<double>(total);
    if (now > counter->Value()) counter->Increment(now - counter->Value());
  };
  catch_up(watch_events_, events_total);
  catch_up(watchers_dropped_, dropped_total);
}

}  // namespace fencepost::metrics
