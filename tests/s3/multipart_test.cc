// S3's multipart uploads as strings (s3/multipart.h): the door's upload
// ids and the result documents it reads and relays.

#include "s3/multipart.h"

#include <gtest/gtest.h>

namespace fencepost::s3 {
namespace {

TEST(S3MultipartTest, AnUploadIdCarriesItsTokenUnderAMac) {
  const std::string id = MakeUploadId("key", "p/k", 7, "2~abc.def");
  ASSERT_EQ(id.rfind("fp1.7.", 0), 0u) << id;
  const std::optional<UploadId> read = ReadUploadId("key", "p/k", id);
  ASSERT_TRUE(read);
  EXPECT_EQ(read->store_id, "2~abc.def");
  EXPECT_EQ(read->token, 7u);
  // Another token, key or MAC key: not the door's id.
  std::string raised = id;
  raised.replace(0, 6, "fp1.8.");
  EXPECT_FALSE(ReadUploadId("key", "p/k", raised));
  EXPECT_FALSE(ReadUploadId("key", "p/other", id));
  EXPECT_FALSE(ReadUploadId("other key", "p/k", id));
  EXPECT_FALSE(ReadUploadId("key", "p/k", "fp1.07.x.y"));
  // A store's own id has no token.
  const std::optional<UploadId> store = ReadUploadId("key", "p/k", "2~abc");
  ASSERT_TRUE(store);
  EXPECT_EQ(store->store_id, "2~abc");
  EXPECT_FALSE(store->token);
}

TEST(S3MultipartTest, ResultDocumentsAreRead) {
  const std::string initiated =
      "<?xml version=\"1.0\"?><InitiateMultipartUploadResult xmlns=\"x\">"
      "<Bucket>b</Bucket><Key>k</Key><UploadId>2~a&amp;b</UploadId>"
      "</InitiateMultipartUploadResult>";
  EXPECT_EQ(ResultField(initiated, "UploadId"), "2~a&b");
  EXPECT_FALSE(IsErrorDocument(initiated));
  EXPECT_TRUE(IsErrorDocument(
      "<?xml version=\"1.0\"?>\n<Error><Code>InternalError</Code></Error>"));
  EXPECT_EQ(EtagInResult("<CopyObjectResult><ETag>&quot;abc&quot;</ETag>"
                         "</CopyObjectResult>"),
            "abc");
  EXPECT_EQ(EtagInResult("<CompleteMultipartUploadResult><ETag></ETag>"
                         "</CompleteMultipartUploadResult>"),
            "");
}

TEST(S3MultipartTest, ListingsAreRewrittenWithoutTheStoresAccount) {
  const std::string listing =
      "<ListPartsResult><Key>p/k</Key><UploadId>2~a</UploadId>"
      "<Initiator><ID>store-user</ID></Initiator>"
      "<Owner><ID>store-user</ID><DisplayName>S</DisplayName></Owner>"
      "<Part><PartNumber>1</PartNumber></Part></ListPartsResult>";
  const std::optional<std::string> keys = RewriteElements(
      listing, "Key", [](std::string_view key) -> std::optional<std::string> {
        return std::string(key.substr(2));
      });
  ASSERT_TRUE(keys);
  const std::string relayed =
      RemoveElements(RemoveElements(*keys, "Owner"), "Initiator");
  EXPECT_EQ(relayed,
            "<ListPartsResult><Key>k</Key><UploadId>2~a</UploadId>"
            "<Part><PartNumber>1</PartNumber></Part></ListPartsResult>");
  EXPECT_FALSE(RewriteElements(
      listing, "Key",
      [](std::string_view) -> std::optional<std::string> { return {}; }));
}

}  // namespace
}  // namespace fencepost::s3
