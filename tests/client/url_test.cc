#include <gtest/gtest.h>

#include <chrono>
#include <stdexcept>

#include "client/client.h"
#include "tests/client/helpers.h"
#include "tests/testing/bounds.h"

namespace fencepost::client {
namespace {

using std::chrono::milliseconds;
using testing::RefusingPort;
using testing::SilentListener;

TEST(UrlTest, ReadsHttpAndHttpsBaseUrls) {
  Url url = Url::Parse("http://127.0.0.1:7401");
  EXPECT_FALSE(url.tls);
  EXPECT_EQ(url.host, "127.0.0.1");
  EXPECT_EQ(url.port, 7401);
  EXPECT_EQ(url.ToString(), "http://127.0.0.1:7401");

  url = Url::Parse("https://fencepost.internal/");
  EXPECT_TRUE(url.tls);
  EXPECT_EQ(url.host, "fencepost.internal");
  EXPECT_EQ(url.port, 443);

  url = Url::Parse("HTTP://[::1]:8080");
  EXPECT_EQ(url.host, "::1");
  EXPECT_EQ(url.port, 8080);
  EXPECT_EQ(url.ToString(), "http://[::1]:8080");
  EXPECT_EQ(Url::Parse("http://h").port, 80);
}

TEST(UrlTest, RefusesWhatIsNotABaseUrl) {
  for (const char* text :
       {"", "127.0.0.1:7401", "ftp://h:1", "http://", "http://:7401",
        "http://h:", "http://h:0", "http://h:65536", "http://h:99999999999",
        "http://h:8a", "http://h/v1", "http://h?x=1", "http://h#f",
        "http://user@h", "http://[::1", "http://[nope]:1", "http://[::1]x",
        "http://h h:1", "https//h"}) {
    EXPECT_THROW(Url::Parse(text), std::invalid_argument) << text;
  }
}

TEST(UrlTest, EncodesKeysPerByte) {
  EXPECT_EQ(EncodeKey("orders/2024/a-b_c.d~e"), "orders/2024/a-b_c.d~e");
  EXPECT_EQ(EncodeKey("a b%?#+"), "a%20b%25%3F%23%2B");
  EXPECT_EQ(EncodeKey("caf\xc3\xa9"), "caf%C3%A9");
}

TEST(ClientTest, ConstructorRefusesBadUrlsAndCaFiles) {
  EXPECT_THROW(Client(testing::Options("ftp://127.0.0.1:1")),
               std::invalid_argument);
  EXPECT_THROW(
      Client(testing::Options("https://127.0.0.1:1", std::chrono::seconds(5),
                              "/nonexistent/ca.pem")),
      std::runtime_error);
  EXPECT_NO_THROW(Client(testing::Options("http://127.0.0.1:1")));
}

TEST(ClientTest, RefusesToSendWhatCannotGoOnTheWire) {
  // Nothing listens on port 1: a request that were sent would fail to
  // connect instead.
  Client client(testing::Options("http://127.0.0.1:1"));
  EXPECT_EQ(client.Send("GET", "/k", {{"X-A", "v\r\nX-Smuggled: 1"}}).error,
            Errc::kBadRequest);
  EXPECT_EQ(client.Send("GET", "/k", {{"Bad Name", "v"}}).error,
            Errc::kBadRequest);
  EXPECT_EQ(client.Send("G T", "/k").error, Errc::kBadRequest);
  EXPECT_EQ(client.Send("GET", "k").error, Errc::kBadRequest);
  EXPECT_EQ(client.Send("GET", "/a b").error, Errc::kBadRequest);
  EXPECT_EQ(client.Send("TRACE", "/k", {}, "body").error, Errc::kBadRequest);
  EXPECT_EQ(client.Send("GET", "/k").error, Errc::kConnectFailed);
  Client::Options options = testing::Options("http://127.0.0.1:1");
  options.bearer_token = "a\nb";
  EXPECT_EQ(Client(options).Get("k").error, Errc::kBadRequest);
}

TEST(ClientTest, NothingListeningIsAConnectError) {
  const RefusingPort refusing;
  Client client(
      testing::Options("http://127.0.0.1:" + std::to_string(refusing.port()),
                       milliseconds(2000)));
  const Result result = client.GetFence("k");
  EXPECT_EQ(result.error, Errc::kConnectFailed) << result.detail;
  EXPECT_FALSE(result.ok());
  EXPECT_NE(result.detail.find("127.0.0.1"), std::string::npos);
}

TEST(ClientTest, ASilentServerTimesOutOnTime) {
  SilentListener silent;
  Client client(testing::Options(
      "http://127.0.0.1:" + std::to_string(silent.port()), milliseconds(300)));
  const auto start = std::chrono::steady_clock::now();
  const Result result = client.Put("k", 1, "v");
  const auto took = std::chrono::steady_clock::now() - start;
  EXPECT_EQ(result.error, Errc::kTimedOut) << result.detail;
  EXPECT_GE(took, milliseconds(290));
  EXPECT_LT(took, milliseconds(300) + fencepost::testing::kNoHang);
}

TEST(ClientTest, AnUnresolvableHostIsAResolveError) {
  Client client(testing::Options("http://fencepost-test.invalid:7401",
                                 milliseconds(5000)));
  const Result result = client.Get("k");
  EXPECT_TRUE(result.error == Errc::kResolveFailed ||
              result.error == Errc::kTimedOut)
      << result.detail;
}

}  // namespace
}  // namespace fencepost::client
