// DeleteObjects (POST /BUCKET?delete) through the S3 front door against a
// real Ceph RGW: each key a fenced delete with per-key errors in S3's
// DeleteResult, and a request the door cannot take refused whole. What is
// left at the store is read straight from RGW with the independent client.

#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <vector>

#include "s3/location.h"
#include "s3/request.h"
#include "sigv4/signer.h"
#include "storage/s3_request.h"
#include "tests/s3/door.h"
#include "tests/testing/http_client.h"
#include "tests/testing/rgw.h"

namespace fencepost::testing {
namespace {

namespace bhttp = boost::beast::http;
using Clock = std::chrono::system_clock;

// S3's <Delete> document naming `keys` (written as given: escape them
// first), with <Quiet>true</Quiet> when `quiet`.
std::string DeleteDocument(const std::vector<std::string>& keys,
                           bool quiet = false) {
  std::string out = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<Delete>";
  for (const std::string& key : keys) {
    out += "<Object><Key>" + key + "</Key></Object>";
  }
  if (quiet) out += "<Quiet>true</Quiet>";
  return out + "</Delete>";
}

// POST /BUCKET?delete with `document` and `fields`, every field signed
// with the door's key, the body's SHA-256 signed.
http::Request DeleteObjectsRequest(const Door& door,
                                   const std::string& document,
                                   const Headers& fields) {
  http::Request request =
      storage::S3Request(door.Bucket(), bhttp::verb::post, "", document);
  const std::vector<sigv4::QueryParam> query = {{"delete", ""}};
  request.target(s3::RequestTarget(s3::ObjectPath(door.Bucket(), ""), query));
  request.set(bhttp::field::content_type, "application/xml");
  for (const auto& [name, value] : fields) request.insert(name, value);
  storage::SignS3(request, door.Bucket(), DoorKey(), Clock::now());
  return request;
}

HttpResponse DeleteObjectsAt(const Door& door, const std::string& document,
                             const Headers& fields) {
  return SendRaw(door.port(), DeleteObjectsRequest(door, document, fields));
}

// A PUT of `key` through the door with `token`; its status.
int PutAt(const Door& door, const std::string& key, const std::string& body,
          const std::string& token) {
  return SendRaw(door.port(), SignedForDoor(door, bhttp::verb::put, key, body,
                                            {{"Fencing-Token", token}}))
      .status;
}

std::size_t Count(const std::string& text, const std::string& what) {
  std::size_t n = 0;
  for (std::size_t at = text.find(what); at != std::string::npos;
       at = text.find(what, at + what.size())) {
    ++n;
  }
  return n;
}

// A current token deletes every key, entities in a key decoded and the key
// escaped again in the answer; a key that was never there is deleted too,
// as S3 answers it. The fence is the key's: a lower token is refused after.
TEST(S3DoorDeleteTest, ACurrentTokenDeletesEveryKey) {
  Rgw& rgw = Rgw::Shared();
  const std::string prefix = rgw.UniquePrefix("delete");
  Door door(prefix);
  for (const std::string key : {"a", "b/c", "x&y", "A<"}) {
    ASSERT_EQ(PutAt(door, key, "v " + key, "5"), 200) << key;
  }
  const auto done = DeleteObjectsAt(
      door, DeleteDocument({"a", "b/c", "x&amp;y", "&#x41;&lt;", "never"}),
      {{"Fencing-Token", "5"}});
  ASSERT_EQ(done.status, 200) << done.body;
  EXPECT_FALSE(done.header("x-amz-request-id").empty());
  EXPECT_NE(
      done.body.find("<DeleteResult "
                     "xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\">"),
      std::string::npos)
      << done.body;
  for (const std::string shown : {"a", "b/c", "x&amp;y", "A&lt;", "never"}) {
    EXPECT_NE(done.body.find("<Deleted><Key>" + shown + "</Key></Deleted>"),
              std::string::npos)
        << shown << ": " << done.body;
  }
  EXPECT_EQ(done.body.find("<Error>"), std::string::npos) << done.body;
  for (const std::string key : {"a", "b/c", "x&y", "A<"}) {
    EXPECT_EQ(rgw.Get(prefix + key).status, 404) << key;
  }
  // The fences are the keys' own, as for DeleteObject and the data port.
  EXPECT_EQ(PutAt(door, "a", "late", "4"), 409);
  EXPECT_EQ(Fetch(door.server().data_port(), "PUT", "/b/c",
                  {{"Fencing-Token", "4"}}, "late")
                .status,
            409);
  EXPECT_EQ(rgw.Get(prefix + "a").status, 404);
}

// A stale token deletes nothing: every key is reported StaleFencingToken
// with the fence's token in its message, and every object is still there.
TEST(S3DoorDeleteTest, AStaleTokenDeletesNothing) {
  Rgw& rgw = Rgw::Shared();
  const std::string prefix = rgw.UniquePrefix("stale-delete");
  Door door(prefix);
  ASSERT_EQ(PutAt(door, "p", "kept p", "7"), 200);
  ASSERT_EQ(PutAt(door, "q", "kept q", "8"), 200);
  const auto done = DeleteObjectsAt(door, DeleteDocument({"p", "q"}),
                                    {{"Fencing-Token", "6"}});
  ASSERT_EQ(done.status, 200) << done.body;
  EXPECT_EQ(done.body.find("<Deleted>"), std::string::npos) << done.body;
  EXPECT_NE(done.body.find("<Error><Key>p</Key><Code>StaleFencingToken</Code>"
                           "<Message>token 6 is lower than the fence's "
                           "highest token 7</Message></Error>"),
            std::string::npos)
      << done.body;
  EXPECT_NE(done.body.find("<Error><Key>q</Key><Code>StaleFencingToken</Code>"
                           "<Message>token 6 is lower than the fence's "
                           "highest token 8</Message></Error>"),
            std::string::npos)
      << done.body;
  EXPECT_EQ(rgw.Get(prefix + "p").body, "kept p");
  EXPECT_EQ(rgw.Get(prefix + "q").body, "kept q");
}

// Keys whose fences are at different tokens, and a key the door refuses:
// each reported as it went, the deleted ones first, each group in the
// order given.
TEST(S3DoorDeleteTest, KeysAtDifferentFencesAreReportedEachOnItsOwn) {
  Rgw& rgw = Rgw::Shared();
  const std::string prefix = rgw.UniquePrefix("mixed-delete");
  Door door(prefix);
  ASSERT_EQ(PutAt(door, "low", "low", "3"), 200);
  ASSERT_EQ(PutAt(door, "high", "high", "9"), 200);
  ASSERT_EQ(PutAt(door, "same", "same", "5"), 200);
  const auto done =
      DeleteObjectsAt(door, DeleteDocument({"low", "high", "bad//key", "same"}),
                      {{"Fencing-Token", "5"}});
  ASSERT_EQ(done.status, 200) << done.body;
  EXPECT_NE(done.body.find("<Deleted><Key>low</Key></Deleted><Deleted><Key>"
                           "same</Key></Deleted><Error><Key>high</Key><Code>"
                           "StaleFencingToken</Code>"),
            std::string::npos)
      << done.body;
  EXPECT_NE(done.body.find("<Error><Key>bad//key</Key><Code>InvalidArgument"
                           "</Code>"),
            std::string::npos)
      << done.body;
  EXPECT_EQ(Count(done.body, "<Error>"), 2u) << done.body;
  EXPECT_EQ(rgw.Get(prefix + "low").status, 404);
  EXPECT_EQ(rgw.Get(prefix + "same").status, 404);
  EXPECT_EQ(rgw.Get(prefix + "high").body, "high");
}

// Quiet mode lists the refused keys only.
TEST(S3DoorDeleteTest, QuietModeListsOnlyTheRefusedKeys) {
  Rgw& rgw = Rgw::Shared();
  const std::string prefix = rgw.UniquePrefix("quiet-delete");
  Door door(prefix);
  ASSERT_EQ(PutAt(door, "gone", "g", "2"), 200);
  ASSERT_EQ(PutAt(door, "held", "h", "4"), 200);
  const auto done = DeleteObjectsAt(
      door, DeleteDocument({"gone", "held"}, true), {{"Fencing-Token", "3"}});
  ASSERT_EQ(done.status, 200) << done.body;
  EXPECT_EQ(done.body.find("<Deleted>"), std::string::npos) << done.body;
  EXPECT_EQ(Count(done.body, "<Error>"), 1u) << done.body;
  EXPECT_NE(done.body.find("<Key>held</Key><Code>StaleFencingToken</Code>"),
            std::string::npos)
      << done.body;
  EXPECT_EQ(rgw.Get(prefix + "gone").status, 404);
  EXPECT_EQ(rgw.Get(prefix + "held").body, "h");
}

// What the door cannot take is refused whole with S3's error, and nothing
// is deleted: not even the keys named before what is wrong.
TEST(S3DoorDeleteTest, BadInputIsRefusedWholeAndChangesNothing) {
  Rgw& rgw = Rgw::Shared();
  const std::string prefix = rgw.UniquePrefix("bad-delete");
  Door door(prefix);
  ASSERT_EQ(PutAt(door, "k", "kept", "1"), 200);
  const Headers token = {{"Fencing-Token", "1"}};
  std::vector<std::string> many(1001, "k");
  struct Case {
    std::string name;
    http::Request request;
    int status;
    std::string code;
  };
  const std::vector<Case> cases = {
      {"unclosed <Object>",
       DeleteObjectsRequest(
           door, "<Delete><Object><Key>k</Key><Object></Delete>", token),
       400, "MalformedXML"},
      {"not XML", DeleteObjectsRequest(door, "k", token), 400, "MalformedXML"},
      {"an unknown entity",
       DeleteObjectsRequest(door, DeleteDocument({"k", "&bogus;"}), token), 400,
       "MalformedXML"},
      {"a reference to a control character",
       DeleteObjectsRequest(door, DeleteDocument({"k", "a&#1;"}), token), 400,
       "MalformedXML"},
      {"no key", DeleteObjectsRequest(door, "<Delete></Delete>", token), 400,
       "MalformedXML"},
      {"Quiet neither true nor false",
       DeleteObjectsRequest(
           door,
           "<Delete><Object><Key>k</Key></Object><Quiet>yes</Quiet>"
           "</Delete>",
           token),
       400, "MalformedXML"},
      {"1001 keys", DeleteObjectsRequest(door, DeleteDocument(many), token),
       400, "MalformedXML"},
      {"a version",
       DeleteObjectsRequest(door,
                            "<Delete><Object><Key>k</Key></Object><Object>"
                            "<Key>k</Key><VersionId>3</VersionId></Object>"
                            "</Delete>",
                            token),
       501, "NotImplemented"},
      {"no token", DeleteObjectsRequest(door, DeleteDocument({"k"}), {}), 428,
       "MissingFencingToken"},
      {"a malformed token",
       DeleteObjectsRequest(door, DeleteDocument({"k"}),
                            {{"Fencing-Token", "1x"}}),
       400, "InvalidArgument"},
      {"the token as metadata",
       DeleteObjectsRequest(door, DeleteDocument({"k"}),
                            {{"x-amz-meta-fencing-token", "1"}}),
       400, "InvalidArgument"},
  };
  for (const Case& c : cases) {
    const auto answer = SendRaw(door.port(), c.request);
    EXPECT_EQ(answer.status, c.status) << c.name << ": " << answer.body;
    EXPECT_EQ(S3Code(answer), c.code) << c.name << ": " << answer.body;
    EXPECT_EQ(answer.body.find("<Deleted>"), std::string::npos) << c.name;
    EXPECT_EQ(rgw.Get(prefix + "k").body, "kept") << c.name;
  }
  // 1000 keys are taken (all but one refused by the door itself, so that
  // the store is asked once).
  std::vector<std::string> most(999, "bad//key");
  most.push_back("k");
  const auto taken = DeleteObjectsAt(door, DeleteDocument(most, true), token);
  EXPECT_EQ(taken.status, 200) << taken.body;
  EXPECT_EQ(Count(taken.body, "<Error>"), 999u);
  EXPECT_EQ(rgw.Get(prefix + "k").status, 404);
}

// A DeleteObjects whose body the signature does not cover (UNSIGNED-PAYLOAD)
// is refused on a plain-HTTP door, as such a PUT is: a relay could name
// other keys under the sender's token. Seen failing: with S3Auth's check
// for PUT only, it was answered 200 and the key deleted.
TEST(S3DoorDeleteTest, AnUnsignedBodyIsRefusedOnPlainHttp) {
  Rgw& rgw = Rgw::Shared();
  const std::string prefix = rgw.UniquePrefix("unsigned-delete");
  Door door(prefix);
  ASSERT_EQ(PutAt(door, "k", "kept", "1"), 200);
  http::Request request = storage::S3Request(door.Bucket(), bhttp::verb::post,
                                             "", DeleteDocument({"k"}));
  const std::vector<sigv4::QueryParam> query = {{"delete", ""}};
  request.target(s3::RequestTarget(s3::ObjectPath(door.Bucket(), ""), query));
  request.set("Fencing-Token", "1");
  sigv4::Request to_sign;
  to_sign.method = "POST";
  to_sign.path = "/" + rgw.bucket();
  to_sign.query = query;
  for (const auto& field : request) {
    if (field.name() == bhttp::field::connection) continue;
    to_sign.headers.push_back(
        {std::string(field.name_string()), std::string(field.value())});
  }
  to_sign.payload_hash = std::string(sigv4::kUnsignedPayload);
  sigv4::SigningParams params;
  params.region = "us-east-1";
  params.time = Clock::now();
  const std::size_t given = to_sign.headers.size();
  sigv4::SignRequest(to_sign, DoorKey(), params);
  for (std::size_t i = given; i < to_sign.headers.size(); ++i) {
    request.insert(to_sign.headers[i].name, to_sign.headers[i].value);
  }
  const auto answer = SendRaw(door.port(), request);
  EXPECT_EQ(answer.status, 403) << answer.body;
  EXPECT_EQ(S3Code(answer), "AccessDenied") << answer.body;
  EXPECT_EQ(rgw.Get(prefix + "k").body, "kept");
}

}  // namespace
}  // namespace fencepost::testing
