// Large objects through the S3 front door against a real Ceph RGW: bodies
// over --max-body streamed to the store through their check, multipart
// uploads fenced at CompleteMultipartUpload (across restarts and crashes of
// fencepost), CopyObject fenced as a write of its destination, and the
// memory a 256 MiB body costs. Requests are signed here and sent raw; what
// landed is read straight from RGW with the store's credentials.

#include <gtest/gtest.h>
#include <openssl/evp.h>
#include <signal.h>

#include <boost/beast/http/write.hpp>
#include <chrono>
#include <cstdio>
#include <random>
#include <regex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "sigv4/checksum.h"
#include "sigv4/chunked.h"
#include "sigv4/signer.h"
#include "storage/s3_request.h"
#include "tests/s3/door.h"
#include "tests/testing/answer_dropper.h"
#include "tests/testing/http_client.h"
#include "tests/testing/rgw.h"

namespace fencepost::testing {
namespace {

namespace bhttp = boost::beast::http;
using Clock = std::chrono::system_clock;
using Query = std::vector<sigv4::QueryParam>;

// Small, so that modest bodies take the streamed path.
constexpr char kMaxBody[] = "65536";
// RGW's smallest part but the last.
constexpr std::size_t kMinPart = std::size_t{5} << 20;

// `size` bytes that differ from `seed`'s.
std::string Bytes(std::size_t size, std::uint64_t seed) {
  std::mt19937_64 random(seed);
  std::string out(size, '\0');
  for (std::size_t i = 0; i < size; i += 8) {
    const std::uint64_t word = random();
    std::memcpy(out.data() + i, &word, std::min<std::size_t>(8, size - i));
  }
  return out;
}

std::string HexMd5(const std::string& data) {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int size = 0;
  EVP_Digest(data.data(), data.size(), digest, &size, EVP_md5(), nullptr);
  std::string out;
  char hex[3];
  for (unsigned i = 0; i < size; ++i) {
    std::snprintf(hex, sizeof hex, "%02x", digest[i]);
    out += hex;
  }
  return out;
}

// A request to the door for `key` with `query` and `fields`, its body's
// SHA-256 signed.
http::Request Signed(const Door& door, bhttp::verb method,
                     const std::string& key, std::string body,
                     const Query& query, const Headers& fields = {}) {
  http::Request request =
      storage::S3Request(door.Bucket(), method, key, std::move(body), query);
  for (const auto& [name, value] : fields) request.insert(name, value);
  storage::SignS3(request, door.Bucket(), DoorKey(), Clock::now());
  return request;
}

// The text of the first <name> element of `xml`, or "".
std::string Element(const std::string& xml, const std::string& name) {
  const auto from = xml.find("<" + name + ">");
  const auto to = xml.find("</" + name + ">");
  if (from == std::string::npos || to == std::string::npos) return "";
  return xml.substr(from + name.size() + 2, to - from - name.size() - 2);
}

// The uploads RGW itself lists under `object` (the store's key), asked
// with the store's credentials: how many.
int UploadsAtRgw(const std::string& object) {
  Rgw& rgw = Rgw::Shared();
  s3::Location at;
  at.endpoint = s3::ParseEndpoint(rgw.endpoint());
  at.bucket = rgw.bucket();
  http::Request request = storage::S3Request(
      at, bhttp::verb::get, "", "", {{"uploads", ""}, {"prefix", object}});
  storage::SignS3(request, at,
                  DoorKey(rgw.secret_access_key(), rgw.access_key_id()),
                  Clock::now());
  const HttpResponse answer = SendRaw(rgw.port(), request);
  EXPECT_EQ(answer.status, 200) << answer.body;
  int uploads = 0;
  for (auto at = answer.body.find("<Upload>"); at != std::string::npos;
       at = answer.body.find("<Upload>", at + 1)) {
    ++uploads;
  }
  return uploads;
}

// A multipart upload through the door, as a client keeps it.
struct Upload {
  std::string key;
  std::string id;
  std::vector<std::string> etags;  // of parts 1, 2, ...
};

HttpResponse Create(const Door& door, Upload& upload, const Headers& fields) {
  const HttpResponse answer =
      SendRaw(door.port(), Signed(door, bhttp::verb::post, upload.key, "",
                                  {{"uploads", ""}}, fields));
  upload.id = Element(answer.body, "UploadId");
  return answer;
}

HttpResponse PutPart(const Door& door, Upload& upload, int number,
                     const std::string& body) {
  const http::Request request =
      Signed(door, bhttp::verb::put, upload.key, body,
             {{"partNumber", std::to_string(number)}, {"uploadId", upload.id}});
  HttpClient client(door.port(), 60);
  std::ostringstream wire;
  wire << request;
  const HttpResponse answer = client.Raw(wire.str());
  if (answer.status == 200) upload.etags.push_back(answer.header("etag"));
  return answer;
}

// The bytes of `upload`'s CompleteMultipartUpload, signed.
std::string CompleteRequest(const Door& door, const Upload& upload) {
  std::string parts = "<CompleteMultipartUpload>";
  for (std::size_t i = 0; i < upload.etags.size(); ++i) {
    parts += "<Part><PartNumber>" + std::to_string(i + 1) +
             "</PartNumber><ETag>" + upload.etags[i] + "</ETag></Part>";
  }
  parts += "</CompleteMultipartUpload>";
  std::ostringstream wire;
  wire << Signed(door, bhttp::verb::post, upload.key, parts,
                 {{"uploadId", upload.id}});
  return wire.str();
}

HttpResponse Complete(const Door& door, const Upload& upload) {
  HttpClient client(door.port(), 60);
  return client.Raw(CompleteRequest(door, upload));
}

// `send` again while the door answers 503 (a fence held after a crash), for
// at most `seconds`.
HttpResponse UntilNotHeld(const std::function<HttpResponse()>& send,
                          double seconds = 20) {
  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  HttpResponse answer = send();
  while (answer.status == 503 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    answer = send();
  }
  return answer;
}

// A PutObject of `body` with `token`, signed.
HttpResponse Put(const Door& door, const std::string& key,
                 const std::string& body, const std::string& token) {
  return SendRaw(door.port(), Signed(door, bhttp::verb::put, key, body, {},
                                     {{"Fencing-Token", token}}));
}

// The token of the door's fence `key` (GET /v1/fences/KEY), -1 without one.
long long FenceToken(Door& door, const std::string& key) {
  const HttpResponse answer =
      Fetch(door.server().admin_port(), "GET", "/v1/fences/" + key);
  std::smatch match;
  if (answer.status != 200 ||
      !std::regex_search(answer.body, match,
                         std::regex("\"token\": *\"?([0-9]+)"))) {
    return -1;
  }
  return std::stoll(match[1]);
}

// The remaining fields of `request` (headers given) signed over
// `payload_hash`.
void SignOver(http::Request& request, const std::string& key,
              std::string_view payload_hash, Clock::time_point now,
              sigv4::Signed* seed = nullptr) {
  sigv4::Request to_sign;
  to_sign.method = "PUT";
  to_sign.path = "/" + Rgw::Shared().bucket() + "/" + key;
  to_sign.path_style = sigv4::PathStyle::kS3;
  for (const auto& field : request) {
    if (field.name() == bhttp::field::connection) continue;
    to_sign.headers.push_back(
        {std::string(field.name_string()), std::string(field.value())});
  }
  to_sign.payload_hash = std::string(payload_hash);
  sigv4::SigningParams params;
  params.region = "us-east-1";
  params.time = now;
  const std::size_t given = to_sign.headers.size();
  const sigv4::Signed made = sigv4::SignRequest(to_sign, DoorKey(), params);
  if (seed != nullptr) *seed = made;
  for (std::size_t i = given; i < to_sign.headers.size(); ++i) {
    request.set(to_sign.headers[i].name, to_sign.headers[i].value);
  }
}

// A signed aws-chunked PutObject of `data` in chunks of `chunk` bytes, the
// signature of chunk `tamper` (1-based; 0: none) wrong.
http::Request ChunkedPut(const Door& door, const std::string& key,
                         const std::string& data, std::size_t chunk,
                         int tamper) {
  http::Request request =
      storage::S3Request(door.Bucket(), bhttp::verb::put, key, "");
  const auto now = Clock::now();
  const std::string amz_date = sigv4::FormatAmzDate(now);
  const sigv4::Scope scope{amz_date.substr(0, 8), "us-east-1", "s3"};
  request.set("Fencing-Token", "9");
  request.set(bhttp::field::content_encoding, "aws-chunked");
  request.set("x-amz-decoded-content-length", std::to_string(data.size()));
  request.content_length(sigv4::ChunkedContentLength(data.size(), chunk));
  sigv4::Signed seed;
  SignOver(request, key, sigv4::kStreamingPayload, now, &seed);
  sigv4::ChunkSigner signer(
      sigv4::SigningKey(DoorKey().secret_access_key, scope), amz_date, scope,
      seed.signature);
  std::string body;
  for (std::size_t at = 0, n = 1;; at += chunk, ++n) {
    const std::string part = data.substr(std::min(at, data.size()), chunk);
    std::string signature = signer.Next(part);
    if (static_cast<int>(n) == tamper) {
      signature[0] = signature[0] == 'a' ? 'b' : 'a';
    }
    body += sigv4::ChunkHeader(part.size(), signature) + part + "\r\n";
    if (part.empty()) break;
  }
  request.body() = body;
  return request;
}

// A STREAMING-UNSIGNED-PAYLOAD-TRAILER PutObject of `data` (one chunk)
// whose trailing x-amz-checksum-crc32 is `checksum`.
http::Request TrailerPut(const Door& door, const std::string& key,
                         const std::string& data, const std::string& checksum) {
  char size[32];
  std::snprintf(size, sizeof size, "%zx", data.size());
  const std::string body = std::string(size) + "\r\n" + data +
                           "\r\n0\r\nx-amz-checksum-crc32:" + checksum +
                           "\r\n\r\n";
  http::Request request =
      storage::S3Request(door.Bucket(), bhttp::verb::put, key, "");
  request.set("Fencing-Token", "9");
  request.set(bhttp::field::content_encoding, "aws-chunked");
  request.set("x-amz-decoded-content-length", std::to_string(data.size()));
  request.set("x-amz-trailer", "x-amz-checksum-crc32");
  request.content_length(body.size());
  SignOver(request, key, sigv4::kStreamingUnsignedTrailer, Clock::now());
  request.body() = body;
  return request;
}

// `request` with the last `tail` bytes of its body sent 300 ms after the
// rest, which the door has streamed on by then.
HttpResponse SendInTwo(std::uint16_t port, const http::Request& request,
                       std::size_t tail) {
  std::ostringstream wire;
  wire << request;
  const std::string bytes = wire.str();
  HttpClient client(port);
  client.Send(bytes.substr(0, bytes.size() - tail));
  if (tail > 0) {
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    client.Send(bytes.substr(bytes.size() - tail));
  }
  return client.ReadResponse();
}

// A body over --max-body that fails its check on the way never becomes an
// object, and never replaces one: signed chunks with a wrong signature in
// the middle, an unsigned trailer with a wrong CRC32, a signed payload
// hash of other bytes. Seen failing: with StreamAndRead (storage/
// http_pool.cc) sending every byte at once instead of holding the last
// back, the trailer case wrote the unchecked bytes (RGW answered 200 for
// the fresh key) and replaced the earlier object. Its trailer is sent
// apart: sent in one write, the whole body is one piece, which
// CheckedBody withholds when it fails, and the case passed even so.
TEST(S3DoorLargeTest, AStreamedBodyThatFailsItsCheckNeverBecomesAnObject) {
  Rgw& rgw = Rgw::Shared();
  const std::string prefix = rgw.UniquePrefix("large-check");
  Door door(prefix, {"--max-body", kMaxBody, "--s3-allow-unsigned-payload"});
  const std::string data = Bytes(100000, 1);  // over --max-body
  const std::string earlier = "the earlier object";
  const std::string wrong_crc =
      sigv4::Base64Checksum(sigv4::ChecksumAlgorithm::kCrc32, "other");
  struct Case {
    std::string name;
    std::function<http::Request(const std::string& key)> request;
    int status;
    std::string code;
    std::size_t tail;  // the body's last bytes, sent apart
  };
  const std::vector<Case> cases = {
      {"chunk 3 of 5 signed wrongly",
       [&](const std::string& key) {
         return ChunkedPut(door, key, data, 20000, 3);
       },
       403, "SignatureDoesNotMatch", 0},
      {"a trailing CRC32 of other bytes",
       [&](const std::string& key) {
         return TrailerPut(door, key, data, wrong_crc);
       },
       // The final chunk and its trailer: every byte of data has gone
       // through its check before the trailer fails it.
       400, "BadDigest",
       std::string("0\r\nx-amz-checksum-crc32:\r\n\r\n").size() +
           wrong_crc.size()},
      {"a signed SHA-256 of other bytes",
       [&](const std::string& key) {
         http::Request request =
             Signed(door, bhttp::verb::put, key, Bytes(data.size(), 2), {},
                    {{"Fencing-Token", "9"}});
         request.body() = data;
         return request;
       },
       400, "XAmzContentSHA256Mismatch", 1000},
  };
  for (std::size_t i = 0; i < cases.size(); ++i) {
    const Case& c = cases[i];
    const std::string fresh = "fresh" + std::to_string(i);
    const std::string kept = "kept" + std::to_string(i);
    ASSERT_EQ(Put(door, kept, earlier, "8").status, 200);
    for (const std::string& key : {fresh, kept}) {
      const HttpResponse answer =
          SendInTwo(door.port(), c.request(key), c.tail);
      EXPECT_EQ(answer.status, c.status) << c.name << ": " << answer.body;
      EXPECT_EQ(S3Code(answer), c.code) << c.name << ": " << answer.body;
    }
    EXPECT_EQ(rgw.Get(prefix + fresh).status, 404) << c.name;
    EXPECT_TRUE(rgw.Get(prefix + kept).body == earlier) << c.name;
  }
  // The same bodies rightly checked land, so the refusals were the checks'.
  ASSERT_EQ(
      SendRaw(door.port(), ChunkedPut(door, "good", data, 20000, 0)).status,
      200);
  EXPECT_EQ(rgw.Get(prefix + "good").body, data);
  const HttpResponse trailer = SendRaw(
      door.port(), TrailerPut(door, "good2", data,
                              sigv4::Base64Checksum(
                                  sigv4::ChecksumAlgorithm::kCrc32, data)));
  ASSERT_EQ(trailer.status, 200) << trailer.body;
  EXPECT_EQ(rgw.Get(prefix + "good2").body, data);
}

// CompleteMultipartUpload is the write, fenced with the token its upload
// was started with: a new leader's PutObject between Create and Complete
// makes the Complete stale (409, the current token in Fencing-Token), the
// new leader's object stays and the upload is aborted at the store. A stale
// Create and a tampered upload id are refused; a current Complete lands
// byte-exact with its token and the Create's Content-Type. Seen failing:
// with S3Uploads::Complete's Abort after a stale refusal removed, RGW still
// listed the upload (1, not 0).
TEST(S3DoorLargeTest, AStaleCompleteIsRefusedAndItsUploadAborted) {
  Rgw& rgw = Rgw::Shared();
  const std::string prefix = rgw.UniquePrefix("large-mp");
  Door door(prefix, {"--max-body", kMaxBody});
  const std::string part1 = Bytes(kMinPart + 4096, 3);  // streamed
  const std::string part2 = "the last part, read whole";
  Upload a{"m"};
  ASSERT_EQ(Create(door, a, {{"Fencing-Token", "5"}}).status, 200);
  ASSERT_EQ(a.id.rfind("fp1.5.", 0), 0u) << a.id;
  ASSERT_EQ(PutPart(door, a, 1, part1).status, 200);
  ASSERT_EQ(PutPart(door, a, 2, part2).status, 200);
  EXPECT_EQ(UploadsAtRgw(prefix + "m"), 1);
  ASSERT_EQ(Put(door, "m", "the new leader's", "6").status, 200);
  const HttpResponse stale = Complete(door, a);
  EXPECT_EQ(stale.status, 409) << stale.body;
  EXPECT_EQ(S3Code(stale), "StaleFencingToken") << stale.body;
  EXPECT_EQ(stale.header("fencing-token"), "6");
  S3Object kept = rgw.Get(prefix + "m");
  EXPECT_EQ(kept.body, "the new leader's");
  EXPECT_EQ(kept.metadata.at("fencing-token"), "6");
  EXPECT_EQ(UploadsAtRgw(prefix + "m"), 0) << "the stale upload was kept";

  // Already stale at Create: refused, nothing started at the store.
  Upload late{"m"};
  const HttpResponse refused = Create(door, late, {{"Fencing-Token", "5"}});
  EXPECT_EQ(refused.status, 409) << refused.body;
  EXPECT_EQ(S3Code(refused), "StaleFencingToken");
  EXPECT_EQ(UploadsAtRgw(prefix + "m"), 0);

  Upload b{"m"};
  ASSERT_EQ(
      Create(door, b,
             {{"Fencing-Token", "6"}, {"Content-Type", "application/x-parts"}})
          .status,
      200);
  ASSERT_EQ(PutPart(door, b, 1, part1).status, 200);
  ASSERT_EQ(PutPart(door, b, 2, part2).status, 200);
  // The token in the id is the MAC's: a client cannot raise it.
  Upload tampered = b;
  tampered.id.replace(0, 6, "fp1.7.");
  const HttpResponse forged = Complete(door, tampered);
  EXPECT_EQ(forged.status, 404) << forged.body;
  EXPECT_EQ(S3Code(forged), "NoSuchUpload") << forged.body;
  EXPECT_EQ(PutPart(door, tampered, 3, "x").status, 404);
  // The store's own id (as ListMultipartUploads shows it) carries no
  // token: it takes neither parts nor the completion. Seen failing before
  // such ids were refused: a part was taken (200).
  Upload raw = b;
  raw.id = b.id.substr(b.id.find('.', b.id.find('.', 4) + 1) + 1);
  EXPECT_EQ(PutPart(door, raw, 3, "x").status, 404);
  const HttpResponse unstamped = Complete(door, raw);
  EXPECT_EQ(unstamped.status, 404) << unstamped.body;
  EXPECT_EQ(S3Code(unstamped), "NoSuchUpload") << unstamped.body;
  EXPECT_EQ(rgw.Get(prefix + "m").body, "the new leader's");

  // ListParts through the door: the key and the id as the client knows
  // them, and nothing of the store's account.
  const HttpResponse parts =
      SendRaw(door.port(),
              Signed(door, bhttp::verb::get, "m", "", {{"uploadId", b.id}}));
  EXPECT_EQ(parts.status, 200) << parts.body;
  EXPECT_NE(parts.body.find("<Key>m</Key>"), std::string::npos) << parts.body;
  EXPECT_NE(parts.body.find("<UploadId>" + b.id + "</UploadId>"),
            std::string::npos)
      << parts.body;
  EXPECT_NE(parts.body.find("<PartNumber>2</PartNumber>"), std::string::npos);
  EXPECT_EQ(parts.body.find("<Owner>"), std::string::npos) << parts.body;
  EXPECT_EQ(parts.body.find("<Initiator>"), std::string::npos) << parts.body;

  const HttpResponse done = Complete(door, b);
  ASSERT_EQ(done.status, 200) << done.body;
  S3Object object = rgw.Get(prefix + "m");
  EXPECT_TRUE(object.body == part1 + part2) << object.body.size();
  EXPECT_EQ(object.metadata.at("fencing-token"), "6");
  EXPECT_EQ(object.content_type, "application/x-parts");
  // The object's own ETag (RGW 16.2 answers Complete with an empty one).
  ASSERT_GT(object.etag.size(), 2u);
  EXPECT_NE(done.body.find(object.etag.substr(1, object.etag.size() - 2)),
            std::string::npos)
      << done.body << " " << object.etag;
  EXPECT_EQ(UploadsAtRgw(prefix + "m"), 0);
}

// The upload's token lives in its id, so an upload outlives fencepost:
// stopped (cleanly, then with kill -9) between Create and Complete, a new
// process on the same data directory completes it. Killed while a part is
// on its way, nothing of that part or the object appears. Seen failing:
// with the key that signs upload ids made per process (the pid added to
// it), the Complete after the clean restart was 404 NoSuchUpload.
TEST(S3DoorLargeTest, AnUploadOutlivesARestartOfFencepost) {
  Rgw& rgw = Rgw::Shared();
  const std::string prefix = rgw.UniquePrefix("large-restart");
  Door door(prefix, {"--max-body", kMaxBody, "--upstream-timeout", "2",
                     "--upstream-settle", "1"});
  const std::string part1 = Bytes(kMinPart, 4), part2 = Bytes(300000, 5);
  for (const bool kill : {false, true}) {
    const std::string key = kill ? "killed" : "stopped";
    Upload upload{key};
    ASSERT_EQ(Create(door, upload, {{"x-amz-meta-fencing-token", "3"}}).status,
              200);
    ASSERT_EQ(PutPart(door, upload, 1, part1).status, 200);
    ASSERT_EQ(PutPart(door, upload, 2, part2).status, 200);
    door.Restart(kill);
    // After a crash every fence first waits out what the dead process may
    // have sent (503 SlowDown).
    const HttpResponse done =
        UntilNotHeld([&] { return Complete(door, upload); });
    ASSERT_EQ(done.status, 200) << key << ": " << done.body;
    S3Object object = rgw.Get(prefix + key);
    EXPECT_TRUE(object.body == part1 + part2) << key;
    EXPECT_EQ(object.metadata["fencing-token"], "3") << key;
  }
  // kill -9 with half of part 2 sent.
  Upload torn{"torn"};
  ASSERT_EQ(Create(door, torn, {{"Fencing-Token", "3"}}).status, 200);
  ASSERT_EQ(PutPart(door, torn, 1, part1).status, 200);
  {
    std::ostringstream wire;
    wire << Signed(door, bhttp::verb::put, "torn", part1,
                   {{"partNumber", "2"}, {"uploadId", torn.id}});
    const std::string bytes = wire.str();
    HttpClient client(door.port());
    client.Send(bytes.substr(0, bytes.size() / 2));
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    door.Restart(true);
  }
  EXPECT_EQ(rgw.Get(prefix + "torn").status, 404);
  const HttpResponse parts = SendRaw(
      door.port(),
      Signed(door, bhttp::verb::get, "torn", "", {{"uploadId", torn.id}}));
  ASSERT_EQ(parts.status, 200) << parts.body;
  EXPECT_NE(parts.body.find("<PartNumber>1</PartNumber>"), std::string::npos)
      << parts.body;
  EXPECT_EQ(parts.body.find("<PartNumber>2</PartNumber>"), std::string::npos)
      << "the torn part landed: " << parts.body;
}

// fencepost killed (-9) after it decided a Complete (its fence committed)
// and before the store answered it, the Complete held in a relay in front
// of RGW: the next process's fence is not lower; while the dead process's
// Complete may still land, every write of the key waits (503 SlowDown) and
// a stale one is refused; the Complete then lands with the fence's own
// token, and the new leader's write after it stays. Seen failing: with
// no hold at the start after a crash (Assembly's hold_at_start 0 for
// s3://), the new leader's write was taken (200, not 503 SlowDown) while
// the dead process's Complete could still land over it.
TEST(S3DoorLargeTest, ACrashDuringCompleteNeverLowersTheFence) {
  Rgw& rgw = Rgw::Shared();
  const std::string prefix = rgw.UniquePrefix("large-crash");
  AnswerDropper relay("127.0.0.1", rgw.port());
  Door door(prefix,
            {"--max-body", kMaxBody, "--upstream-timeout", "4",
             "--upstream-settle", "1"},
            kDoorClients, relay.endpoint());
  ASSERT_EQ(Put(door, "c", "the old leader's", "4").status, 200);
  Upload upload{"c"};
  ASSERT_EQ(Create(door, upload, {{"Fencing-Token", "5"}}).status, 200);
  const std::string part = Bytes(kMinPart / 2, 6);
  ASSERT_EQ(PutPart(door, upload, 1, part).status, 200);
  relay.HoldRequestsTo("POST", "uploadId=", 1);
  {
    HttpClient client(door.port());
    client.Send(CompleteRequest(door, upload));
    for (int i = 0; i < 100 && relay.held() == 0; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    ASSERT_EQ(relay.held(), 1) << "the Complete never reached the relay";
    EXPECT_EQ(FenceToken(door, "c"), 5) << "decided before it is sent";
    door.Restart(true);
  }
  EXPECT_GE(FenceToken(door, "c"), 5) << "the fence went down";
  const HttpResponse waits = Put(door, "c", "the new leader's", "6");
  EXPECT_EQ(waits.status, 503) << waits.body;
  EXPECT_EQ(S3Code(waits), "SlowDown") << waits.body;
  EXPECT_EQ(S3Code(Put(door, "c", "late", "4")), "StaleFencingToken");
  relay.ReleaseHeld();
  std::string landed;
  for (int i = 0; i < 50 && landed != "5"; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    landed = rgw.Head(prefix + "c").metadata["fencing-token"];
  }
  EXPECT_EQ(landed, "5") << "the dead process's Complete did not land";
  EXPECT_EQ(FenceToken(door, "c"), 5)
      << "a newer write was taken while that Complete could still land";
  const HttpResponse after =
      UntilNotHeld([&] { return Put(door, "c", "the new leader's", "6"); });
  ASSERT_EQ(after.status, 200) << after.body;
  std::this_thread::sleep_for(std::chrono::seconds(1));
  S3Object object = rgw.Get(prefix + "c");
  EXPECT_EQ(object.body, "the new leader's");
  EXPECT_EQ(object.metadata["fencing-token"], "6");
  EXPECT_EQ(FenceToken(door, "c"), 6);
  EXPECT_EQ(UploadsAtRgw(prefix + "c"), 0);
}

// CopyObject is a fenced write of its destination: COPY keeps the source's
// Content-Type and x-amz-meta-* with the copy's own token, REPLACE takes
// the request's; a stale token, a source in another bucket and a missing
// source change nothing. Seen failing: with the copy's token set only
// under REPLACE (S3Backend::StoreMade), COPY's object had no
// fencing-token.
TEST(S3DoorLargeTest, CopyObjectIsAFencedWriteOfItsDestination) {
  Rgw& rgw = Rgw::Shared();
  const std::string prefix = rgw.UniquePrefix("large-copy");
  Door door(prefix, {"--max-body", kMaxBody});
  const std::string body = Bytes(200000, 7);
  ASSERT_EQ(SendRaw(door.port(), Signed(door, bhttp::verb::put, "src", body, {},
                                        {{"Fencing-Token", "1"},
                                         {"Content-Type", "text/csv"},
                                         {"x-amz-meta-owner", "billing"}}))
                .status,
            200);
  const std::string source = "/" + rgw.bucket() + "/src";
  const auto copy = [&](const std::string& token, Headers fields) {
    fields.push_back({"Fencing-Token", token});
    bool sourced = false;
    for (const auto& field : fields)
      sourced |= field.first == "x-amz-copy-source";
    if (!sourced) fields.push_back({"x-amz-copy-source", source});
    return SendRaw(door.port(),
                   Signed(door, bhttp::verb::put, "dst", "", {}, fields));
  };
  const HttpResponse kept = copy("7", {});
  ASSERT_EQ(kept.status, 200) << kept.body;
  EXPECT_NE(kept.body.find("<CopyObjectResult>"), std::string::npos);
  S3Object dst = rgw.Get(prefix + "dst");
  EXPECT_TRUE(dst.body == body);
  EXPECT_EQ(dst.content_type, "text/csv");
  EXPECT_EQ(dst.metadata["owner"], "billing");
  EXPECT_EQ(dst.metadata["fencing-token"], "7");
  const HttpResponse replaced =
      copy("7", {{"x-amz-metadata-directive", "REPLACE"},
                 {"Content-Type", "text/plain"},
                 {"x-amz-meta-kind", "report"}});
  ASSERT_EQ(replaced.status, 200) << replaced.body;
  dst = rgw.Get(prefix + "dst");
  EXPECT_TRUE(dst.body == body);
  EXPECT_EQ(dst.content_type, "text/plain");
  EXPECT_EQ(dst.metadata.count("owner"), 0u);
  EXPECT_EQ(dst.metadata["kind"], "report");
  EXPECT_EQ(dst.metadata["fencing-token"], "7");

  const HttpResponse stale = copy("6", {});
  EXPECT_EQ(stale.status, 409) << stale.body;
  EXPECT_EQ(S3Code(stale), "StaleFencingToken");
  EXPECT_EQ(stale.header("fencing-token"), "7");
  const HttpResponse elsewhere =
      copy("8", {{"x-amz-copy-source", "/another-bucket/src"}});
  EXPECT_EQ(elsewhere.status, 501) << elsewhere.body;
  EXPECT_EQ(S3Code(elsewhere), "NotImplemented");
  for (const char* directive : {"COPY", "REPLACE"}) {
    const HttpResponse missing =
        copy("8", {{"x-amz-copy-source", "/" + rgw.bucket() + "/none"},
                   {"x-amz-metadata-directive", directive}});
    EXPECT_EQ(missing.status, 404) << directive << ": " << missing.body;
    EXPECT_EQ(S3Code(missing), "NoSuchKey")
        << directive << ": " << missing.body;
  }
  S3Object unchanged = rgw.Get(prefix + "dst");
  EXPECT_EQ(unchanged.etag, dst.etag);
  EXPECT_EQ(unchanged.metadata["fencing-token"], "7");
  EXPECT_EQ(unchanged.content_type, "text/plain");
}

// A 256 MiB PutObject through the door streams: fencepost's peak resident
// set grows by less than 64 MiB, and RGW holds all of it (its size, and
// the MD5 of the bytes sent as its ETag). Seen failing: with --max-body
// 512 MiB, the body read whole before it was sent, VmHWM grew by 1 GiB.
TEST(S3DoorLargeTest, A256MiBPutObjectStreamsInBoundedMemory) {
  Rgw& rgw = Rgw::Shared();
  const std::string prefix = rgw.UniquePrefix("large-256");
  Door door(prefix, {"--max-body", kMaxBody});
  // The first streamed body sets up what every one uses.
  ASSERT_EQ(Put(door, "warm", Bytes(std::size_t{1} << 20, 8), "1").status, 200);
  const std::size_t before = door.server().PeakRss();
  ASSERT_GT(before, 0u);
  constexpr std::size_t kSize = std::size_t{256} << 20;
  const std::string body = Bytes(kSize, 9);
  const http::Request request =
      Signed(door, bhttp::verb::put, "big", body, {}, {{"Fencing-Token", "1"}});
  std::ostringstream head;
  head << request.base();
  const auto start = std::chrono::steady_clock::now();
  HttpClient client(door.port(), 120);
  client.Send(head.str());
  client.Send(request.body());
  const HttpResponse answer = client.ReadResponse();
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
          .count();
  ASSERT_EQ(answer.status, 200) << answer.body;
  const std::size_t after = door.server().PeakRss();
  // The kernel's counters are synced lazily: a later read of VmHWM may be a
  // few pages below an earlier one.
  const std::size_t grown = after > before ? after - before : 0;
  std::printf(
      "256 MiB PutObject through the door: %.1f s; VmHWM %zu -> %zu "
      "KiB (+%zu KiB)\n",
      seconds, before >> 10, after >> 10, grown >> 10);
  EXPECT_LT(grown, std::size_t{64} << 20);
  S3Object object = rgw.Head(prefix + "big");
  EXPECT_EQ(object.content_length, static_cast<std::int64_t>(kSize));
  EXPECT_EQ(object.etag, "\"" + HexMd5(body) + "\"");
  EXPECT_EQ(object.metadata["fencing-token"], "1");
}

}  // namespace
}  // namespace fencepost::testing
