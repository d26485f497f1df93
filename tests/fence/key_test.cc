#include "fence/key.h"

#include <gtest/gtest.h>

namespace fencepost::fence {
namespace {

KeyError Decode(std::string_view target, std::string* key = nullptr) {
  std::string scratch;
  return DecodeKey(target, key != nullptr ? key : &scratch);
}

TEST(DecodeKeyTest, StripsSlashAndQueryAndDecodesOnce) {
  std::string key;
  ASSERT_EQ(Decode("/orders/1?x=1", &key), KeyError::kOk);
  EXPECT_EQ(key, "orders/1");
  ASSERT_EQ(Decode("/a%20b/%25252F", &key), KeyError::kOk);
  EXPECT_EQ(key, "a b/%252F") << "percent-decoding happens exactly once";
  ASSERT_EQ(Decode("/caf%C3%A9", &key), KeyError::kOk);
  EXPECT_EQ(key, "café");
  ASSERT_EQ(Decode("/a%2Fb", &key), KeyError::kOk);
  EXPECT_EQ(key, "a/b");
}

TEST(DecodeKeyTest, RejectsMalformedPercentEncoding) {
  EXPECT_EQ(Decode("/a%"), KeyError::kBadPercentEncoding);
  EXPECT_EQ(Decode("/a%2"), KeyError::kBadPercentEncoding);
  EXPECT_EQ(Decode("/a%zz"), KeyError::kBadPercentEncoding);
}

TEST(DecodeKeyTest, RejectsBadKeys) {
  EXPECT_EQ(Decode("/"), KeyError::kEmpty);
  EXPECT_EQ(Decode("/?q"), KeyError::kEmpty);
  EXPECT_EQ(Decode("//a"), KeyError::kEmptySegment);
  EXPECT_EQ(Decode("/a/"), KeyError::kEmptySegment);
  EXPECT_EQ(Decode("/a//b"), KeyError::kEmptySegment);
  EXPECT_EQ(Decode("/a/%2F/b"), KeyError::kEmptySegment);
  EXPECT_EQ(Decode("/./a"), KeyError::kDotSegment);
  EXPECT_EQ(Decode("/a/.."), KeyError::kDotSegment);
  EXPECT_EQ(Decode("/a/%2e%2e/b"), KeyError::kDotSegment);
  EXPECT_EQ(Decode("/a%00b"), KeyError::kNul);
  EXPECT_EQ(Decode("/a%FFb"), KeyError::kInvalidUtf8);
  EXPECT_EQ(Decode("/%C0%AF"), KeyError::kInvalidUtf8) << "overlong";
  EXPECT_EQ(Decode("/%ED%A0%80"), KeyError::kInvalidUtf8) << "surrogate";
}

TEST(ValidateKeyTest, LengthLimitIsBytes) {
  EXPECT_EQ(ValidateKey(std::string(1024, 'k')), KeyError::kOk);
  EXPECT_EQ(ValidateKey(std::string(1025, 'k')), KeyError::kTooLong);
  EXPECT_EQ(ValidateKey("a"), KeyError::kOk);
  EXPECT_EQ(ValidateKey("..a/.b/c."), KeyError::kOk) << "dots inside names";
}

TEST(Utf8Test, AcceptsAllPlanes) {
  EXPECT_TRUE(IsValidUtf8("a\xC3\xA9\xE2\x82\xAC\xF0\x9F\x98\x80"));
  EXPECT_FALSE(IsValidUtf8("\xF4\x90\x80\x80"));  // past U+10FFFF
  EXPECT_FALSE(IsValidUtf8("\xE2\x82"));          // truncated
}

}  // namespace
}  // namespace fencepost::fence
