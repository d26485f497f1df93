#include "proxy/problem.h"

#include <gtest/gtest.h>

#include <set>

#include "fence/errc.h"

namespace fencepost::proxy {
namespace {

namespace http = boost::beast::http;

TEST(ProblemTest, StatusesAreSpecs) {
  EXPECT_EQ(StatusOf(ProblemType::kStaleToken), http::status::conflict);
  EXPECT_EQ(StatusOf(ProblemType::kMissingToken),
            http::status::precondition_required);
  EXPECT_EQ(StatusOf(ProblemType::kInvalidToken), http::status::bad_request);
  EXPECT_EQ(StatusOf(ProblemType::kBadKey), http::status::bad_request);
  EXPECT_EQ(StatusOf(ProblemType::kBadFraming), http::status::bad_request);
  EXPECT_EQ(StatusOf(ProblemType::kBodyTooLarge),
            http::status::payload_too_large);
  EXPECT_EQ(StatusOf(ProblemType::kHeadersTooLarge),
            http::status::request_header_fields_too_large);
  EXPECT_EQ(StatusOf(ProblemType::kMethodNotAllowed),
            http::status::method_not_allowed);
  EXPECT_EQ(StatusOf(ProblemType::kMapFull),
            http::status::insufficient_storage);
}

TEST(ProblemTest, EachCaseHasItsOwnTypeUri) {
  std::set<std::string_view> uris;
  for (int i = 0; i <= static_cast<int>(ProblemType::kLast); ++i) {
    uris.insert(TypeUri(static_cast<ProblemType>(i)));
  }
  EXPECT_EQ(uris.size(), static_cast<size_t>(ProblemType::kLast) + 1);
}

TEST(ProblemTest, MapFullBecomes507AndOtherStorageErrors500) {
  EXPECT_EQ(ProblemFromStorage(fence::Errc::kMapFull, "k").type,
            ProblemType::kMapFull);
  EXPECT_EQ(ProblemFromStorage(fence::Errc::kStorage, "k").type,
            ProblemType::kStorageFailure);
}

TEST(ProblemTest, ResponseIsProblemJsonWithTokens) {
  Response res = MakeProblemResponse(
      {ProblemType::kStaleToken, "d\"etail", "k", 33, 34}, 11);
  EXPECT_EQ(res.result(), http::status::conflict);
  EXPECT_EQ(res[http::field::content_type], "application/problem+json");
  EXPECT_EQ(res[http::field::content_length],
            std::to_string(res.body().size()));
  EXPECT_EQ(res["Fencing-Token"], "34");
  EXPECT_EQ(res.body(),
            "{\"type\":\"urn:fencepost:problem:stale-token\",\"title\":"
            "\"Fencing token is lower than the fence's highest\",\"status\":"
            "409,\"detail\":\"d\\\"etail\",\"key\":\"k\",\"presented_token\":"
            "33,\"current_token\":34}\n");
}

}  // namespace
}  // namespace fencepost::proxy
