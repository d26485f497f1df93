#include "metrics/metrics.h"

#include <gtest/gtest.h>

#include <string>
#include <string_view>

#include "tests/testing/exposition.h"

namespace fencepost::metrics {
namespace {

using testing::MetricValue;

TEST(MetricsTest, ExportsEverySpecMetricAtZero) {
  const std::string text = Metrics("lmdb").Serialize();
  for (const char* series : {
           "fencepost_writes_accepted_total",
           "fencepost_writes_rejected_total{reason=\"stale_token\"}",
           "fencepost_writes_rejected_total{reason=\"missing_token\"}",
           "fencepost_writes_rejected_total{reason=\"invalid_token\"}",
           "fencepost_token_advances_total",
           "fencepost_fences",
           "fencepost_backend_errors_total{backend=\"lmdb\",code=\"\"}",
           "fencepost_writes_would_reject_total",
           "fencepost_upstream_outcome_unknown_total",
           "fencepost_http_request_duration_seconds_count{port=\"data\"}",
       }) {
    EXPECT_EQ(MetricValue(text, series), 0) << series;
  }
  EXPECT_NE(text.find("# TYPE fencepost_http_request_duration_seconds "
                      "histogram"),
            std::string::npos);
  EXPECT_NE(text.find("# TYPE fencepost_fences gauge"), std::string::npos);
}

TEST(MetricsTest, CountsMoveByExactAmounts) {
  Metrics m("lmdb");
  m.WriteAccepted(false);
  m.WriteAccepted(true);
  m.WriteRejected(RejectReason::kStaleToken);
  m.WriteRejected(RejectReason::kInvalidToken);
  m.WriteRejected(RejectReason::kInvalidToken);
  m.WouldReject();
  m.BackendError();
  m.OutcomeUnknown();
  m.SetFences(7);
  m.Request(Port::kData, "PUT", 409, 0.002);
  m.Request(Port::kAdmin, "BREW", 405, 0.001);
  const std::string text = m.Serialize();
  EXPECT_EQ(MetricValue(text, "fencepost_writes_accepted_total"), 2);
  EXPECT_EQ(MetricValue(text, "fencepost_token_advances_total"), 1);
  EXPECT_EQ(
      MetricValue(text,
                  "fencepost_writes_rejected_total{reason=\"stale_token\"}"),
      1);
  EXPECT_EQ(MetricValue(text,
                        "fencepost_writes_rejected_total{reason=\"invalid_"
                        "token\"}"),
            2);
  EXPECT_EQ(MetricValue(text, "fencepost_writes_would_reject_total"), 1);
  EXPECT_EQ(
      MetricValue(text,
                  "fencepost_backend_errors_total{backend=\"lmdb\",code=\"\"}"),
      1);
  EXPECT_EQ(MetricValue(text, "fencepost_upstream_outcome_unknown_total"), 1);
  EXPECT_EQ(MetricValue(text, "fencepost_fences"), 7);
  EXPECT_EQ(MetricValue(text,
                        "fencepost_http_requests_total{code=\"409\",method="
                        "\"PUT\",port=\"data\"}"),
            1);
  EXPECT_EQ(MetricValue(text,
                        "fencepost_http_requests_total{code=\"405\",method="
                        "\"OTHER\",port=\"admin\"}"),
            1)
      << "unknown methods never become label values";
  EXPECT_EQ(MetricValue(text,
                        "fencepost_http_request_duration_seconds_bucket{port="
                        "\"data\",le=\"0.0025\"}"),
            1);
}

}  // namespace
}  // namespace fencepost::metrics

namespace fencepost::metrics {
namespace {

// The log's histograms take totals counted elsewhere at each scrape: a
// scrape adds what grew since the one before, never a total twice.
TEST(MetricsTest, TheLogsHistogramsCatchUpToTheirTotals) {
  Metrics m("lmdb");
  static constexpr double kBounds[] = {1, 2};
  const std::uint64_t zeros[] = {0, 0, 0};
  const Metrics::BucketCounts empty{kBounds, zeros, 0};
  std::uint64_t counts[] = {3, 1, 0};
  const auto set = [&](double sum) {
    m.SetLog({kBounds, counts, sum}, empty, empty);
  };
  m.SetLog(empty, empty, empty);
  EXPECT_EQ(MetricValue(m.Serialize(), "fencepost_log_group_writes_count"), 0);
  set(5);
  set(5);
  counts[2] = 2;  // two groups of 7
  set(19);
  const std::string text = m.Serialize();
  EXPECT_EQ(MetricValue(text, "fencepost_log_group_writes_count"), 6);
  EXPECT_EQ(MetricValue(text, "fencepost_log_group_writes_sum"), 19);
  EXPECT_EQ(MetricValue(text, "fencepost_log_group_writes_bucket{le=\"1\"}"),
            3);
  EXPECT_EQ(MetricValue(text, "fencepost_log_group_writes_bucket{le=\"2\"}"),
            4);
  EXPECT_EQ(MetricValue(text, "fencepost_log_sync_seconds_count"), 0);
  EXPECT_NE(text.find("# TYPE fencepost_log_group_wait_seconds histogram"),
            std::string::npos);
}

// Every cause's series at zero from the start, each counted alone; a cause
// outside the five counts nowhere.
TEST(MetricsTest, EtcdRetriesAreCountedByCause) {
  Metrics m("etcd");
  const auto series = [](std::string_view cause) {
    return "fencepost_etcd_txn_retries_total{cause=\"" + std::string(cause) +
           "\"}";
  };
  const std::string before = m.Serialize();
  for (const char* cause : {"fence", "value", "turn", "lease", "lease-limit"}) {
    EXPECT_EQ(MetricValue(before, series(cause)), 0) << cause;
  }
  m.EtcdTxnRetry("fence");
  m.EtcdTxnRetry("fence");
  m.EtcdTxnRetry("lease-limit");
  m.EtcdTxnRetry("no-such-cause");
  const std::string text = m.Serialize();
  EXPECT_EQ(MetricValue(text, series("fence")), 2);
  EXPECT_EQ(MetricValue(text, series("value")), 0);
  EXPECT_EQ(MetricValue(text, series("lease")), 0);
  EXPECT_EQ(MetricValue(text, series("lease-limit")), 1);
  EXPECT_EQ(MetricValue(text, series("no-such-cause")), -1);
}

TEST(MetricsTest, BuildInfoMapAndRejectedTokenLag) {
  Metrics m("lmdb", "1.2.3", "abc123");
  m.SetMap(4096, 1 << 20, 1 << 30);
  m.StaleRejected(33, 34);       // a zombie one lease behind
  m.StaleRejected(1, 10000001);  // a wildly wrong client
  const std::string text = m.Serialize();
  EXPECT_EQ(MetricValue(text,
                        "fencepost_build_info{revision=\"abc123\","
                        "version=\"1.2.3\"}"),
            1);
  EXPECT_EQ(MetricValue(text, "fencepost_lmdb_map_used_bytes"), 4096);
  EXPECT_EQ(MetricValue(text, "fencepost_lmdb_map_size_bytes"), 1 << 20);
  EXPECT_EQ(MetricValue(text, "fencepost_lmdb_map_max_bytes"), 1 << 30);
  EXPECT_EQ(MetricValue(text,
                        "fencepost_writes_rejected_total{reason="
                        "\"stale_token\"}"),
            2);
  EXPECT_EQ(MetricValue(text, "fencepost_rejected_token_lag_count"), 2);
  EXPECT_EQ(MetricValue(text, "fencepost_rejected_token_lag_sum"), 10000001);
  EXPECT_EQ(MetricValue(text, "fencepost_rejected_token_lag_bucket{le=\"1\"}"),
            1);
  EXPECT_EQ(
      MetricValue(text, "fencepost_rejected_token_lag_bucket{le=\"1000000\"}"),
      1);
  EXPECT_EQ(MetricValue(
                text, "fencepost_rejected_token_lag_bucket{le=\"1000000000\"}"),
            2);
}

}  // namespace
// A code names the kind of failure: the store's own (S3's
// SignatureDoesNotMatch), kept as sent when it is a plain word; anything
// else, and every code past the 64th, counts as "other", so a store cannot
// grow the series without bound.
TEST(MetricsTest, BackendErrorsAreCountedByABoundedCode) {
  Metrics m("s3");
  m.BackendError("SignatureDoesNotMatch");
  m.BackendError("SignatureDoesNotMatch");
  m.BackendError("bad\ncode\"");
  for (int i = 0; i < 100; ++i) m.BackendError("Code" + std::to_string(i));
  const std::string text = m.Serialize();
  EXPECT_EQ(MetricValue(text,
                        "fencepost_backend_errors_total{backend=\"s3\",code="
                        "\"SignatureDoesNotMatch\"}"),
            2);
  EXPECT_EQ(text.find("bad"), std::string::npos);
  std::size_t series = 0;
  for (std::size_t at = text.find("\nfencepost_backend_errors_total{");
       at != std::string::npos;
       at = text.find("\nfencepost_backend_errors_total{", at + 1)) {
    ++series;
  }
  EXPECT_LE(series, 65u);
  // "", SignatureDoesNotMatch, other, and the first 61 of Code0..Code99.
  EXPECT_EQ(MetricValue(text,
                        "fencepost_backend_errors_total{backend=\"s3\",code="
                        "\"other\"}"),
            1 + 39);
}

}  // namespace fencepost::metrics
