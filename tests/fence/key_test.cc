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

TEST(DecodeKeyTest, TakesOnlyOriginFormTargets) {
  EXPECT_EQ(Decode(""), KeyError::kNotOriginForm);
  EXPECT_EQ(Decode("orders/9"), KeyError::kNotOriginForm);
  EXPECT_EQ(Decode("-admin/cfg"), KeyError::kNotOriginForm);
  EXPECT_EQ(Decode("http://host/orders/9"), KeyError::kNotOriginForm);
  EXPECT_EQ(Decode("host:80"), KeyError::kNotOriginForm);
  EXPECT_EQ(Decode("*"), KeyError::kNotOriginForm);
  EXPECT_EQ(Decode("?q=1"), KeyError::kNotOriginForm);
}

TEST(DecodeKeyTest, RefusesFragmentsAndRawCharactersStoresReadDifferently) {
  EXPECT_EQ(Decode("/orders/7#zombie"), KeyError::kFragment);
  EXPECT_EQ(Decode("/orders/7#"), KeyError::kFragment);
  EXPECT_EQ(Decode("/orders/7?x=1#z"), KeyError::kFragment);
  EXPECT_EQ(Decode("/a\\b"), KeyError::kBadCharacter);
  EXPECT_EQ(Decode("/a b"), KeyError::kBadCharacter);
  EXPECT_EQ(Decode("/a\"b"), KeyError::kBadCharacter);
  EXPECT_EQ(Decode("/caf\xC3\xA9"), KeyError::kBadCharacter);
  EXPECT_EQ(Decode("/a?b c"), KeyError::kBadCharacter);
  EXPECT_EQ(Decode("/a?b%zz"), KeyError::kBadPercentEncoding);
  std::string key;
  ASSERT_EQ(Decode("/a%23b?q=1/?", &key), KeyError::kOk);
  EXPECT_EQ(key, "a#b") << "an encoded '#' is a plain byte of the key";
  ASSERT_EQ(Decode("/!$&'()*+,;=:@-._~", &key), KeyError::kOk);
  EXPECT_EQ(key, "!$&'()*+,;=:@-._~");
}

TEST(EncodeKeyTest, IsTheCanonicalSpellingThatDecodesBack) {
  EXPECT_EQ(EncodeKey("orders/7"), "orders/7");
  EXPECT_EQ(EncodeKey("a b;c#d?e%f\\g"), "a%20b%3Bc%23d%3Fe%25f%5Cg");
  EXPECT_EQ(EncodeKey("caf\xC3\xA9~"), "caf%C3%A9~");
  for (const std::string target :
       {"/A%7eB", "/A~B", "/caf%c3%a9", "/semi;colon", "/a%2Fb", "/x%0Ay",
        "/p%5Cq", "/%25252F", "/plus+sign"}) {
    std::string key, again;
    ASSERT_EQ(Decode(target, &key), KeyError::kOk) << target;
    ASSERT_EQ(Decode("/" + EncodeKey(key), &again), KeyError::kOk) << target;
    EXPECT_EQ(again, key) << target;
  }
  EXPECT_EQ(QueryOf("/a?b=1?c"), "?b=1?c");
  EXPECT_EQ(QueryOf("/a"), "");
}

TEST(ValidateKeyTest, LengthLimitIsBytes) {
  EXPECT_EQ(ValidateKey(std::string(1024, 'k')), KeyError::kOk);
  EXPECT_EQ(ValidateKey(std::string(1025, 'k')), KeyError::kTooLong);
  EXPECT_EQ(ValidateKey("a"), KeyError::kOk);
  EXPECT_EQ(ValidateKey("..a/.b/c."), KeyError::kOk) << "dots inside names";
}

// A fence's or a lease's name on the admin port: a key, or exactly a
// configured scope's prefix, which need not be a key.
TEST(DecodeNameTest, AScopesPrefixIsANameThoughNotAKey) {
  const Scopes scopes({"orders/", "a//b/", "plain"});
  std::string name;
  ASSERT_EQ(DecodeName("/orders/?wait_above=1", scopes, &name), KeyError::kOk);
  EXPECT_EQ(name, "orders/");
  ASSERT_EQ(DecodeName("/orders%2F", scopes, &name), KeyError::kOk);
  EXPECT_EQ(name, "orders/");
  ASSERT_EQ(DecodeName("/a//b/", scopes, &name), KeyError::kOk);
  EXPECT_EQ(name, "a//b/");
  ASSERT_EQ(DecodeName("/orders/1", scopes, &name), KeyError::kOk);
  EXPECT_EQ(name, "orders/1");
  ASSERT_EQ(DecodeName("/plain", scopes, &name), KeyError::kOk);
  // What is neither fails as DecodeKey does.
  EXPECT_EQ(DecodeName("/other/", scopes, &name), KeyError::kEmptySegment);
  EXPECT_EQ(DecodeName("/orders//", scopes, &name), KeyError::kEmptySegment);
  EXPECT_EQ(DecodeName("/orders/#", scopes, &name), KeyError::kFragment);
  EXPECT_EQ(DecodeName("orders/", scopes, &name), KeyError::kNotOriginForm);
  EXPECT_EQ(DecodeName("/orders/", Scopes({}), &name), KeyError::kEmptySegment);
}

}  // namespace
}  // namespace fencepost::fence
