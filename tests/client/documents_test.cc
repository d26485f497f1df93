#include "client/documents.h"

#include <gtest/gtest.h>

#include <cstdint>

namespace fencepost::client {
namespace {

TEST(DocumentsTest, ReadsALeaseDocument) {
  const auto lease = ParseLease(
      R"({"name":"jobs/nightly","holder":"web-1","token":18446744073709551615,)"
      R"("ttl_ms":10000,"expires_in_ms":9950,)"
      R"("acquired_at":"2026-01-01T00:00:00.000000Z",)"
      R"("renewed_at":"2026-01-01T00:00:05.000000Z","transitions":3})");
  ASSERT_TRUE(lease);
  EXPECT_EQ(lease->name, "jobs/nightly");
  EXPECT_EQ(lease->holder, "web-1");
  EXPECT_EQ(lease->token, UINT64_MAX);
  EXPECT_EQ(lease->ttl_ms, 10000);
  EXPECT_EQ(lease->expires_in_ms, 9950);
  EXPECT_EQ(lease->acquired_at, "2026-01-01T00:00:00.000000Z");
  EXPECT_EQ(lease->renewed_at, "2026-01-01T00:00:05.000000Z");
  EXPECT_EQ(lease->transitions, 3u);
}

TEST(DocumentsTest, AFreeLeaseHasANullHolder) {
  const auto lease = ParseLease(
      R"({"name":"a","holder":null,"token":4,"ttl_ms":1000,)"
      R"("expires_in_ms":0,"acquired_at":null,"renewed_at":null,"transitions":1})");
  ASSERT_TRUE(lease);
  EXPECT_FALSE(lease->holder);
  EXPECT_EQ(lease->token, 4u);
  EXPECT_EQ(lease->acquired_at, "");
}

TEST(DocumentsTest, RefusesLeasesWithoutTheirCore) {
  EXPECT_FALSE(ParseLease(R"({"name":"a","holder":"h"})"));
  EXPECT_FALSE(ParseLease(R"({"name":"a","token":1})"));
  EXPECT_FALSE(ParseLease(R"({"holder":"h","token":1})"));
  EXPECT_FALSE(ParseLease(R"({"name":"a","holder":7,"token":1})"));
  EXPECT_FALSE(ParseLease(R"({"name":"a","holder":"h","token":-1})"));
  EXPECT_FALSE(ParseLease(R"({"name":"a","holder":"h","token":1.0})"));
  EXPECT_FALSE(ParseLease(R"({"name":"a","holder":"h","token":"1"})"));
  EXPECT_FALSE(ParseLease(R"(["name"])"));
  EXPECT_FALSE(ParseLease("not json"));
}

TEST(DocumentsTest, ReadsAFenceDocument) {
  const auto fence = ParseFence(
      R"({"fence":"orders/","token":34,"updated_at":"2026-01-01T00:00:00Z"})"
      "\n");
  ASSERT_TRUE(fence);
  EXPECT_EQ(fence->name, "orders/");
  EXPECT_EQ(fence->token, 34u);
  EXPECT_EQ(fence->updated_at, "2026-01-01T00:00:00Z");
  EXPECT_FALSE(ParseFence(R"({"fence":"a"})"));
}

TEST(DocumentsTest, ReadsProblems) {
  const auto held = ParseProblem(
      R"({"type":"urn:fencepost:problem:lease-held","title":"Lease held",)"
      R"("status":409,"detail":"held by web-1","key":"jobs/a",)"
      R"("holder":"web-1","expires_in_ms":1234})");
  ASSERT_TRUE(held);
  EXPECT_EQ(held->slug(), "lease-held");
  EXPECT_EQ(held->status, 409);
  EXPECT_EQ(held->holder, "web-1");
  EXPECT_EQ(held->expires_in_ms, 1234);
  EXPECT_EQ(held->key, "jobs/a");
  EXPECT_FALSE(held->current_token);

  const auto stale = ParseProblem(
      R"({"type":"urn:fencepost:problem:stale-token","status":409,)"
      R"("presented_token":33,"current_token":18446744073709551615})");
  ASSERT_TRUE(stale);
  EXPECT_EQ(stale->slug(), "stale-token");
  EXPECT_EQ(stale->presented_token, 33u);
  EXPECT_EQ(stale->current_token, UINT64_MAX);
  EXPECT_FALSE(ParseProblem(R"({"title":"no type"})"));
}

TEST(DocumentsTest, ReadsBatchResults) {
  const auto results = ParseBatchResults(
      R"({"results":[{"key":"a","status":201},{"key":"b\"c","status":200},)"
      R"({"key":"d","status":204,"extra":1}],"more":true})");
  ASSERT_TRUE(results);
  ASSERT_EQ(results->size(), 3u);
  EXPECT_EQ((*results)[0].key, "a");
  EXPECT_EQ((*results)[0].status, 201);
  EXPECT_EQ((*results)[1].key, "b\"c");
  EXPECT_EQ((*results)[1].status, 200);
  EXPECT_EQ((*results)[2].key, "d");
  EXPECT_EQ((*results)[2].status, 204);
  const auto none = ParseBatchResults(R"({"results":[]})");
  ASSERT_TRUE(none);
  EXPECT_TRUE(none->empty());
}

TEST(DocumentsTest, RefusesBatchResultsWithoutTheirCore) {
  EXPECT_FALSE(ParseBatchResults(""));
  EXPECT_FALSE(ParseBatchResults("[]"));
  EXPECT_FALSE(ParseBatchResults(R"({})"));
  EXPECT_FALSE(ParseBatchResults(R"({"results":{}})"));
  EXPECT_FALSE(ParseBatchResults(R"({"results":[1]})"));
  EXPECT_FALSE(ParseBatchResults(R"({"results":[{"key":"a"}]})"));
  EXPECT_FALSE(ParseBatchResults(R"({"results":[{"status":200}]})"));
  EXPECT_FALSE(ParseBatchResults(R"({"results":[{"key":1,"status":200}]})"));
  EXPECT_FALSE(ParseBatchResults(R"({"results":[{"key":"a","status":2.5}]})"));
  EXPECT_FALSE(ParseBatchResults(R"({"results":[{"key":"a","status":99}]})"));
  EXPECT_FALSE(ParseBatchResults(
      R"({"results":[{"key":"a","status":200},{"key":"b"}]})"));
}

}  // namespace
}  // namespace fencepost::client
