// AWS's Signature Version 4 test suite (tests/fixtures/sigv4/aws4_testsuite):
// for each request, the canonical request, string to sign and Authorization
// header must match AWS's byte for byte. The suite signs for a generic
// service, so paths are normalised (PathStyle::kNormalized).
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "sigv4/canonical.h"
#include "sigv4/crypto.h"
#include "sigv4/signer.h"

namespace fencepost::sigv4 {
namespace {

const std::string kSuite =
    std::string(FENCEPOST_SIGV4_FIXTURES) + "/aws4_testsuite/";
constexpr std::string_view kAmzDate = "20150830T123600Z";
const Scope kScope{"20150830", "us-east-1", "service"};
const Secret kSecret("wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY");
// The token get-vanilla-with-session-token signs (its .creq shows it).
constexpr std::string_view kSessionToken =
    "6e86291e8372ff2a2260956d9b8aae1d763fbf315fa00fa31553b73ebf194267";

std::string ReadFixture(const std::string& name, const std::string& ext) {
  std::ifstream in(kSuite + name + "/" + name + "." + ext, std::ios::binary);
  EXPECT_TRUE(in) << name << "." << ext;
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// A .req file: "METHOD TARGET HTTP/1.1", header lines (a line that starts
// with whitespace continues the one before), a blank line, the body.
Request ParseReq(const std::string& text) {
  Request request;
  request.path_style = PathStyle::kNormalized;
  std::istringstream in(text);
  std::string line;
  std::getline(in, line);
  size_t space = line.find(' ');
  request.method = line.substr(0, space);
  std::string target =
      line.substr(space + 1, line.rfind(" HTTP/1.1") - space - 1);
  size_t q = target.find('?');
  request.path = target.substr(0, q);
  if (q != std::string::npos) {
    request.query = ParseQuery(target.substr(q + 1)).value();
  }
  while (std::getline(in, line) && !line.empty()) {
    if (line.front() == ' ' || line.front() == '\t') {
      request.headers.back().value.append("\n").append(line);
      continue;
    }
    size_t colon = line.find(':');
    request.headers.push_back({line.substr(0, colon), line.substr(colon + 1)});
  }
  std::string body((std::istreambuf_iterator<char>(in)), {});
  request.payload_hash = HexSha256(body);
  return request;
}

class TestSuiteTest : public testing::TestWithParam<std::string> {};

TEST_P(TestSuiteTest, CanonicalRequestStringToSignAndSignatureMatchAws) {
  const std::string& name = GetParam();
  Request request = ParseReq(ReadFixture(name, "req"));
  if (name == "get-vanilla-with-session-token") {
    request.headers.push_back(
        {"X-Amz-Security-Token", std::string(kSessionToken)});
  }
  Signed s = SignCanonical(request, kAmzDate, kScope, kSecret);
  EXPECT_EQ(s.canonical_request, ReadFixture(name, "creq"));
  EXPECT_EQ(s.string_to_sign, ReadFixture(name, "sts"));
  EXPECT_EQ(
      AuthorizationValue("AKIDEXAMPLE", kScope, s.signed_headers, s.signature),
      ReadFixture(name, "authz"));
}

const std::vector<std::string> kCases = {
    "get-header-key-duplicate",
    "get-header-value-multiline",
    "get-header-value-order",
    "get-header-value-trim",
    "get-relative",
    "get-relative-relative",
    "get-slash",
    "get-slash-dot-slash",
    "get-slash-pointless-dot",
    "get-slashes",
    "get-space",
    "get-special-character",
    "get-unreserved",
    "get-utf8",
    "get-vanilla",
    "get-vanilla-empty-query-key",
    "get-vanilla-query",
    "get-vanilla-query-order-encoded",
    "get-vanilla-query-order-key",
    "get-vanilla-query-order-key-case",
    "get-vanilla-query-order-value",
    "get-vanilla-query-unreserved",
    "get-vanilla-utf8-query",
    "get-vanilla-with-session-token",
    "post-header-key-case",
    "post-header-key-sort",
    "post-header-value-case",
    "post-sts-header-after",
    "post-sts-header-before",
    "post-vanilla",
    "post-vanilla-empty-query-value",
    "post-vanilla-query",
    "post-x-www-form-urlencoded",
    "post-x-www-form-urlencoded-parameters",
};

INSTANTIATE_TEST_SUITE_P(Aws, TestSuiteTest, testing::ValuesIn(kCases),
                         [](const testing::TestParamInfo<std::string>& info) {
                           std::string name = info.param;
                           for (char& c : name) {
                             if (c == '-') c = '_';
                           }
                           return name;
                         });

// post-sts-header-after: the token is sent but not signed; the signature is
// post-vanilla's. SignRequest adds it after signing when asked to.
TEST(TestSuiteTest, SessionTokenAddedAfterSigningIsNotSigned) {
  Request request{"POST",
                  "/",
                  PathStyle::kNormalized,
                  {},
                  {{"Host", "example.amazonaws.com"}},
                  std::string(kEmptyPayloadHash)};
  Credentials credentials{"AKIDEXAMPLE", kSecret, Secret("AQoDYXdz")};
  SigningParams params{"us-east-1", "service", ParseAmzDate(kAmzDate).value(),
                       /*content_sha256_header=*/false,
                       /*sign_session_token=*/false};
  Signed s = SignRequest(request, credentials, params);
  EXPECT_EQ(s.canonical_request, ReadFixture("post-sts-header-after", "creq"));
  EXPECT_EQ(request.headers.back().value,
            ReadFixture("post-sts-header-after", "authz"));
  EXPECT_EQ(request.headers[request.headers.size() - 2].name,
            "x-amz-security-token");
}

}  // namespace
}  // namespace fencepost::sigv4
