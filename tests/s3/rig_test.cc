// The S3 test rig works against a real Ceph RGW: the cluster shared by the
// process (tests/testing/rgw.h), the independent boto3 client, the gateway
// stopped, started, paused, and the relay that loses an answer after the
// store acted (tests/testing/answer_dropper.h).

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "tests/testing/answer_dropper.h"
#include "tests/testing/rgw.h"

namespace fencepost::testing {
namespace {

using std::chrono::milliseconds;

// A plain TCP connection to 127.0.0.1:PORT for hand-written requests.
class RawConnection {
 public:
  explicit RawConnection(std::uint16_t port)
      : fd_(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0)) {
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_port = htons(port);
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    connected_ = ::connect(fd_, reinterpret_cast<sockaddr*>(&address),
                           sizeof address) == 0;
  }
  ~RawConnection() { ::close(fd_); }
  RawConnection(const RawConnection&) = delete;
  RawConnection& operator=(const RawConnection&) = delete;

  bool connected() const { return connected_; }
  bool Send(const std::string& bytes) {
    return ::send(fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL) ==
           static_cast<ssize_t>(bytes.size());
  }
  // What arrives within `wait`, until the peer closes or `enough` bytes
  // are in (a bound, not a speed: the callers wait for an answer that
  // comes, or check that nothing came while nothing could).
  std::string Receive(milliseconds wait, std::size_t enough = 1) {
    std::string got;
    const auto deadline = std::chrono::steady_clock::now() + wait;
    while (got.size() < enough) {
      const auto left = std::chrono::duration_cast<milliseconds>(
          deadline - std::chrono::steady_clock::now());
      pollfd p = {fd_, POLLIN, 0};
      if (left.count() <= 0 || ::poll(&p, 1, left.count()) <= 0) break;
      char buffer[4096];
      const ssize_t n = ::recv(fd_, buffer, sizeof buffer, 0);
      if (n <= 0) {
        closed_ = true;
        break;
      }
      got.append(buffer, n);
    }
    return got;
  }
  bool closed() const { return closed_; }

 private:
  int fd_;
  bool connected_ = false;
  bool closed_ = false;
};

// RGW's whole answer to an anonymous GET /: its ListAllMyBucketsResult for
// nobody, chunked, to the last chunk.
bool HasWholeAnswer(const std::string& got) {
  return got.starts_with("HTTP/1.1 200") &&
         got.find("</ListAllMyBucketsResult>") != std::string::npos &&
         got.ends_with("\r\n0\r\n\r\n");
}

constexpr milliseconds kAnswerWithin{30000};

TEST(S3RigTest, OneClusterIsSharedByTheProcess) {
  Rgw& rgw = Rgw::Shared();
  EXPECT_EQ(&rgw, &Rgw::Shared());
  EXPECT_EQ(rgw.endpoint(), "http://127.0.0.1:" + std::to_string(rgw.port()));
  EXPECT_EQ(rgw.bucket(), "fencepost");
  EXPECT_FALSE(rgw.access_key_id().empty());
  EXPECT_FALSE(rgw.secret_access_key().empty());
  EXPECT_GT(rgw.gateway_pid(), 0);
  EXPECT_NE(rgw.UniquePrefix("a"), rgw.UniquePrefix("a"));
  const S3Object missing = rgw.Head(rgw.UniquePrefix("shared") + "missing");
  EXPECT_EQ(missing.status, 404);
  EXPECT_EQ(missing.error, "NotFound");
  const S3Object missing_get = rgw.Get(rgw.UniquePrefix("shared") + "missing");
  EXPECT_EQ(missing_get.status, 404);
  EXPECT_EQ(missing_get.error, "NoSuchKey");
}

TEST(S3RigTest, ObjectsReadBackByteExactWithTheirMetadata) {
  Rgw& rgw = Rgw::Shared();
  const std::string prefix = rgw.UniquePrefix("exact");
  std::string body;
  for (int i = 0; i < 1024; ++i) body.push_back(static_cast<char>(i % 256));
  std::vector<std::string> keys = {
      prefix + "a key with spaces", prefix + "plus+and%25percent%",
      prefix + "\xc3\xa9t\xc3\xa9/\xe6\x97\xa5/\xf0\x9f\x94\x91"};
  keys.push_back(prefix + std::string(1024 - prefix.size(), 'k'));
  ASSERT_EQ(keys.back().size(), 1024u);
  std::vector<std::string> etags;
  for (const std::string& key : keys) {
    S3Put put;
    put.metadata = {{"fencing-token", "33"}, {"writer", "b c"}};
    put.content_type = "application/x-rig";
    const S3Object stored = rgw.Put(key, body + key, put);
    ASSERT_EQ(stored.status, 200) << key << ": " << stored.error;
    ASSERT_TRUE(stored.etag.starts_with('"')) << stored.etag;
    etags.push_back(stored.etag);
  }
  // Listed in the order of their UTF-8 bytes.
  EXPECT_EQ(rgw.List(prefix),
            (std::vector<std::string>{keys[0], keys[3], keys[1], keys[2]}));
  for (std::size_t i = 0; i < keys.size(); ++i) {
    const S3Object got = rgw.Get(keys[i]);
    ASSERT_EQ(got.status, 200) << keys[i] << ": " << got.error;
    EXPECT_EQ(got.body, body + keys[i]);
    EXPECT_EQ(got.content_length, static_cast<std::int64_t>(got.body.size()));
    EXPECT_EQ(got.etag, etags[i]);
    EXPECT_EQ(got.content_type, "application/x-rig");
    EXPECT_EQ(got.metadata, (std::map<std::string, std::string>{
                                {"fencing-token", "33"}, {"writer", "b c"}}));
  }
}

// The precondition headers reach the store as given (boto3 1.26 has no
// parameters for them): RGW 16.2 refuses If-None-Match: * on an existing
// object and takes If-Match with the ETag unquoted.
TEST(S3RigTest, PreconditionsAreSentAsGiven) {
  Rgw& rgw = Rgw::Shared();
  const std::string key = rgw.UniquePrefix("conditional") + "k";
  const S3Object first = rgw.Put(key, "v1");
  ASSERT_EQ(first.status, 200) << first.error;
  S3Put create_only;
  create_only.if_none_match = "*";
  const S3Object refused = rgw.Put(key, "v2", create_only);
  EXPECT_EQ(refused.status, 412);
  EXPECT_EQ(refused.error, "PreconditionFailed");
  EXPECT_FALSE(refused.request_id.empty());
  S3Put matching;
  matching.if_match = first.etag.substr(1, first.etag.size() - 2);
  EXPECT_EQ(rgw.Put(key, "v3", matching).status, 200);
  EXPECT_EQ(rgw.Get(key).body, "v3");
  EXPECT_EQ(rgw.Delete(key).status, 204);
  EXPECT_EQ(rgw.Head(key).status, 404);
}

TEST(S3RigTest, ObjectsOutliveTheGatewaysRestart) {
  Rgw& rgw = Rgw::Shared();
  const std::string key = rgw.UniquePrefix("restart") + "kept";
  S3Put put;
  put.metadata = {{"fencing-token", "7"}};
  ASSERT_EQ(rgw.Put(key, "survives", put).status, 200);
  const pid_t before = rgw.gateway_pid();
  rgw.StopGateway();
  const S3Object unanswered = rgw.Head(key);
  EXPECT_EQ(unanswered.status, 0);
  EXPECT_NE(unanswered.error, "");
  rgw.StartGateway();
  EXPECT_NE(rgw.gateway_pid(), before);
  const S3Object got = rgw.Get(key);
  EXPECT_EQ(got.status, 200) << got.error;
  EXPECT_EQ(got.body, "survives");
  EXPECT_EQ(got.metadata,
            (std::map<std::string, std::string>{{"fencing-token", "7"}}));
}

TEST(S3RigTest, APausedGatewayAnswersOnlyOnceResumed) {
  Rgw& rgw = Rgw::Shared();
  rgw.PauseGateway();
  RawConnection connection(rgw.port());  // the kernel still accepts
  ASSERT_TRUE(connection.connected());
  ASSERT_TRUE(connection.Send("GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"));
  // Nothing can come from a stopped process; the wait only bounds the look.
  const std::string meanwhile = connection.Receive(milliseconds(300));
  rgw.ResumeGateway();
  EXPECT_EQ(meanwhile, "");
  std::string answer = connection.Receive(kAnswerWithin);
  while (!HasWholeAnswer(answer) && !connection.closed()) {
    const std::string more = connection.Receive(kAnswerWithin);
    if (more.empty()) break;
    answer += more;
  }
  EXPECT_TRUE(HasWholeAnswer(answer)) << answer;
}

// The dropper loses the answer to a PUT that RGW applied: the client sees
// its connection closed without an answer, the object is there.
TEST(S3RigTest, TheDropperLosesAnAnswerAfterTheStoreAppliedThePut) {
  Rgw& rgw = Rgw::Shared();
  AnswerDropper dropper("127.0.0.1", rgw.port());
  const std::string prefix = rgw.UniquePrefix("dropped");
  dropper.DropAnswersTo("PUT", "/" + prefix, 1);
  S3Put through;
  through.endpoint = dropper.endpoint();
  through.metadata = {{"fencing-token", "34"}};
  const S3Object lost = rgw.Put(prefix + "applied", "landed", through);
  EXPECT_EQ(lost.status, 0);
  EXPECT_NE(lost.error.find("Connection"), std::string::npos) << lost.error;
  EXPECT_EQ(dropper.dropped(), 1);
  EXPECT_EQ(dropper.requests("PUT"), 1);
  const S3Object got = rgw.Get(prefix + "applied");
  EXPECT_EQ(got.status, 200) << got.error;
  EXPECT_EQ(got.body, "landed");
  EXPECT_EQ(got.metadata,
            (std::map<std::string, std::string>{{"fencing-token", "34"}}));
  // One answer was to be lost: the next PUT is answered.
  const S3Object answered = rgw.Put(prefix + "answered", "too", through);
  EXPECT_EQ(answered.status, 200) << answered.error;
  EXPECT_EQ(dropper.dropped(), 1);
  EXPECT_EQ(dropper.requests("PUT"), 2);
}

// On one keep-alive connection, an answer is relayed, the next one (marked)
// is not and the connection ends; a paused dropper relays nothing until
// resumed.
TEST(S3RigTest, TheDropperPairsAnswersAndPauses) {
  Rgw& rgw = Rgw::Shared();
  AnswerDropper dropper("127.0.0.1", rgw.port());
  dropper.DropAnswersTo("GET", "/?drop-me", 1);
  RawConnection connection(dropper.port());
  ASSERT_TRUE(connection.connected());
  ASSERT_TRUE(connection.Send("GET /?keep HTTP/1.1\r\nHost: a\r\n\r\n"));
  std::string first;
  while (!HasWholeAnswer(first) && !connection.closed()) {
    const std::string more = connection.Receive(kAnswerWithin);
    if (more.empty()) break;
    first += more;
  }
  EXPECT_TRUE(HasWholeAnswer(first)) << first;
  ASSERT_TRUE(connection.Send("GET /?drop-me HTTP/1.1\r\nHost: a\r\n\r\n"));
  EXPECT_EQ(connection.Receive(kAnswerWithin), "");
  EXPECT_TRUE(connection.closed());
  EXPECT_EQ(dropper.dropped(), 1);
  EXPECT_EQ(dropper.requests("GET"), 2);

  dropper.Pause();
  RawConnection paused(dropper.port());
  ASSERT_TRUE(paused.connected());
  ASSERT_TRUE(paused.Send("GET / HTTP/1.1\r\nHost: a\r\n\r\n"));
  // Nothing is relayed while paused; the wait only bounds the look.
  const std::string meanwhile = paused.Receive(milliseconds(300));
  dropper.Resume();
  EXPECT_EQ(meanwhile, "");
  std::string answer;
  while (!HasWholeAnswer(answer) && !paused.closed()) {
    const std::string more = paused.Receive(kAnswerWithin);
    if (more.empty()) break;
    answer += more;
  }
  EXPECT_TRUE(HasWholeAnswer(answer)) << answer;
}

}  // namespace
}  // namespace fencepost::testing
