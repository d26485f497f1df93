// How a request names the door's bucket, against a real Ceph RGW:
// virtual-hosted style (Host BUCKET.NAME with --s3-listen-domain NAME, sent
// raw to 127.0.0.1, so no name is resolved) beside path style, and
// presigned URLs (query-string SigV4) for GET and PUT, their X-Amz-Expires
// honoured and their token fenced. What landed is read straight from RGW.

#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <vector>

#include "s3/location.h"
#include "sigv4/signer.h"
#include "storage/s3_request.h"
#include "tests/s3/door.h"
#include "tests/testing/http_client.h"
#include "tests/testing/rgw.h"
#include "tests/testing/server_process.h"

namespace fencepost::testing {
namespace {

namespace bhttp = boost::beast::http;
using Clock = std::chrono::system_clock;
using std::chrono::minutes;
using std::chrono::seconds;

// The door's name in these tests (.test is reserved: it never resolves).
constexpr char kDomain[] = "door.test";

// Where a client of `door` sends `bucket`'s requests: in the host name
// (BUCKET.HOST:PORT) or in the path, HOST being `host`.
s3::Location At(const Door& door, const std::string& host,
                const std::string& bucket, s3::Addressing addressing) {
  s3::Location location;
  location.endpoint =
      s3::ParseEndpoint("http://" + host + ":" + std::to_string(door.port()));
  location.bucket = bucket;
  location.addressing = addressing;
  return location;
}

s3::Location Hosted(const Door& door,
                    const std::string& bucket = Rgw::Shared().bucket()) {
  return At(door, kDomain, bucket, s3::Addressing::kVirtual);
}

// A request to `location` for `key`, `fields` and every other field signed
// with the door's key, the body's SHA-256 signed.
http::Request SignedTo(const s3::Location& location, bhttp::verb method,
                       const std::string& key, const std::string& body,
                       const Headers& fields = {}) {
  http::Request request = storage::S3Request(location, method, key, body);
  for (const auto& [name, value] : fields) request.insert(name, value);
  storage::SignS3(request, location, DoorKey(), Clock::now());
  return request;
}

// What a presigned URL for `key` at `location` is sent as: `query` and
// X-Amz-* in its query, `fields` signed (and sent) as headers, signed at
// `at` for `expires`.
http::Request PresignedTo(const s3::Location& location, bhttp::verb method,
                          const std::string& key, const std::string& body,
                          const Headers& fields = {},
                          std::vector<sigv4::QueryParam> query = {},
                          Clock::time_point at = Clock::now(),
                          seconds expires = seconds(60)) {
  sigv4::Request to_sign;
  to_sign.method = std::string(bhttp::to_string(method));
  to_sign.path = s3::ObjectPath(location, key);
  to_sign.query = std::move(query);
  to_sign.headers = {{"host", location.Host()}};
  for (const auto& [name, value] : fields) {
    to_sign.headers.push_back({name, value});
  }
  sigv4::SigningParams params;
  params.region = "us-east-1";
  params.time = at;
  const sigv4::Presigned url =
      sigv4::Presign(to_sign, DoorKey(), params, expires);
  http::Request request(method, to_sign.path + "?" + url.query, 11);
  request.set(bhttp::field::host, location.Host());
  for (const auto& [name, value] : fields) request.insert(name, value);
  request.body() = body;
  if (method == bhttp::verb::put) request.content_length(body.size());
  return request;
}

// The bucket in the host: PUT, GET, HEAD, a listing and DELETE of its
// objects, the same objects and fences as path style's (which the door
// still takes, from an IP address or from NAME itself); another bucket's
// name in the host is NoSuchBucket, as in the path.
TEST(S3DoorAddressingTest, VirtualHostedRequestsNameTheBucketInTheHost) {
  Rgw& rgw = Rgw::Shared();
  const std::string prefix = rgw.UniquePrefix("hosted");
  Door door(prefix, {"--s3-listen-domain", "Door.Test"});
  const s3::Location hosted = Hosted(door);
  EXPECT_EQ(hosted.Host(),
            rgw.bucket() + ".door.test:" + std::to_string(door.port()));
  const auto put =
      SendRaw(door.port(), SignedTo(hosted, bhttp::verb::put, "orders/v",
                                    "hosted", {{"Fencing-Token", "5"}}));
  ASSERT_EQ(put.status, 200) << put.body;
  S3Object object = rgw.Get(prefix + "orders/v");
  EXPECT_EQ(object.body, "hosted");
  EXPECT_EQ(object.metadata.at("fencing-token"), "5");

  const auto got =
      SendRaw(door.port(), SignedTo(hosted, bhttp::verb::get, "orders/v", ""));
  EXPECT_EQ(got.status, 200) << got.body;
  EXPECT_EQ(got.body, "hosted");
  EXPECT_EQ(got.header("x-amz-meta-fencing-token"), "5");
  EXPECT_EQ(
      SendRaw(door.port(), SignedTo(hosted, bhttp::verb::head, "orders/v", ""))
          .status,
      200);
  http::Request list = storage::S3ListRequest(hosted, {{"list-type", "2"}});
  storage::SignS3(list, hosted, DoorKey(), Clock::now());
  EXPECT_EQ(list.target(), "/?list-type=2");
  const auto listed = SendRaw(door.port(), list);
  EXPECT_EQ(listed.status, 200) << listed.body;
  EXPECT_NE(listed.body.find("<Key>orders/v</Key>"), std::string::npos)
      << listed.body;

  // The same fence through path style, from an IP address and from NAME.
  const auto stale =
      SendRaw(door.port(), SignedForDoor(door, bhttp::verb::put, "orders/v",
                                         "late", {{"Fencing-Token", "4"}}));
  EXPECT_EQ(S3Code(stale), "StaleFencingToken") << stale.body;
  const s3::Location named =
      At(door, kDomain, rgw.bucket(), s3::Addressing::kPath);
  const auto by_name =
      SendRaw(door.port(), SignedTo(named, bhttp::verb::get, "orders/v", ""));
  EXPECT_EQ(by_name.status, 200) << by_name.body;
  EXPECT_EQ(by_name.body, "hosted");

  const auto other = SendRaw(
      door.port(), SignedTo(Hosted(door, "other-bucket"), bhttp::verb::put,
                            "orders/v", "elsewhere", {{"Fencing-Token", "9"}}));
  EXPECT_EQ(other.status, 404) << other.body;
  EXPECT_EQ(S3Code(other), "NoSuchBucket") << other.body;
  EXPECT_EQ(rgw.Get(prefix + "orders/v").body, "hosted");

  const auto gone =
      SendRaw(door.port(), SignedTo(hosted, bhttp::verb::delete_, "orders/v",
                                    "", {{"Fencing-Token", "6"}}));
  EXPECT_EQ(gone.status, 204) << gone.body;
  EXPECT_EQ(rgw.Get(prefix + "orders/v").status, 404);
}

// Without --s3-listen-domain every Host is path style: BUCKET.NAME/KEY
// names the bucket KEY (NoSuchBucket), and BUCKET.NAME/ the service.
TEST(S3DoorAddressingTest, WithoutTheFlagEveryRequestIsPathStyle) {
  Rgw& rgw = Rgw::Shared();
  const std::string prefix = rgw.UniquePrefix("no-domain");
  Door door(prefix);
  const auto put =
      SendRaw(door.port(), SignedTo(Hosted(door), bhttp::verb::put, "k", "v",
                                    {{"Fencing-Token", "1"}}));
  EXPECT_EQ(put.status, 404) << put.body;
  EXPECT_EQ(S3Code(put), "NoSuchBucket") << put.body;
  EXPECT_EQ(rgw.Get(prefix + "k").status, 404);
  const auto root =
      SendRaw(door.port(), SignedTo(Hosted(door), bhttp::verb::get, "", ""));
  EXPECT_EQ(S3Code(root), "NotImplemented") << root.body;
}

// A name that is no DNS name, or the flag without the door, stops the
// start with a message naming the flag.
TEST(S3DoorAddressingTest, TheDomainMustBeADnsName) {
  Rgw& rgw = Rgw::Shared();
  const std::string prefix = rgw.UniquePrefix("bad-domain");
  TempDir dir;
  for (const std::string bad : {"door_test", "127.0.0.1", "-door.test",
                                "door..test", "door.test.", ""}) {
    std::vector<std::string> args = {"serve", "--data-dir", dir / "data"};
    for (const std::string& flag : DoorFlags(prefix, dir / "clients")) {
      args.push_back(flag);
    }
    args.insert(args.end(), {"--s3-listen-domain", bad});
    const RunResult run = RunFencepost(args, rgw.Env());
    EXPECT_EQ(run.exit_status, 2) << bad << ": " << run.output;
    EXPECT_NE(
        run.output.find("--s3-listen-domain: '" + bad + "' is not a DNS name"),
        std::string::npos)
        << run.output;
  }
  const RunResult alone = RunFencepost(
      {"serve", "--data-dir", dir / "data", "--backend", "s3://" + rgw.bucket(),
       "--s3-endpoint", rgw.endpoint(), "--s3-listen-domain", kDomain},
      rgw.Env());
  EXPECT_EQ(alone.exit_status, 2) << alone.output;
  EXPECT_NE(alone.output.find("--s3-listen-domain needs --s3-listen"),
            std::string::npos)
      << alone.output;
}

// Presigned GET and PUT, path style and virtual-hosted: the PUT's token
// from a signed x-amz-meta-fencing-token header (boto3) or query parameter
// (SDKs that move x-amz-* into the URL), fenced as any write; a URL past
// its X-Amz-Expires is 403 "Request has expired" and changes nothing.
TEST(S3DoorAddressingTest, PresignedUrlsWriteAndReadUntilTheyExpire) {
  Rgw& rgw = Rgw::Shared();
  const std::string prefix = rgw.UniquePrefix("presigned-put");
  Door door(prefix,
            {"--s3-allow-unsigned-payload", "--s3-listen-domain", kDomain});
  const s3::Location path = door.Bucket();
  const s3::Location hosted = Hosted(door);
  const auto put =
      SendRaw(door.port(), PresignedTo(path, bhttp::verb::put, "p", "seven",
                                       {{"x-amz-meta-fencing-token", "7"}}));
  ASSERT_EQ(put.status, 200) << put.body;
  EXPECT_EQ(rgw.Get(prefix + "p").metadata.at("fencing-token"), "7");
  const auto in_query = SendRaw(
      door.port(), PresignedTo(hosted, bhttp::verb::put, "p", "eight", {},
                               {{"x-amz-meta-fencing-token", "8"}}));
  ASSERT_EQ(in_query.status, 200) << in_query.body;
  S3Object object = rgw.Get(prefix + "p");
  EXPECT_EQ(object.body, "eight");
  EXPECT_EQ(object.metadata.at("fencing-token"), "8");

  for (const s3::Location& at : {path, hosted}) {
    const auto got =
        SendRaw(door.port(), PresignedTo(at, bhttp::verb::get, "p", ""));
    EXPECT_EQ(got.status, 200) << got.body;
    EXPECT_EQ(got.body, "eight");
    const auto expired = SendRaw(
        door.port(), PresignedTo(at, bhttp::verb::get, "p", "", {}, {},
                                 Clock::now() - minutes(2), seconds(60)));
    EXPECT_EQ(expired.status, 403) << expired.body;
    EXPECT_EQ(S3Code(expired), "AccessDenied") << expired.body;
    EXPECT_NE(expired.body.find("<Message>Request has expired</Message>"),
              std::string::npos)
        << expired.body;
  }
  const auto late =
      SendRaw(door.port(), PresignedTo(hosted, bhttp::verb::put, "p", "late",
                                       {}, {{"x-amz-meta-fencing-token", "9"}},
                                       Clock::now() - minutes(2), seconds(60)));
  EXPECT_EQ(late.status, 403) << late.body;

  const auto stale =
      SendRaw(door.port(), PresignedTo(hosted, bhttp::verb::put, "p", "stale",
                                       {{"x-amz-meta-fencing-token", "3"}}));
  EXPECT_EQ(stale.status, 409) << stale.body;
  EXPECT_EQ(S3Code(stale), "StaleFencingToken") << stale.body;
  EXPECT_EQ(stale.header("fencing-token"), "8");
  const auto missing =
      SendRaw(door.port(), PresignedTo(path, bhttp::verb::put, "p", "none"));
  EXPECT_EQ(S3Code(missing), "MissingFencingToken") << missing.body;
  // A token the URL's signature does not cover is a relay's to change.
  http::Request unsigned_token =
      PresignedTo(path, bhttp::verb::put, "p", "relayed");
  unsigned_token.set("x-amz-meta-fencing-token", "99");
  const auto relayed = SendRaw(door.port(), unsigned_token);
  EXPECT_EQ(S3Code(relayed), "AccessDenied") << relayed.body;
  // Other metadata in the query would not be kept: refused, not dropped.
  const auto color =
      SendRaw(door.port(), PresignedTo(path, bhttp::verb::put, "p", "red", {},
                                       {{"x-amz-meta-fencing-token", "10"},
                                        {"x-amz-meta-color", "red"}}));
  EXPECT_EQ(S3Code(color), "NotImplemented") << color.body;
  object = rgw.Get(prefix + "p");
  EXPECT_EQ(object.body, "eight");
  EXPECT_EQ(object.metadata.at("fencing-token"), "8");
}

}  // namespace
}  // namespace fencepost::testing
