#include "codec/base64.h"

#include <gtest/gtest.h>

#include <string>

namespace fencepost::codec {
namespace {

// RFC 4648 section 10.
TEST(Base64Test, WritesTheRfcVectors) {
  EXPECT_EQ(EncodeBase64(""), "");
  EXPECT_EQ(EncodeBase64("f"), "Zg==");
  EXPECT_EQ(EncodeBase64("fo"), "Zm8=");
  EXPECT_EQ(EncodeBase64("foo"), "Zm9v");
  EXPECT_EQ(EncodeBase64("foob"), "Zm9vYg==");
  EXPECT_EQ(EncodeBase64("fooba"), "Zm9vYmE=");
  EXPECT_EQ(EncodeBase64("foobar"), "Zm9vYmFy");
  EXPECT_EQ(EncodeBase64("\xfb\xff"), "+/8=");
}

// Every length (each padding) and every byte value, there and back.
TEST(Base64Test, DecodesWhatItEncodes) {
  std::string bytes;
  for (int n = 0; n < 300; ++n) {
    const std::string text = EncodeBase64(bytes);
    std::string back = "left over";
    ASSERT_TRUE(DecodeBase64(text, &back)) << text;
    EXPECT_EQ(back, bytes) << n;
    bytes.push_back(static_cast<char>(n * 37 + 11));
  }
}

// One encoding per value: what EncodeBase64 never writes is refused.
TEST(Base64Test, RefusesEveryOtherSpelling) {
  std::string bytes;
  for (const char* text : {"Zg", "Zg=", "Zm9", "Zh==", "Zm9=", "Zm8/Zg==x",
                           "Zg==Zg==", "Z===", "Zm=v", "Zm9v\n", " Zm9v",
                           "Zm9-", "Zm9_", "Zm9v====", "=Zm9"}) {
    EXPECT_FALSE(DecodeBase64(text, &bytes)) << text;
  }
}

}  // namespace
}  // namespace fencepost::codec
