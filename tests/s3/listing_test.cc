// s3/listing.h: ListObjectsV2 within PREFIX without a store: the client's
// query made the store's, continuation tokens both ways, and the store's
// listing rewritten for the client. Against a real store: tests/s3/
// list_test.cc.

#include "s3/listing.h"

#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

namespace fencepost::s3 {
namespace {

TEST(S3ListingTest, AListingsQueryIsTheClientsUnderPrefix) {
  const ListQuery query = ParseListQuery(
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

TEST(S3ListingTest, ContinuationTokensHidePrefixAndComeBackWhole) {
  const std::string mine = ClientContinuationToken("env/prod/k 1", "env/prod/");
  EXPECT_EQ(mine.find("env"), std::string::npos);
  std::string decoded;
  EXPECT_EQ(StoreContinuationToken(mine, "env/prod/"), "env/prod/k 1");
  // An opaque token (AWS's) goes back as it came.
  const std::string opaque = ClientContinuationToken("1ueGcxLPRx1T/r=", "p/");
  EXPECT_EQ(StoreContinuationToken(opaque, "p/"), "1ueGcxLPRx1T/r=");
  EXPECT_EQ(StoreContinuationToken(ClientContinuationToken("k", ""), ""), "k");

  const ListQuery query = ParseListQuery(
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

TEST(S3ListingTest, AListingLosesPrefixAndWhatIsNotUnderIt) {
  ListQuery query = ParseListQuery(
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
TEST(S3ListingTest, ANameXmlCannotCarryIsRefusedOrEncodedNeverChanged) {
  const ListQuery plain = ParseListQuery("list-type=2", "p/");
  const ListQuery url = ParseListQuery("list-type=2&encoding-type=url", "p/");
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

TEST(S3ListingTest, AnUnreadableListingIsRefusedNotGuessed) {
  const ListQuery query = ParseListQuery("list-type=2", "p/");
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
}  // namespace fencepost::s3
