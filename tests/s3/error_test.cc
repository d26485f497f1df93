// s3/error.h: what an S3 error answer says, read once for the backend and
// the probe.

#include "s3/error.h"

#include <gtest/gtest.h>

#include <string>

namespace fencepost::s3 {
namespace {

// RGW 16.2's error document, as it answered a PUT whose If-Match failed.
constexpr std::string_view kRgwError =
    R"(<?xml version="1.0" encoding="UTF-8"?><Error><Code>PreconditionFailed</Code><Message></Message><BucketName>fencepost</BucketName><RequestId>tx000007309d81f4a7255d9-006b13c9ae-100e-default</RequestId><HostId>100e-default-default</HostId></Error>)";

TEST(S3ErrorTest, ErrorDocumentsGiveTheirCodeMessageAndRequestId) {
  const std::optional<ErrorDocument> rgw = ParseErrorDocument(kRgwError);
  ASSERT_TRUE(rgw);
  EXPECT_EQ(rgw->code, "PreconditionFailed");
  EXPECT_EQ(rgw->message, "");
  EXPECT_EQ(rgw->request_id, "tx000007309d81f4a7255d9-006b13c9ae-100e-default");
  // AWS's, with a message, entities and fields RGW leaves out.
  const std::optional<ErrorDocument> aws = ParseErrorDocument(
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
  EXPECT_EQ(ParseErrorDocument(""), std::nullopt);
  EXPECT_EQ(ParseErrorDocument("<html>502 Bad Gateway</html>"), std::nullopt);
  const std::optional<ErrorDocument> partial =
      ParseErrorDocument("<Error><Code>X</Code>");
  ASSERT_TRUE(partial);
  EXPECT_EQ(partial->code, "X");
  EXPECT_EQ(partial->request_id, "");
}

TEST(S3ErrorTest, AnswersAreDescribedWithTheirCodeAndRequestId) {
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

// The fields a log line and a problem document take: bounded, without
// control characters; the request id from the field only without one in
// the body.
TEST(S3ErrorTest, ErrorAnswersAreBoundedAndTakeTheFieldsRequestIdLast) {
  const ErrorAnswer rgw = ReadErrorAnswer(412, kRgwError, "tx-header");
  EXPECT_EQ(rgw.status, 412u);
  EXPECT_EQ(rgw.code, "PreconditionFailed");
  EXPECT_EQ(rgw.request_id, "tx000007309d81f4a7255d9-006b13c9ae-100e-default");
  const ErrorAnswer head = ReadErrorAnswer(403, "", "tx0002\x01\x7f");
  EXPECT_EQ(head.code, "");
  EXPECT_EQ(head.request_id, "tx0002");
  EXPECT_EQ(Bounded(std::string(1000, 'a')).size(), kMaxErrorField);
}

}  // namespace
}  // namespace fencepost::s3
