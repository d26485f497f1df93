// The worked examples of S3's API reference, signed with AWS's example key
// (AKIAIOSFODNN7EXAMPLE) at 20130524T000000Z in us-east-1: "Signature
// Calculations for the Authorization Header: Transferring Payload in a
// Single Chunk" (GET Object with Range, PUT Object, GET Bucket Lifecycle,
// GET Bucket), "Authenticating Requests: Using Query Parameters" (a
// presigned GET) and "... Transferring Payload in Multiple Chunks" (the seed
// and three chunk signatures). The expected values are AWS's published ones.
#include <gtest/gtest.h>

#include <string>

#include "sigv4/canonical.h"
#include "sigv4/crypto.h"
#include "sigv4/signer.h"

namespace fencepost::sigv4 {
namespace {

constexpr char kHost[] = "examplebucket.s3.amazonaws.com";

Credentials Example() {
  return {"AKIAIOSFODNN7EXAMPLE",
          Secret("wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"), Secret()};
}

SigningParams At20130524() {
  return {"us-east-1", "s3", ParseAmzDate("20130524T000000Z").value()};
}

// The last line of a string to sign: the canonical request's hash.
std::string CanonicalHash(const std::string& string_to_sign) {
  return string_to_sign.substr(string_to_sign.rfind('\n') + 1);
}

TEST(S3ExamplesTest, GetObjectWithRange) {
  Request request{"GET",
                  "/test.txt",
                  PathStyle::kS3,
                  {},
                  {{"Host", kHost}, {"Range", "bytes=0-9"}},
                  std::string(kEmptyPayloadHash)};
  Signed s = SignRequest(request, Example(), At20130524());
  EXPECT_EQ(s.canonical_request,
            "GET\n"
            "/test.txt\n"
            "\n"
            "host:examplebucket.s3.amazonaws.com\n"
            "range:bytes=0-9\n"
            "x-amz-content-sha256:"
            "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855\n"
            "x-amz-date:20130524T000000Z\n"
            "\n"
            "host;range;x-amz-content-sha256;x-amz-date\n"
            "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(s.string_to_sign,
            "AWS4-HMAC-SHA256\n"
            "20130524T000000Z\n"
            "20130524/us-east-1/s3/aws4_request\n"
            "7344ae5b7ee6c3e7e6b0fe0640412a37625d1fbfff95c48bbb2dc43964946972");
  EXPECT_EQ(s.signature,
            "f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41");
  ASSERT_EQ(request.headers.size(), 5u);
  EXPECT_EQ(request.headers[2].name, "x-amz-date");
  EXPECT_EQ(request.headers[2].value, "20130524T000000Z");
  EXPECT_EQ(request.headers[3].name, "x-amz-content-sha256");
  EXPECT_EQ(request.headers[4].name, "Authorization");
  EXPECT_EQ(request.headers[4].value,
            "AWS4-HMAC-SHA256 "
            "Credential=AKIAIOSFODNN7EXAMPLE/20130524/us-east-1/s3/"
            "aws4_request, "
            "SignedHeaders=host;range;x-amz-content-sha256;x-amz-date, "
            "Signature="
            "f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41");
}

TEST(S3ExamplesTest, PutObjectWithAKeyThatNeedsEncoding) {
  std::string body = "Welcome to Amazon S3.";
  Request request{"PUT",
                  "/test$file.text",
                  PathStyle::kS3,
                  {},
                  {{"Host", kHost},
                   {"Date", "Fri, 24 May 2013 00:00:00 GMT"},
                   {"x-amz-storage-class", "REDUCED_REDUNDANCY"}},
                  HexSha256(body)};
  EXPECT_EQ(request.payload_hash,
            "44ce7dd67c959e0d3524ffac1771dfbba87d2b6b4b4e99e42034a8b803f8b072");
  Signed s = SignRequest(request, Example(), At20130524());
  EXPECT_EQ(s.canonical_request.substr(0, s.canonical_request.find('\n', 4)),
            "PUT\n/test%24file.text");
  EXPECT_EQ(s.signed_headers,
            "date;host;x-amz-content-sha256;x-amz-date;x-amz-storage-class");
  EXPECT_EQ(CanonicalHash(s.string_to_sign),
            "9e0e90d9c76de8fa5b200d8c849cd5b8dc7a3be3951ddb7f6a76b4158342019d");
  EXPECT_EQ(s.signature,
            "98ad721746da40c64f1a55b78f14c238d841ea1380cd77a1b5971af0ece108bd");
}

TEST(S3ExamplesTest, GetBucketLifecycleSignsAParameterWithoutValue) {
  Request request{"GET",
                  "/",
                  PathStyle::kS3,
                  *ParseQuery("lifecycle"),
                  {{"Host", kHost}},
                  std::string(kEmptyPayloadHash)};
  Signed s = SignRequest(request, Example(), At20130524());
  EXPECT_NE(s.canonical_request.find("\n/\nlifecycle=\nhost:"),
            std::string::npos);
  EXPECT_EQ(CanonicalHash(s.string_to_sign),
            "9766c798316ff2757b517bc739a67f6213b4ab36dd5da2f94eaebf79c77395ca");
  EXPECT_EQ(s.signature,
            "fea454ca298b7da1c68078a5d1bdbfbbe0d65c699e0f91ac7a200a0136783543");
}

TEST(S3ExamplesTest, GetBucketSortsItsQuery) {
  Request request{"GET",
                  "/",
                  PathStyle::kS3,
                  *ParseQuery("prefix=J&max-keys=2"),
                  {{"Host", kHost}},
                  std::string(kEmptyPayloadHash)};
  Signed s = SignRequest(request, Example(), At20130524());
  EXPECT_NE(s.canonical_request.find("\n/\nmax-keys=2&prefix=J\nhost:"),
            std::string::npos);
  EXPECT_EQ(CanonicalHash(s.string_to_sign),
            "df57d21db20da04d7fa30298dd4488ba3a2b47ca3a489c74750e0f1e7df1b9b7");
  EXPECT_EQ(s.signature,
            "34b48302e7b5fa45bde8084f4b7868a86f0a534bc59db6670ed5711ef69dc6f7");
}

TEST(S3ExamplesTest, PresignedGetObject) {
  Request request{"GET", "/test.txt",       PathStyle::kS3,
                  {},    {{"Host", kHost}}, ""};
  Presigned p =
      Presign(request, Example(), At20130524(), std::chrono::seconds(86400));
  EXPECT_EQ(p.steps.canonical_request,
            "GET\n"
            "/test.txt\n"
            "X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential="
            "AKIAIOSFODNN7EXAMPLE%2F20130524%2Fus-east-1%2Fs3%2Faws4_request&"
            "X-Amz-Date=20130524T000000Z&X-Amz-Expires=86400&"
            "X-Amz-SignedHeaders=host\n"
            "host:examplebucket.s3.amazonaws.com\n"
            "\n"
            "host\n"
            "UNSIGNED-PAYLOAD");
  EXPECT_EQ(p.steps.signature,
            "aeeed9bbccd4d02ee5c0109b86d86835f995330da4c265957d157751f604d404");
  EXPECT_EQ(p.query,
            "X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential="
            "AKIAIOSFODNN7EXAMPLE%2F20130524%2Fus-east-1%2Fs3%2Faws4_request&"
            "X-Amz-Date=20130524T000000Z&X-Amz-Expires=86400&"
            "X-Amz-SignedHeaders=host&X-Amz-Signature="
            "aeeed9bbccd4d02ee5c0109b86d86835f995330da4c265957d157751f604d404");
}

TEST(S3ExamplesTest, PresignedWithSessionTokenSignsTheToken) {
  Credentials credentials = Example();
  credentials.session_token = Secret("token/with+chars=");
  Request request{"GET", "/test.txt",       PathStyle::kS3,
                  {},    {{"Host", kHost}}, ""};
  Presigned p =
      Presign(request, credentials, At20130524(), std::chrono::seconds(60));
  // Sorted among the other X-Amz-* parameters, and signed.
  EXPECT_NE(p.steps.canonical_request.find(
                "&X-Amz-Security-Token=token%2Fwith%2Bchars%3D&"
                "X-Amz-SignedHeaders=host\n"),
            std::string::npos);
  EXPECT_NE(p.query.find("&X-Amz-Security-Token=token%2Fwith%2Bchars%3D&"),
            std::string::npos);
}

Request ChunkedPut() {
  return {"PUT",
          "/examplebucket/chunkObject.txt",
          PathStyle::kS3,
          {},
          {{"Host", "s3.amazonaws.com"},
           {"x-amz-storage-class", "REDUCED_REDUNDANCY"},
           {"Content-Encoding", "aws-chunked"},
           {"x-amz-decoded-content-length", "66560"},
           {"Content-Length", "66824"}},
          std::string(kStreamingPayload)};
}

TEST(S3ExamplesTest, ChunkedUploadSeedAndChunkSignatures) {
  EXPECT_EQ(ChunkedContentLength(66560, 65536), 66824u);
  Request request = ChunkedPut();
  Signed seed = SignRequest(request, Example(), At20130524());
  EXPECT_EQ(seed.canonical_request,
            "PUT\n"
            "/examplebucket/chunkObject.txt\n"
            "\n"
            "content-encoding:aws-chunked\n"
            "content-length:66824\n"
            "host:s3.amazonaws.com\n"
            "x-amz-content-sha256:STREAMING-AWS4-HMAC-SHA256-PAYLOAD\n"
            "x-amz-date:20130524T000000Z\n"
            "x-amz-decoded-content-length:66560\n"
            "x-amz-storage-class:REDUCED_REDUNDANCY\n"
            "\n"
            "content-encoding;content-length;host;x-amz-content-sha256;"
            "x-amz-date;x-amz-decoded-content-length;x-amz-storage-class\n"
            "STREAMING-AWS4-HMAC-SHA256-PAYLOAD");
  EXPECT_EQ(seed.signature,
            "4f232c4386841ef735655705268965c44a0e4690baa4adea153f7db9fa80a0a9");

  Scope scope{"20130524", "us-east-1", "s3"};
  std::string first(65536, 'a');
  EXPECT_EQ(ChunkStringToSign("20130524T000000Z", scope, seed.signature,
                              HexSha256(first)),
            "AWS4-HMAC-SHA256-PAYLOAD\n"
            "20130524T000000Z\n"
            "20130524/us-east-1/s3/aws4_request\n"
            "4f232c4386841ef735655705268965c44a0e4690baa4adea153f7db9fa80a0a9\n"
            "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855\n"
            "bf718b6f653bebc184e1479f1935b8da974d701b893afcf49e701f3e2f9f9c5a");
  ChunkSigner chunks(SigningKey(Example().secret_access_key, scope),
                     "20130524T000000Z", scope, seed.signature);
  std::string signature = chunks.Next(first);
  EXPECT_EQ(signature,
            "ad80c730a21e5b8d04586a2213dd63b9a0e99e0e2307b0ade35a65485a288648");
  EXPECT_EQ(ChunkHeader(first.size(), signature),
            "10000;chunk-signature=" + signature + "\r\n");
  EXPECT_EQ(chunks.Next(std::string(1024, 'a')),
            "0055627c9e194cb4542bae2aa5492e3c1575bbb81b612b7d234b86a503ef5497");
  EXPECT_EQ(chunks.Next(""),
            "b6c6ea8a5354eaf15b3cb7646744f4275b71ea724fed81ceb9323e279d449df9");
}

TEST(S3ExamplesTest, ChunkedContentLengthCountsEveryFrame) {
  // One empty final chunk: "0;chunk-signature=<64>\r\n\r\n".
  EXPECT_EQ(ChunkedContentLength(0, 65536), 86u);
  // "1;chunk-signature=<64>\r\nX\r\n" then the final chunk.
  EXPECT_EQ(ChunkedContentLength(1, 65536), 87u + 86u);
  // "10000;chunk-signature=<64>\r\n<65536 bytes>\r\n" then the final one.
  EXPECT_EQ(ChunkedContentLength(65536, 65536), 90u + 65536u + 86u);
  EXPECT_EQ(ChunkedContentLength(65537, 65536), 90u + 65536u + 87u + 86u);
}

}  // namespace
}  // namespace fencepost::sigv4
