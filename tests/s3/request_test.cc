// s3/request.h: an S3 request signed with SigV4, each signature checked by
// sigv4/'s verifier as a store would check it. The runs against a real
// store are tests/coordination/probe_s3.sh (the probe) and tests/s3/ (the
// backend and the front door).

#include "s3/request.h"

#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <vector>

#include "sigv4/credentials.h"
#include "sigv4/crypto.h"
#include "sigv4/verifier.h"
#include "tests/s3/locations.h"

namespace fencepost::s3 {
namespace {

using std::chrono::system_clock;
using testing::Aws;
using testing::Rgw;

// 2013-05-24T00:00:00Z, the date of AWS's S3 signing examples.
system_clock::time_point ExampleTime() {
  return system_clock::from_time_t(1369353600);
}

sigv4::Credentials ExampleCredentials() {
  return {"AKIAIOSFODNN7EXAMPLE",
          sigv4::Secret("wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"),
          sigv4::Secret()};
}

std::string HeaderOf(const SignedRequest& request, const std::string& name) {
  for (const sigv4::Header& h : request.headers) {
    if (h.name == name) return h.value;
  }
  return "<absent>";
}

// The target is the key encoded once as SigV4's S3 style spells it: every
// byte outside A-Z a-z 0-9 - . _ ~ as %XX, '/' kept, nothing normalised.
TEST(S3SignedRequestTest, KeysAreEncodedOnceWithTheirSlashesKept) {
  const std::string key = "probe/a b+c%d/./\xC3\xA9~";
  const SignedRequest path =
      SignObjectRequest(Rgw(Addressing::kPath), ExampleCredentials(), "PUT",
                        key, {}, "x", ExampleTime());
  EXPECT_EQ(path.target, "/fencepost/probe/a%20b%2Bc%25d/./%C3%A9~");
  const SignedRequest virtual_hosted = SignObjectRequest(
      Aws(), ExampleCredentials(), "PUT", key, {}, "x", ExampleTime());
  EXPECT_EQ(virtual_hosted.target, "/probe/a%20b%2Bc%25d/./%C3%A9~");
}

// What a store does with the request: sigv4/'s verifier reads the claim
// from what is sent (Host added as the client adds it) and computes the
// signature it must carry; the canonical request is spelt out by hand.
TEST(S3SignedRequestTest, ASignedRequestIsWhatAStoreVerifies) {
  const Location location = Rgw(Addressing::kPath);
  const SignedRequest request = SignObjectRequest(
      location, ExampleCredentials(), "PUT", "probe/a b",
      {{"If-Match", "9dd4e461268c8034f5c8564e155c67a6"}}, "x", ExampleTime());
  EXPECT_EQ(request.method, "PUT");
  EXPECT_EQ(HeaderOf(request, "x-amz-date"), "20130524T000000Z");
  EXPECT_EQ(HeaderOf(request, "x-amz-content-sha256"), sigv4::HexSha256("x"));
  EXPECT_EQ(HeaderOf(request, "host"), "<absent>");
  std::vector<sigv4::Header> received = request.headers;
  received.push_back({"Host", location.Host()});
  received.push_back({"Content-Length", "1"});
  const sigv4::Received as_received{request.method, request.target, received};
  sigv4::Claim claim;
  ASSERT_FALSE(sigv4::ParseClaim(as_received, &claim));
  EXPECT_EQ(claim.access_key_id, "AKIAIOSFODNN7EXAMPLE");
  EXPECT_EQ(claim.scope.region, "us-east-1");
  EXPECT_EQ(claim.scope.service, "s3");
  sigv4::Signed expected;
  ASSERT_FALSE(sigv4::ExpectedSignature(
      as_received, claim, ExampleCredentials().secret_access_key, &expected));
  EXPECT_EQ(expected.canonical_request,
            "PUT\n"
            "/fencepost/probe/a%20b\n"
            "\n"
            "host:127.0.0.1:7480\n"
            "if-match:9dd4e461268c8034f5c8564e155c67a6\n"
            "x-amz-content-sha256:" +
                sigv4::HexSha256("x") +
                "\n"
                "x-amz-date:20130524T000000Z\n"
                "\n"
                "host;if-match;x-amz-content-sha256;x-amz-date\n" +
                sigv4::HexSha256("x"));
  EXPECT_EQ(claim.signature, expected.signature);
  // Another secret signs otherwise: the secret is what the signature
  // proves, and it appears in no header.
  sigv4::Signed other;
  ASSERT_FALSE(sigv4::ExpectedSignature(
      as_received, claim, sigv4::Secret("not the secret"), &other));
  EXPECT_NE(claim.signature, other.signature);
  for (const sigv4::Header& h : request.headers) {
    EXPECT_EQ(h.value.find("wJalrXUtnFEMI"), std::string::npos) << h.name;
  }
}

TEST(S3SignedRequestTest, ASessionTokenIsSentAndSigned) {
  sigv4::Credentials credentials = ExampleCredentials();
  credentials.session_token = sigv4::Secret("session-token-value");
  const SignedRequest request = SignObjectRequest(
      Rgw(Addressing::kPath), credentials, "GET", "k", {}, "", ExampleTime());
  EXPECT_EQ(HeaderOf(request, "x-amz-security-token"), "session-token-value");
  EXPECT_NE(HeaderOf(request, "Authorization")
                .find("SignedHeaders=host;x-amz-content-sha256;x-amz-date;"
                      "x-amz-security-token,"),
            std::string::npos)
      << HeaderOf(request, "Authorization");
  EXPECT_EQ(HeaderOf(request, "x-amz-content-sha256"),
            sigv4::kEmptyPayloadHash);
}

// A query is signed as the target spells it, canonical, and the verifier
// reads it back from the target; the given fields come first, in order.
TEST(S3SignedRequestTest, AQueryIsSignedAsTheTargetSpellsIt) {
  const Location location = Rgw(Addressing::kPath);
  RequestParts parts;
  parts.method = "GET";
  parts.path = ObjectPath(location, "");
  parts.query = {{"prefix", "env/a b&c+\xc3\xa9/"}, {"list-type", "2"}};
  parts.headers = {{"Range", "bytes=0-1"}, {"X-Extra", "1"}};
  parts.payload_hash = sigv4::kEmptyPayloadHash;
  const SignedRequest request =
      SignRequest(location, ExampleCredentials(), parts, ExampleTime());
  EXPECT_EQ(request.target,
            "/fencepost?list-type=2&prefix=env%2Fa%20b%26c%2B%C3%A9%2F");
  EXPECT_EQ(request.target, RequestTarget(parts.path, parts.query));
  ASSERT_GE(request.headers.size(), 2u);
  EXPECT_EQ(request.headers[0].name, "Range");
  EXPECT_EQ(request.headers[1].name, "X-Extra");
  std::vector<sigv4::Header> received = request.headers;
  received.push_back({"Host", location.Host()});
  const sigv4::Received as_received{request.method, request.target, received};
  sigv4::Claim claim;
  ASSERT_FALSE(sigv4::ParseClaim(as_received, &claim));
  sigv4::Signed expected;
  ASSERT_FALSE(sigv4::ExpectedSignature(
      as_received, claim, ExampleCredentials().secret_access_key, &expected));
  EXPECT_EQ(claim.signature, expected.signature);
  EXPECT_EQ(claim.signed_headers,
            (std::vector<std::string>{"host", "range", "x-amz-content-sha256",
                                      "x-amz-date", "x-extra"}));
  EXPECT_EQ(RequestTarget("/fencepost", {}), "/fencepost");
}

}  // namespace
}  // namespace fencepost::s3
