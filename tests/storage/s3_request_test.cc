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
  return {"127.0.0.1", std::move(port), false,
          "state",     "us-east-1",     virtual_hosted};
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

TEST(S3RequestTest, AListingsQueryIsTheClientsUnderPrefix) {
  const S3ListQuery query = ParseListQuery(
      "list-type=2&prefix=a%20b&delimiter=%2F&max-keys=5000&start-after=a%26z"
      "&fetch-owner=true&encoding-type=url&X-Amz-Date=20150830T123600Z"
      "&x-id=ListObjectsV2",
      "env/prod/");
  ASSERT_EQ(query.error, "");
  EXPECT_TRUE(query.url_encoding);
  const std::vector<std::pair<std::string, std::string>> expected = {
      {"list-type", "2"},
      {"prefix", "env/prod/a b"},
      {"delimiter", "/"},
      {"max-keys", "1000"},
      {"start-after", "env/prod/a&z"},
      {"fetch-owner", "true"}};
  ASSERT_EQ(query.store.size(), expected.size());
  for (std::size_t i = 0; i < expected.size(); ++i) {
    EXPECT_EQ(query.store[i].name, expected[i].first);
    EXPECT_EQ(query.store[i].value, expected[i].second);
  }
  // No client prefix: still PREFIX/; no PREFIX: nothing added.
  EXPECT_EQ(ParseListQuery("list-type=2", "p/").store.at(1).value, "p/");
  EXPECT_EQ(ParseListQuery("list-type=2", "").store.size(), 1u);
  EXPECT_EQ(ParseListQuery("list-type=2&max-keys=0", "").store.at(1).value,
            "0");

  for (const std::string_view refused :
       {"", "list-type=1", "prefix=a", "list-type=2&marker=x",
        "list-type=2&prefix=a&prefix=b", "list-type=2&max-keys=-1",
        "list-type=2&max-keys=abc", "list-type=2&max-keys=2147483648",
        "list-type=2&encoding-type=xml", "list-type=2&fetch-owner=yes",
        "list-type=2&continuation-token=", "list-type=2&continuation-token=x",
        "list-type=2&continuation-token=ZW52L3g%3D",  // base64("env/x")
        "list-type=2&prefix=%zz", "list-type=2&x-id=GetObject"}) {
    EXPECT_NE(ParseListQuery(refused, "p/").error, "") << refused;
  }
}

TEST(S3RequestTest, ContinuationTokensHidePrefixAndComeBackWhole) {
  const std::string mine = ClientContinuationToken("env/prod/k 1", "env/prod/");
  EXPECT_EQ(mine.find("env"), std::string::npos);
  std::string decoded;
  EXPECT_EQ(StoreContinuationToken(mine, "env/prod/"), "env/prod/k 1");
  // An opaque token (AWS's) goes back as it came.
  const std::string opaque = ClientContinuationToken("1ueGcxLPRx1T/r=", "p/");
  EXPECT_EQ(StoreContinuationToken(opaque, "p/"), "1ueGcxLPRx1T/r=");
  EXPECT_EQ(StoreContinuationToken(ClientContinuationToken("k", ""), ""), "k");

  const S3ListQuery query = ParseListQuery(
      "list-type=2&continuation-token=" + sigv4::UriEncode(mine, false),
      "env/prod/");
  ASSERT_EQ(query.error, "");
  EXPECT_EQ(query.continuation_token, mine);
  EXPECT_EQ(query.store.back().name, "continuation-token");
  EXPECT_EQ(query.store.back().value, "env/prod/k 1");
}

constexpr std::string_view kStoreListing =
    "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
    "<ListBucketResult xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\">"
    "<Name>state</Name><Prefix>a&amp;b/</Prefix>"
    "<StartAfter>a&#38;b/0</StartAfter>"
    "<ContinuationToken>a&amp;b/0</ContinuationToken>"
    "<NextContinuationToken>a&amp;b/z&lt;1</NextContinuationToken>"
    "<KeyCount>7</KeyCount><MaxKeys>7</MaxKeys><Delimiter>/</Delimiter>"
    "<IsTruncated>true</IsTruncated><Marker>a&amp;b/secret</Marker>"
    "<Contents><Key>a&amp;b/x &amp; y</Key><LastModified>2024-01-01T00:00:00"
    ".000Z</LastModified><ETag>&quot;9b2c&quot;</ETag><Size>3</Size>"
    "<Owner><ID>o</ID><DisplayName>O</DisplayName></Owner>"
    "<StorageClass>STANDARD</StorageClass></Contents>\n"
    "<Contents><Key>a&#x26;b/&#x20AC;&#233;&lt;&gt;&#13;</Key><Size>0</Size>"
    "</Contents>"
    "<Contents><Key>a&amp;b/</Key><Size>0</Size></Contents>"
    "<Contents><Key>a&amp;bc/outside</Key><Size>0</Size></Contents>"
    "<Contents><Key>other/outside</Key><Size>0</Size></Contents>"
    "<CommonPrefixes><Prefix>a&amp;b/dir/</Prefix></CommonPrefixes>"
    "<CommonPrefixes><Prefix>elsewhere/</Prefix></CommonPrefixes>"
    "</ListBucketResult>";

TEST(S3RequestTest, AListingLosesPrefixAndWhatIsNotUnderIt) {
  S3ListQuery query = ParseListQuery(
      "list-type=2&continuation-token=" +
          sigv4::UriEncode(ClientContinuationToken("a&b/0", "a&b/"), false),
      "a&b/");
  ASSERT_EQ(query.error, "");
  std::string error;
  const std::optional<std::string> listing =
      RewriteListing(kStoreListing, "a&b/", query, "state", &error);
  ASSERT_TRUE(listing) << error;
  const std::string expected =
      "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
      "<ListBucketResult xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\">"
      "<Name>state</Name><Prefix></Prefix><Delimiter>/</Delimiter>"
      "<StartAfter>0</StartAfter><ContinuationToken>" +
      query.continuation_token +
      "</ContinuationToken><KeyCount>3</KeyCount><MaxKeys>7</MaxKeys>"
      "<IsTruncated>true</IsTruncated><NextContinuationToken>" +
      ClientContinuationToken("a&b/z<1", "a&b/") +
      "</NextContinuationToken>"
      "<Contents><Key>x &amp; y</Key><LastModified>2024-01-01T00:00:00"
      ".000Z</LastModified><ETag>&quot;9b2c&quot;</ETag><Size>3</Size>"
      "<Owner><ID>o</ID><DisplayName>O</DisplayName></Owner>"
      "<StorageClass>STANDARD</StorageClass></Contents>"
      "<Contents><Key>\xe2\x82\xac\xc3\xa9&lt;&gt;&#13;</Key><Size>0</Size>"
      "</Contents>"
      "<CommonPrefixes><Prefix>dir/</Prefix></CommonPrefixes>"
      "</ListBucketResult>";
  EXPECT_EQ(*listing, expected);
  EXPECT_EQ(listing->find("outside"), std::string::npos);
  EXPECT_EQ(listing->find("secret"), std::string::npos);
  EXPECT_EQ(listing->find("a&amp;b"), std::string::npos);

  // encoding-type=url: the client's values percent-encoded, then escaped.
  query = ParseListQuery("list-type=2&encoding-type=url", "a&b/");
  const std::optional<std::string> url =
      RewriteListing(kStoreListing, "a&b/", query, "state", &error);
  ASSERT_TRUE(url) << error;
  EXPECT_NE(url->find("<Key>x%20%26%20y</Key>"), std::string::npos) << *url;
  EXPECT_NE(url->find("<Key>%E2%82%AC%C3%A9%3C%3E%0D</Key>"),
            std::string::npos);
  EXPECT_NE(url->find("<Delimiter>/</Delimiter>"), std::string::npos);
  EXPECT_NE(url->find("<Prefix>dir/</Prefix>"), std::string::npos);
  EXPECT_NE(url->find("<EncodingType>url</EncodingType>"), std::string::npos);

  // Without PREFIX everything is the client's, as the store spelled it.
  query = ParseListQuery("list-type=2", "");
  const std::optional<std::string> whole =
      RewriteListing(kStoreListing, "", query, "state", &error);
  ASSERT_TRUE(whole) << error;
  EXPECT_NE(whole->find("<Key>other/outside</Key>"), std::string::npos);
  EXPECT_NE(whole->find("<KeyCount>7</KeyCount>"), std::string::npos);
}

// A name XML 1.0 cannot carry is never shown as another: without
// encoding-type=url the listing is refused (its error says to ask for it),
// with it the name is percent-encoded. Seen failing: n/ctl\x01x was listed
// as n/ctlx.
TEST(S3RequestTest, ANameXmlCannotCarryIsRefusedOrEncodedNeverChanged) {
  const S3ListQuery plain = ParseListQuery("list-type=2", "p/");
  const S3ListQuery url = ParseListQuery("list-type=2&encoding-type=url", "p/");
  struct Case {
    std::string store_key;  // as the store wrote it
    std::string encoded;    // the name, percent-encoded
  };
  for (const Case& c :
       std::vector<Case>{{"p/n/ctl\x01x", "n/ctl%01x"},
                         {"p/n/ctl&#1;x", "n/ctl%01x"},
                         {"p/n/ctl&#x1b;x", "n/ctl%1Bx"},
                         {"p/n/bad\xff", "n/bad%FF"},
                         {"p/n/nc\xef\xbf\xbf", "n/nc%EF%BF%BF"},
                         {"p/n/nc\xef\xbf\xbe", "n/nc%EF%BF%BE"}}) {
    const std::string store = "<ListBucketResult><Contents><Key>" +
                              c.store_key +
                              "</Key><Size>1</Size></Contents>"
                              "<Contents><Key>p/plain</Key><Size>1</Size>"
                              "</Contents></ListBucketResult>";
    std::string error;
    bool needs_url_encoding = false;
    EXPECT_FALSE(RewriteListing(store, "p/", plain, "state", &error,
                                &needs_url_encoding))
        << c.encoded;
    EXPECT_TRUE(needs_url_encoding) << c.encoded;
    EXPECT_NE(error.find(c.encoded), std::string::npos) << error;
    EXPECT_NE(error.find("encoding-type=url"), std::string::npos) << error;
    needs_url_encoding = false;
    const std::optional<std::string> listing =
        RewriteListing(store, "p/", url, "state", &error, &needs_url_encoding);
    ASSERT_TRUE(listing) << error;
    EXPECT_FALSE(needs_url_encoding);
    EXPECT_NE(listing->find("<Key>" + c.encoded + "</Key>"), std::string::npos)
        << *listing;
    EXPECT_NE(listing->find("<Key>plain</Key>"), std::string::npos);
  }
  // Tab, LF and CR are XML's: listed as they are.
  std::string error;
  const std::optional<std::string> listing = RewriteListing(
      "<ListBucketResult><Contents><Key>p/a\tb\nc&#13;</Key></Contents>"
      "</ListBucketResult>",
      "p/", plain, "state", &error);
  ASSERT_TRUE(listing) << error;
  EXPECT_NE(listing->find("<Key>a\tb\nc&#13;</Key>"), std::string::npos);
  // A name beside PREFIX is never shown, so it refuses nothing.
  EXPECT_TRUE(
      RewriteListing("<ListBucketResult><Contents><Key>q/\x01</Key></Contents>"
                     "</ListBucketResult>",
                     "p/", plain, "state", &error));
}

TEST(S3RequestTest, AnUnreadableListingIsRefusedNotGuessed) {
  const S3ListQuery query = ParseListQuery("list-type=2", "p/");
  std::string error;
  for (const std::string_view refused : {
           std::string_view(""),
           std::string_view("<Error><Code>x</Code></Error>"),
           std::string_view("<ListBucketResult><Contents><Key>p/a</Key>"),
           std::string_view("<ListBucketResult><Contents><Key>p/&bogus;"
                            "</Key></Contents></ListBucketResult>"),
           std::string_view("<ListBucketResult><Contents><Key>p/&#0;</Key>"
                            "</Contents></ListBucketResult>"),
           std::string_view("<ListBucketResult><Contents><Size>1</Size>"
                            "</Contents></ListBucketResult>"),
           std::string_view("<ListBucketResult><Contents><Key>p/a</Key>"
                            "<Key>p/b</Key></Contents></ListBucketResult>"),
           std::string_view("<ListBucketResult><EncodingType>url"
                            "</EncodingType></ListBucketResult>"),
           std::string_view("<ListBucketResult>text</ListBucketResult>"),
       }) {
    error.clear();
    EXPECT_FALSE(RewriteListing(refused, "p/", query, "state", &error))
        << refused;
    EXPECT_NE(error, "") << refused;
  }
  const std::string huge = "<ListBucketResult>" +
                           std::string(kMaxListingBytes, ' ') +
                           "</ListBucketResult>";
  EXPECT_FALSE(RewriteListing(huge, "p/", query, "state", &error));
  // Self-closing elements are empty ones.
  EXPECT_TRUE(RewriteListing("<ListBucketResult><Prefix/></ListBucketResult>",
                             "p/", query, "state", &error));
}

}  // namespace
}  // namespace fencepost::storage
