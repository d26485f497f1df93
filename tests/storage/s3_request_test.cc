// The s3:// backend's requests as http::Request without a store: s3/'s
// addressing, signing and error reading adapted to http/'s types. Each
// signature is checked by recomputing it from the request as sent, with the
// SigV4 library's own canonical form (whose AWS test vectors are in
// sigv4_test). s3/ itself: tests/s3/*_test.cc of s3_protocol_test.

#include "storage/s3_request.h"

#include <gtest/gtest.h>

#include "sigv4/canonical.h"
#include "sigv4/crypto.h"
#include "sigv4/verifier.h"

namespace fencepost::storage {
namespace {

namespace bhttp = boost::beast::http;

s3::Location Bucket(bool virtual_hosted, std::string port = "9000") {
  s3::Location location;
  location.endpoint = s3::ParseEndpoint("http://127.0.0.1:" + port);
  location.bucket = "state";
  location.region = "us-east-1";
  location.addressing =
      virtual_hosted ? s3::Addressing::kVirtual : s3::Addressing::kPath;
  return location;
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
  EXPECT_EQ(S3Request(Bucket(false), bhttp::verb::put, "k",
                      "")[bhttp::field::content_length],
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
  s3::ErrorAnswer error = ParseS3Error(response);
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

TEST(S3RequestTest, TokensComeFromTheMetadata) {
  http::Response response(bhttp::status::ok, 11);
  EXPECT_FALSE(TokenOfObject(response));
  response.set("x-amz-meta-fencing-token", "34");
  EXPECT_EQ(TokenOfObject(response), 34u);
  response.set("x-amz-meta-fencing-token", "-1");
  EXPECT_FALSE(TokenOfObject(response));
}

// A listing's query is part of what is signed: the store recomputes the
// signature from the target's query, as sigv4's verifier does.
TEST(S3RequestTest, AListingsQueryIsSignedAsTheVerifierReadsIt) {
  const std::vector<sigv4::QueryParam> query = {
      {"list-type", "2"},
      {"prefix", "env/a b&c+\xc3\xa9/"},
      {"delimiter", "/"},
      {"continuation-token", "env/x=y"}};
  http::Request request = S3ListRequest(Bucket(false), query);
  EXPECT_EQ(request.target(),
            "/state?continuation-token=env%2Fx%3Dy&delimiter=%2F&list-type=2&"
            "prefix=env%2Fa%20b%26c%2B%C3%A9%2F");
  const sigv4::Credentials credentials{"AKID", sigv4::Secret("secret"),
                                       sigv4::Secret()};
  SignS3(request, Bucket(false), credentials,
         *sigv4::ParseAmzDate("20150830T123600Z"));

  const auto verify = [&](std::string_view target) {
    std::vector<sigv4::Header> headers;
    for (const auto& field : request) {
      headers.push_back(
          {std::string(field.name_string()), std::string(field.value())});
    }
    const sigv4::Received received{"GET", target, headers};
    sigv4::Claim claim;
    EXPECT_FALSE(sigv4::ParseClaim(received, &claim));
    sigv4::Signed expected;
    EXPECT_FALSE(sigv4::ExpectedSignature(
        received, claim, credentials.secret_access_key, &expected));
    return sigv4::ConstantTimeEqual(expected.signature, claim.signature);
  };
  EXPECT_TRUE(verify(request.target()));
  // Another prefix is another signature.
  EXPECT_FALSE(
      verify("/state?continuation-token=env%2Fx%3Dy&delimiter=%2F&"
             "list-type=2&prefix=other%2F"));
  // Virtual-hosted: the bucket's root with the query.
  EXPECT_EQ(S3ListRequest(Bucket(true), {{"list-type", "2"}}).target(),
            "/?list-type=2");
}

}  // namespace
}  // namespace fencepost::storage
