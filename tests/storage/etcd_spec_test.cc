#include <gtest/gtest.h>

#include <string>

#include "http/json.h"
#include "storage/etcd_client.h"

namespace fencepost::storage {
namespace {

TEST(EtcdSpecTest, EndpointsAndPrefix) {
  EtcdSpec spec;
  ASSERT_EQ(ParseEtcdSpec("etcd://a:1,b:2,[::1]:3//x/y//", &spec), "");
  ASSERT_EQ(spec.endpoints.size(), 3u);
  EXPECT_EQ(spec.endpoints[2].host, "::1");
  EXPECT_EQ(spec.endpoints[2].port, "3");
  EXPECT_EQ(spec.prefix, "/x/y");
  ASSERT_EQ(ParseEtcdSpec("etcd://a:1/", &spec), "");
  EXPECT_EQ(spec.prefix, "fencepost");
  for (const char* bad : {"", "etcd://", "etcd://a", "etcd://a:1,,b:2",
                          "etcd://:1", "etcd://a:65536", "etcd://[::1:1"}) {
    EXPECT_NE(ParseEtcdSpec(bad, &spec), "") << bad;
  }
}

// etcd's JSON carries keys and values in base64: every length's padding,
// and every byte value, round-trips through the JSON layer's decoder.
TEST(EtcdSpecTest, Base64RoundTrips) {
  std::string all;
  for (int b = 0; b < 256; ++b) all += static_cast<char>(b);
  for (std::size_t n = 0; n <= all.size(); n += (n < 8 ? 1 : 37)) {
    const std::string bytes = all.substr(0, n);
    std::string back;
    ASSERT_TRUE(http::DecodeBase64(EncodeBase64(bytes), &back)) << n;
    EXPECT_EQ(back, bytes) << n;
  }
  EXPECT_EQ(EncodeBase64("fencepost/fences/k"), "ZmVuY2Vwb3N0L2ZlbmNlcy9r");
  EXPECT_EQ(EncodeBase64("ab"), "YWI=");
}

}  // namespace
}  // namespace fencepost::storage
