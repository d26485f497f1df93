// s3/object_fields.h and s3/xml.h's escaping: what S3 keeps with an object,
// and text written into the XML fencepost answers.

#include "s3/object_fields.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "s3/xml.h"

namespace fencepost::s3 {
namespace {

TEST(S3ObjectFieldsTest, TheFieldsS3KeepsWithAnObject) {
  for (const char* kept :
       {"Content-Encoding", "cache-control", "Content-Disposition",
        "content-language", "Expires", "x-amz-meta-owner", "X-Amz-Meta-A"}) {
    EXPECT_TRUE(KeptWithObject(kept)) << kept;
  }
  for (const char* other :
       {"Content-Type", "x-amz-meta-", "x-amz-meta-fencing-token",
        "X-Amz-Meta-Fencing_Token", "x-amz-acl", "Fencing-Token"}) {
    EXPECT_FALSE(KeptWithObject(other)) << other;
  }
  EXPECT_TRUE(NamesFencingToken("x-amz-meta-fencing_token"));
  EXPECT_FALSE(NamesFencingToken("x-amz-meta-fencing-tokens"));
}

// What the backend writes and reads back: aws-chunked never stored, an ETag
// without its quotes.
TEST(S3ObjectFieldsTest, AwsChunkedIsNeverStoredAndEtagsLoseTheirQuotes) {
  struct Case {
    std::string given;
    std::string stored;
  };
  for (const Case& c :
       std::vector<Case>{{"aws-chunked", ""},
                         {"AWS-Chunked, gzip", "gzip"},
                         {"gzip ,\taws-chunked, br", "gzip,br"}}) {
    EXPECT_EQ(StoredContentEncoding(c.given), c.stored) << c.given;
  }
  for (const Case& c : std::vector<Case>{
           {"\"9b2c-2\"", "9b2c-2"}, {"W/\"x\"", "W/x"}, {"", ""}}) {
    EXPECT_EQ(UnquoteEtag(c.given), c.stored) << c.given;
  }
}

TEST(S3ObjectFieldsTest, XmlTextIsEscapedAndKeepsItsCarriageReturns) {
  EXPECT_EQ(EscapeXml("a&b<c>\"d'"), "a&amp;b&lt;c&gt;&quot;d'");
  EXPECT_EQ(EscapeXml("x\r\n\ty\x01z"), "x&#13;\n\tyz");
}

}  // namespace
}  // namespace fencepost::s3
