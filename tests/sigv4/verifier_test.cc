#include "sigv4/verifier.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "sigv4/crypto.h"
#include "sigv4/errc.h"

namespace fencepost::sigv4 {
namespace {

using std::chrono::minutes;
using std::chrono::seconds;

const Secret kSecret("wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY");
const auto kSignedAt = *ParseAmzDate("20130524T000000Z");

Credentials Example() { return {"AKIAIOSFODNN7EXAMPLE", kSecret, Secret()}; }

// AWS's GET Object example, as the signer sends it.
std::vector<Header> SignedGet() {
  Request request{
      "GET",
      "/test.txt",
      PathStyle::kS3,
      {},
      {{"Host", "examplebucket.s3.amazonaws.com"}, {"Range", "bytes=0-9"}},
      std::string(kEmptyPayloadHash)};
  SignRequest(request, Example(), {"us-east-1", "s3", kSignedAt});
  return request.headers;
}

// The expected signature of `received`, or the error on the way.
std::error_code Verify(const Received& received, std::string* signature,
                       const Secret& secret = kSecret) {
  Claim claim;
  if (auto ec = ParseClaim(received, &claim)) return ec;
  Signed expected;
  if (auto ec = ExpectedSignature(received, claim, secret, &expected)) {
    return ec;
  }
  *signature = expected.signature;
  return ConstantTimeEqual(expected.signature, claim.signature)
             ? std::error_code()
             : std::make_error_code(std::errc::permission_denied);
}

TEST(VerifierTest, AcceptsWhatTheSignerSigned) {
  std::vector<Header> headers = SignedGet();
  Received received{"GET", "/test.txt", headers};
  Claim claim;
  ASSERT_FALSE(ParseClaim(received, &claim));
  EXPECT_EQ(claim.access_key_id, "AKIAIOSFODNN7EXAMPLE");
  EXPECT_EQ(ScopeString(claim.scope), "20130524/us-east-1/s3/aws4_request");
  EXPECT_EQ(claim.amz_date, "20130524T000000Z");
  EXPECT_FALSE(claim.presigned);
  std::string signature;
  EXPECT_FALSE(Verify(received, &signature));
  EXPECT_EQ(signature,
            "f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41");
}

TEST(VerifierTest, RefusesATamperedHeaderPathOrSecret) {
  std::string signature;
  std::vector<Header> headers = SignedGet();
  EXPECT_TRUE(Verify({"GET", "/test.txt", headers}, &signature,
                     Secret("another secret")));
  EXPECT_TRUE(Verify({"GET", "/test.txd", headers}, &signature));
  EXPECT_TRUE(Verify({"HEAD", "/test.txt", headers}, &signature));
  EXPECT_TRUE(Verify({"GET", "/test.txt?x=1", headers}, &signature));
  headers[1].value = "bytes=0-99";
  EXPECT_TRUE(Verify({"GET", "/test.txt", headers}, &signature));
}

TEST(VerifierTest, DecodesThePathBeforeEncodingItAsS3Does) {
  Request request{"PUT",
                  "/test$file.text",
                  PathStyle::kS3,
                  {},
                  {{"Host", "examplebucket.s3.amazonaws.com"},
                   {"Date", "Fri, 24 May 2013 00:00:00 GMT"},
                   {"x-amz-storage-class", "REDUCED_REDUNDANCY"}},
                  HexSha256("Welcome to Amazon S3.")};
  SignRequest(request, Example(), {"us-east-1", "s3", kSignedAt});
  std::string signature;
  EXPECT_FALSE(
      Verify({"PUT", "/test%24file.text", request.headers}, &signature));
  EXPECT_FALSE(Verify({"PUT", "/test$file.text", request.headers}, &signature));
  EXPECT_EQ(signature,
            "98ad721746da40c64f1a55b78f14c238d841ea1380cd77a1b5971af0ece108bd");
  EXPECT_EQ(Verify({"PUT", "/test%2", request.headers}, &signature),
            Errc::kBadEncoding);
}

TEST(VerifierTest, AcceptsAPresignedUrlAndChecksItsExpiry) {
  Request request{"GET",
                  "/test.txt",
                  PathStyle::kS3,
                  {},
                  {{"Host", "examplebucket.s3.amazonaws.com"}},
                  ""};
  Presigned p = Presign(request, Example(), {"us-east-1", "s3", kSignedAt},
                        seconds(86400));
  std::string target = "/test.txt?" + p.query;
  Received received{"GET", target, request.headers};
  std::string signature;
  EXPECT_FALSE(Verify(received, &signature));
  EXPECT_EQ(signature,
            "aeeed9bbccd4d02ee5c0109b86d86835f995330da4c265957d157751f604d404");
  Claim claim;
  ASSERT_FALSE(ParseClaim(received, &claim));
  EXPECT_TRUE(claim.presigned);
  EXPECT_EQ(claim.expires, seconds(86400));
  EXPECT_FALSE(CheckTime(claim, kSignedAt + seconds(86400), minutes(15)));
  EXPECT_EQ(CheckTime(claim, kSignedAt + seconds(86401), minutes(15)),
            Errc::kExpired);
  EXPECT_EQ(CheckTime(claim, kSignedAt - minutes(16), minutes(15)),
            Errc::kTimeTooSkewed);
  std::string longer = target;
  longer.replace(longer.find("86400"), 5, "86401");
  EXPECT_TRUE(Verify({"GET", longer, request.headers}, &signature));
}

TEST(VerifierTest, RefusesAHeaderSignatureOutsideTheSkew) {
  std::vector<Header> headers = SignedGet();
  Claim claim;
  ASSERT_FALSE(ParseClaim({"GET", "/test.txt", headers}, &claim));
  EXPECT_FALSE(CheckTime(claim, kSignedAt + minutes(15), minutes(15)));
  EXPECT_FALSE(CheckTime(claim, kSignedAt - minutes(15), minutes(15)));
  EXPECT_EQ(CheckTime(claim, kSignedAt + minutes(16), minutes(15)),
            Errc::kTimeTooSkewed);
  EXPECT_EQ(CheckTime(claim, kSignedAt - minutes(16), minutes(15)),
            Errc::kTimeTooSkewed);
}

std::string Authorization(std::string_view signed_headers,
                          std::string_view algorithm = kAlgorithm,
                          std::string_view date = "20130524") {
  return std::string(algorithm) + " Credential=AKIAIOSFODNN7EXAMPLE/" +
         std::string(date) + "/us-east-1/s3/aws4_request,SignedHeaders=" +
         std::string(signed_headers) + ",Signature=" + std::string(64, 'a');
}

std::error_code Claimed(std::vector<Header> headers,
                        std::string_view target = "/k") {
  Claim claim;
  if (auto ec = ParseClaim({"GET", target, headers}, &claim)) return ec;
  Signed expected;
  return ExpectedSignature({"GET", target, headers}, claim, kSecret, &expected);
}

TEST(VerifierTest, NamesWhatIsWrongWithAClaim) {
  Header host{"Host", "h"};
  Header date{"X-Amz-Date", "20130524T000000Z"};
  Header sha{"x-amz-content-sha256", std::string(kEmptyPayloadHash)};
  EXPECT_FALSE(Claimed(
      {host, date, sha, {"Authorization", Authorization("host;x-amz-date")}}));
  EXPECT_EQ(Claimed({host, date, sha}), Errc::kNotSigned);
  EXPECT_EQ(Claimed({host, date, sha, {"Authorization", "AWS4-HMAC-SHA256"}}),
            Errc::kMalformed);
  EXPECT_EQ(
      Claimed(
          {host, date, sha, {"Authorization", "AWS AKIAIOSFODNN7EXAMPLE:abc"}}),
      Errc::kUnsupportedAlgorithm);
  EXPECT_EQ(
      Claimed(
          {host, date, sha, {"Authorization", Authorization("x-amz-date")}}),
      Errc::kHostNotSigned);
  EXPECT_EQ(
      Claimed({host, date, sha, {"Authorization", Authorization("host;host")}}),
      Errc::kMalformed);
  EXPECT_EQ(
      Claimed(
          {host, date, sha, {"Authorization", Authorization("host;range")}}),
      Errc::kMissingSignedHeader);
  EXPECT_EQ(Claimed({host, sha, {"Authorization", Authorization("host")}}),
            Errc::kBadDate);
  EXPECT_EQ(Claimed({host,
                     date,
                     sha,
                     {"Authorization",
                      Authorization("host", kAlgorithm, "20130525")}}),
            Errc::kBadDate);
  EXPECT_EQ(Claimed({host, date, {"Authorization", Authorization("host")}}),
            Errc::kMissingContentSha256);
  EXPECT_EQ(Claimed({host, date, sha, {"Authorization", Authorization("host")}},
                    "/k?X-Amz-Signature=" + std::string(64, 'a')),
            Errc::kMalformed);
  EXPECT_EQ(Claimed({host}, "/k?X-Amz-Algorithm=AWS4-HMAC-SHA256"),
            Errc::kMalformed);
}

TEST(VerifierTest, ChunkSignaturesChainFromTheVerifiedSeed) {
  Request request{"PUT",
                  "/examplebucket/chunkObject.txt",
                  PathStyle::kS3,
                  {},
                  {{"Host", "s3.amazonaws.com"},
                   {"x-amz-storage-class", "REDUCED_REDUNDANCY"},
                   {"Content-Encoding", "aws-chunked"},
                   {"x-amz-decoded-content-length", "66560"},
                   {"Content-Length", "66824"}},
                  std::string(kStreamingPayload)};
  SignRequest(request, Example(), {"us-east-1", "s3", kSignedAt});
  Received received{"PUT", "/examplebucket/chunkObject.txt", request.headers};
  Claim claim;
  ASSERT_FALSE(ParseClaim(received, &claim));
  Signed seed;
  ASSERT_FALSE(ExpectedSignature(received, claim, kSecret, &seed));
  EXPECT_EQ(seed.signature, claim.signature);
  ChunkSigner chunks(SigningKey(kSecret, claim.scope), claim.amz_date,
                     claim.scope, claim.signature);
  EXPECT_EQ(chunks.Next(std::string(65536, 'a')),
            "ad80c730a21e5b8d04586a2213dd63b9a0e99e0e2307b0ade35a65485a288648");
  std::string tampered(1024, 'a');
  tampered[10] = 'b';
  EXPECT_NE(chunks.Next(tampered),
            "0055627c9e194cb4542bae2aa5492e3c1575bbb81b612b7d234b86a503ef5497");
}

}  // namespace
}  // namespace fencepost::sigv4
