// The s3:// backend's requests without a store: where the bucket and the
// key go, what is signed, and what an S3 error answer says. Each signature
// is checked by recomputing it from the request as sent, with the SigV4
// library's own canonical form (whose AWS test vectors are in sigv4_test).

#include "storage/s3_request.h"

#include <gtest/gtest.h>

#include "sigv4/canonical.h"
#include "sigv4/crypto.h"
#include "sigv4/verifier.h"

namespace fencepost::storage {
namespace {

namespace bhttp = boost::beast::http;

S3Bucket Bucket(bool virtual_hosted, std::string port = "9000") {
  return {"127.0.0.1", std::move(port), false, "state", "us-east-1",
          virtual_hosted};
}

TEST(S3RequestTest, ObjectKeysAreThePrefixDecodedThenTheKeysOwnBytes) {
  EXPECT_EQ(ObjectKey("", "a b/c+d%"), "a b/c+d%");
  EXPECT_EQ(ObjectKey("/env/prod", "k"), "env/prod/k");
  EXPECT_EQ(ObjectKey("/a%20b", "\xc3\xa9"), "a b/\xc3\xa9");
}

TEST(S3RequestTest, PathStyleAndVirtualHostedAddressing) {
  const http::Request path =
      S3Request(Bucket(false), bhttp::verb::put, "env/a b+c%/\xc3\xa9", "v");
  EXPECT_EQ(path.target(), "/state/env/a%20b%2Bc%25/%C3%A9");
  EXPECT_EQ(path[bhttp::field::host], "127.0.0.1:9000");
  EXPECT_EQ(path[bhttp::field::content_length], "1");

  const http::Request virtual_hosted =
      S3Request(Bucket(true, "80"), bhttp::verb::get, "k", "");
  EXPECT_EQ(virtual_hosted.target(), "/k");
  EXPECT_EQ(virtual_hosted[bhttp::field::host], "state.127.0.0.1");
  EXPECT_EQ(virtual_hosted.count(bhttp::field::content_length), 0u);

  // The bucket itself (HeadBucket).
  EXPECT_EQ(S3Request(Bucket(false), bhttp::verb::head, "", "").target(),
            "/state");
  EXPECT_EQ(S3Request(Bucket(true), bhttp::verb::head, "", "").target(), "/");
  // An empty PUT still says its length.
  EXPECT_EQ(S3Request(Bucket(false), bhttp::verb::put, "k", "")
                [bhttp::field::content_length],
            "0");
}

TEST(S3RequestTest, EveryFieldIsSignedWithThePayloadsHash) {
  http::Request request =
      S3Request(Bucket(false), bhttp::verb::put, "dir/a b", "body");
  request.set(bhttp::field::content_type, "text/plain");
  request.set("x-amz-meta-fencing-token", "33");
  request.set(bhttp::field::if_match, "9b2cf535f27731c974343645a3985328");
  const sigv4::Credentials credentials{
      "AKIDEXAMPLE", sigv4::Secret("wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY"),
      sigv4::Secret()};
  const auto time = *sigv4::ParseAmzDate("20150830T123600Z");
  SignS3(request, Bucket(false), credentials, time);

  EXPECT_EQ(request["x-amz-date"], "20150830T123600Z");
  EXPECT_EQ(request["x-amz-content-sha256"], sigv4::HexSha256("body"));
  EXPECT_EQ(request.count("x-amz-security-token"), 0u);
  const std::string authorization(request[bhttp::field::authorization]);
  EXPECT_NE(authorization.find("Credential=AKIDEXAMPLE/20150830/us-east-1/s3/"
                               "aws4_request"),
            std::string::npos)
      << authorization;
  EXPECT_NE(authorization.find("SignedHeaders=content-length;content-type;"
                               "host;if-match;x-amz-content-sha256;x-amz-date;"
                               "x-amz-meta-fencing-token"),
            std::string::npos)
      << authorization;
  EXPECT_EQ(authorization.find("wJalr"), std::string::npos);

  // The signature is the one the request as sent yields.
  sigv4::Request as_sent;
  as_sent.method = "PUT";
  as_sent.path = "/state/dir/a b";
  for (const auto& field : request) {
    const std::string name(field.name_string());
    if (name == "Authorization" || name == "Connection") continue;
    as_sent.headers.push_back({name, std::string(field.value())});
  }
  as_sent.payload_hash = sigv4::HexSha256("body");
  const sigv4::Scope scope{"20150830", "us-east-1", "s3"};
  const sigv4::Signed expected = sigv4::SignCanonical(
      as_sent, "20150830T123600Z", scope, credentials.secret_access_key);
  EXPECT_NE(authorization.find("Signature=" + expected.signature),
            std::string::npos)
      << expected.canonical_request;
}

TEST(S3RequestTest, ASessionTokenIsSentAndSigned) {
  http::Request request = S3Request(Bucket(true), bhttp::verb::get, "k", "");
  const sigv4::Credentials credentials{"AKID", sigv4::Secret("secret"),
                                       sigv4::Secret("session-token")};
  SignS3(request, Bucket(true), credentials, std::chrono::system_clock::now());
  EXPECT_EQ(request["x-amz-security-token"], "session-token");
  EXPECT_NE(std::string(request[bhttp::field::authorization])
                .find("x-amz-security-token"),
            std::string::npos);
}

TEST(S3RequestTest, ErrorAnswersGiveTheirCodeAndRequestIdBounded) {
  http::Response response(bhttp::status::service_unavailable, 11);
  response.body() =
      "<?xml version=\"1.0\" encoding=\"UTF-8\"?><Error><Code>SlowDown</Code>"
      "<Message>Please reduce\x01 your rate</Message><RequestId>tx0001"
      "</RequestId></Error>";
  S3Error error = ParseS3Error(response);
  EXPECT_EQ(error.status, 503u);
  EXPECT_EQ(error.code, "SlowDown");
  EXPECT_EQ(error.message, "Please reduce your rate");
  EXPECT_EQ(error.request_id, "tx0001");

  // No body (a HEAD): the id from x-amz-request-id, nothing invented.
  http::Response head(bhttp::status::forbidden, 11);
  head.set("x-amz-request-id", "tx0002\r\nX-Evil: 1");
  error = ParseS3Error(head);
  EXPECT_EQ(error.code, "");
  EXPECT_EQ(error.request_id.find('\r'), std::string::npos);

  http::Response huge(bhttp::status::bad_request, 11);
  huge.body() = "<Code>" + std::string(100000, 'A') + "</Code>";
  EXPECT_EQ(ParseS3Error(huge).code.size(), 256u);
}

TEST(S3RequestTest, EtagsLoseTheirQuotesAndTokensComeFromTheMetadata) {
  EXPECT_EQ(UnquoteEtag("\"9b2c-2\""), "9b2c-2");
  EXPECT_EQ(UnquoteEtag("W/\"x\""), "W/x");
  EXPECT_EQ(UnquoteEtag(""), "");
  http::Response response(bhttp::status::ok, 11);
  EXPECT_FALSE(TokenOfObject(response));
  response.set("x-amz-meta-fencing-token", "34");
  EXPECT_EQ(TokenOfObject(response), 34u);
  response.set("x-amz-meta-fencing-token", "-1");
  EXPECT_FALSE(TokenOfObject(response));
}

}  // namespace
}  // namespace fencepost::storage
