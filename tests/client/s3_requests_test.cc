// cli/s3_requests.h: where an S3 request goes under each addressing style,
// its SigV4 signature (checked by sigv4/'s verifier, as a store would check
// it), and what an S3 error answer says. The runs against a real store are
// tests/coordination/probe_s3.sh.

#include "cli/s3_requests.h"

#include <gtest/gtest.h>

#include <chrono>
#include <stdexcept>
#include <string>
#include <vector>

#include "sigv4/credentials.h"
#include "sigv4/crypto.h"
#include "sigv4/s3_error.h"
#include "sigv4/verifier.h"

namespace fencepost::cli::s3 {
namespace {

using std::chrono::system_clock;

// 2013-05-24T00:00:00Z, the date of AWS's S3 signing examples.
system_clock::time_point ExampleTime() {
  return system_clock::from_time_t(1369353600);
}

sigv4::Credentials ExampleCredentials() {
  return {"AKIAIOSFODNN7EXAMPLE",
          sigv4::Secret("wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"),
          sigv4::Secret()};
}

Location Rgw(Addressing addressing) {
  Location location;
  location.endpoint = ParseEndpoint("http://127.0.0.1:7480");
  location.bucket = "fencepost";
  location.addressing = addressing;
  return location;
}

std::string HeaderOf(const SignedRequest& request, const std::string& name) {
  for (const sigv4::Header& h : request.headers) {
    if (h.name == name) return h.value;
  }
  return "<absent>";
}

TEST(S3RequestsTest, EndpointsTakeTheSchemesPortsAndIpv6) {
  const Endpoint aws = ParseEndpoint("https://s3.eu-west-1.amazonaws.com");
  EXPECT_TRUE(aws.tls);
  EXPECT_EQ(aws.Authority(), "s3.eu-west-1.amazonaws.com:443");
  EXPECT_EQ(ParseEndpoint("http://127.0.0.1/").Authority(), "127.0.0.1:80");
  EXPECT_EQ(ParseEndpoint("http://127.0.0.1:7480").Authority(),
            "127.0.0.1:7480");
  const Endpoint v6 = ParseEndpoint("http://[::1]:9000");
  EXPECT_EQ(v6.host, "::1");
  EXPECT_EQ(v6.Authority(), "[::1]:9000");
  for (const char* bad :
       {"ftp://host", "host:80", "http://", "http://h:0", "http://h:65536",
        "http://h:x", "http://h:", "http://h/bucket", "http://u@h",
        "http://h?q", "http://[::1", "http://[::1]x"}) {
    EXPECT_THROW(ParseEndpoint(bad), std::invalid_argument) << bad;
  }
}

TEST(S3RequestsTest, AwsEndpointsDefaultToVirtualAndOthersToPath) {
  EXPECT_EQ(DefaultEndpoint("us-east-1"), "https://s3.us-east-1.amazonaws.com");
  EXPECT_EQ(DefaultAddressing(ParseEndpoint(DefaultEndpoint("us-east-1"))),
            Addressing::kVirtual);
  EXPECT_EQ(DefaultAddressing(ParseEndpoint("http://127.0.0.1:7480")),
            Addressing::kPath);
  EXPECT_EQ(DefaultAddressing(ParseEndpoint("https://minio.example:9000")),
            Addressing::kPath);
  EXPECT_EQ(ParseAddressing("path"), Addressing::kPath);
  EXPECT_EQ(ParseAddressing("virtual"), Addressing::kVirtual);
  EXPECT_EQ(ParseAddressing("Virtual"), std::nullopt);
}

TEST(S3RequestsTest, BucketUrlsNameABucketAndADecodedPrefix) {
  const BucketUrl plain = ParseBucketUrl("s3://fencepost");
  EXPECT_EQ(plain.bucket, "fencepost");
  EXPECT_EQ(plain.prefix, "");
  EXPECT_EQ(ParseBucketUrl("s3://fencepost/").prefix, "");
  EXPECT_EQ(ParseBucketUrl("s3://my.bucket-1/a/b//").prefix, "a/b");
  EXPECT_EQ(ParseBucketUrl("s3://fencepost/probe%20dir+x").prefix,
            "probe dir+x");
  for (const char* bad :
       {"http://fencepost", "s3://", "s3://ab", "s3://Fencepost",
        "s3://-fencepost", "s3://fencepost-", "s3://fence_post",
        "s3://fencepost/a%2", "s3://fencepost/a?x", "s3://fencepost/a%0Ab",
        "s3://fencepost/a#b"}) {
    EXPECT_THROW(ParseBucketUrl(bad), std::invalid_argument) << bad;
  }
}

TEST(S3RequestsTest, PathStyleKeepsTheBucketInThePath) {
  const Location location = Rgw(Addressing::kPath);
  EXPECT_NO_THROW(location.Check());
  EXPECT_EQ(location.BaseUrl(), "http://127.0.0.1:7480");
  EXPECT_EQ(location.Host(), "127.0.0.1:7480");
  EXPECT_EQ(ObjectPath(location, "probe/k"), "/fencepost/probe/k");
}

TEST(S3RequestsTest, VirtualHostedAddressingPutsTheBucketInTheHost) {
  Location location;
  location.endpoint = ParseEndpoint("https://s3.us-east-1.amazonaws.com");
  location.bucket = "fencepost";
  location.addressing = Addressing::kVirtual;
  EXPECT_NO_THROW(location.Check());
  EXPECT_EQ(location.BaseUrl(),
            "https://fencepost.s3.us-east-1.amazonaws.com:443");
  EXPECT_EQ(location.Host(), "fencepost.s3.us-east-1.amazonaws.com:443");
  EXPECT_EQ(ObjectPath(location, "probe/k"), "/probe/k");
  // No bucket before an IP address; no dotted bucket under a wildcard
  // certificate.
  EXPECT_THROW(Rgw(Addressing::kVirtual).Check(), std::invalid_argument);
  location.bucket = "my.bucket";
  EXPECT_THROW(location.Check(), std::invalid_argument);
  location.endpoint.tls = false;
  EXPECT_NO_THROW(location.Check());
}

// The target is the key encoded once as SigV4's S3 style spells it: every
// byte outside A-Z a-z 0-9 - . _ ~ as %XX, '/' kept, nothing normalised.
TEST(S3RequestsTest, KeysAreEncodedOnceWithTheirSlashesKept) {
  const std::string key = "probe/a b+c%d/./\xC3\xA9~";
  const SignedRequest path =
      SignObjectRequest(Rgw(Addressing::kPath), ExampleCredentials(), "PUT",
                        key, {}, "x", ExampleTime());
  EXPECT_EQ(path.target, "/fencepost/probe/a%20b%2Bc%25d/./%C3%A9~");
  Location aws;
  aws.endpoint = ParseEndpoint("https://s3.us-east-1.amazonaws.com");
  aws.bucket = "fencepost";
  aws.addressing = Addressing::kVirtual;
  const SignedRequest virtual_hosted = SignObjectRequest(
      aws, ExampleCredentials(), "PUT", key, {}, "x", ExampleTime());
  EXPECT_EQ(virtual_hosted.target, "/probe/a%20b%2Bc%25d/./%C3%A9~");
}

// What a store does with the request: sigv4/'s verifier reads the claim
// from what is sent (Host added as the client adds it) and computes the
// signature it must carry; the canonical request is spelt out by hand.
TEST(S3RequestsTest, ASignedRequestIsWhatAStoreVerifies) {
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

TEST(S3RequestsTest, ASessionTokenIsSentAndSigned) {
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

// RGW 16.2's error document, as it answered a PUT whose If-Match failed.
constexpr std::string_view kRgwError =
    R"(<?xml version="1.0" encoding="UTF-8"?><Error><Code>PreconditionFailed</Code><Message></Message><BucketName>fencepost</BucketName><RequestId>tx000007309d81f4a7255d9-006b13c9ae-100e-default</RequestId><HostId>100e-default-default</HostId></Error>)";

TEST(S3RequestsTest, ErrorDocumentsGiveTheirCodeMessageAndRequestId) {
  const std::optional<sigv4::S3ErrorDocument> rgw =
      sigv4::ParseS3ErrorDocument(kRgwError);
  ASSERT_TRUE(rgw);
  EXPECT_EQ(rgw->code, "PreconditionFailed");
  EXPECT_EQ(rgw->message, "");
  EXPECT_EQ(rgw->request_id, "tx000007309d81f4a7255d9-006b13c9ae-100e-default");
  // AWS's, with a message, entities and fields RGW leaves out.
  const std::optional<sigv4::S3ErrorDocument> aws = sigv4::ParseS3ErrorDocument(
      "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<Error>\n  "
      "<Code>SignatureDoesNotMatch</Code>\n  <Message>The request signature "
      "we calculated does not match &amp; &lt;so&gt; &quot;on&apos;</Message>"
      "\n  <AWSAccessKeyId>AKIAIOSFODNN7EXAMPLE</AWSAccessKeyId>\n  "
      "<RequestId>4442587FB7D0A2F9</RequestId>\n</Error>");
  ASSERT_TRUE(aws);
  EXPECT_EQ(aws->code, "SignatureDoesNotMatch");
  EXPECT_EQ(aws->message,
            "The request signature we calculated does not match & <so> "
            "\"on'");
  EXPECT_EQ(aws->request_id, "4442587FB7D0A2F9");
  EXPECT_EQ(sigv4::ParseS3ErrorDocument(""), std::nullopt);
  EXPECT_EQ(sigv4::ParseS3ErrorDocument("<html>502 Bad Gateway</html>"),
            std::nullopt);
  const std::optional<sigv4::S3ErrorDocument> partial =
      sigv4::ParseS3ErrorDocument("<Error><Code>X</Code>");
  ASSERT_TRUE(partial);
  EXPECT_EQ(partial->code, "X");
  EXPECT_EQ(partial->request_id, "");
}

TEST(S3RequestsTest, AnswersAreDescribedWithTheirCodeAndRequestId) {
  EXPECT_EQ(DescribeAnswer(200, "", "tx1"), "HTTP 200");
  EXPECT_EQ(DescribeAnswer(412, kRgwError, "tx-header"),
            "HTTP 412 PreconditionFailed, request id "
            "tx000007309d81f4a7255d9-006b13c9ae-100e-default");
  // A HEAD's error has no body: the request id of the field.
  EXPECT_EQ(DescribeAnswer(404, "", "tx-header"),
            "HTTP 404, request id tx-header");
  EXPECT_EQ(DescribeAnswer(403,
                           "<Error><Code>AccessDenied</Code><Message>no\n"
                           "way</Message></Error>",
                           ""),
            "HTTP 403 AccessDenied: no way");
  // Not S3's XML: nothing of the body (a proxy's page could be anything).
  EXPECT_EQ(DescribeAnswer(502, "<html>secret page</html>", ""), "HTTP 502");
}

}  // namespace
}  // namespace fencepost::cli::s3
