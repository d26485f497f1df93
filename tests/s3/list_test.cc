// S3Backend::List against a real Ceph RGW (tests/testing/rgw.h): the
// backend in this process over s3://BUCKET/PREFIX of the shared bucket,
// objects put with the independent client (boto3), the client's
// ListBucketResult read back here. What must hold: the keys under PREFIX
// and only those, without PREFIX; delimiters and common prefixes; pages of
// two walking every key exactly once through the rewritten tokens;
// start-after; keys of spaces, &, <, + and UTF-8 exactly as they were put.

// clang-format off
// Boost 1.74's awaitable.hpp uses std::exchange without including <utility>.
#include <utility>
// clang-format on

#include <gtest/gtest.h>

#include <algorithm>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "codec/base64.h"
#include "codec/percent.h"
#include "sigv4/canonical.h"
#include "storage/backend_spec.h"
#include "storage/errc.h"
#include "storage/s3_backend.h"
#include "tests/testing/rgw.h"
#include "tests/testing/stub_fences.h"

namespace fencepost::testing {
namespace {

namespace asio = boost::asio;
namespace bhttp = boost::beast::http;
using storage::ReadResult;

// Fences nobody asks for: List never touches them.
class NoFences : public StubFences {
 public:
  void Submit(fence::FenceWrite, fence::WriteDone) override {
    ADD_FAILURE() << "a listing wrote a fence";
  }
};

// The client's listing as this test reads it (the writer's escapes: the
// five named entities and &#13;).
struct Page {
  std::vector<std::string> keys;
  std::vector<std::string> common_prefixes;
  std::string key_count;
  std::string is_truncated;
  std::string next_token;
  std::string xml;
};

std::string Unescape(std::string text) {
  const std::pair<std::string, std::string> entities[] = {
      {"&lt;", "<"},   {"&gt;", ">"},   {"&quot;", "\""},
      {"&#13;", "\r"}, {"&apos;", "'"}, {"&amp;", "&"}};
  std::string out;
  for (std::size_t i = 0; i < text.size();) {
    bool replaced = false;
    for (const auto& [from, to] : entities) {
      if (text.compare(i, from.size(), from) == 0) {
        out += to;
        i += from.size();
        replaced = true;
        break;
      }
    }
    if (!replaced) out.push_back(text[i++]);
  }
  return out;
}

// Every text of <tag> in `xml`, in order.
std::vector<std::string> All(const std::string& xml, const std::string& tag) {
  std::vector<std::string> out;
  const std::string open = "<" + tag + ">", close = "</" + tag + ">";
  for (std::size_t at = xml.find(open); at != std::string::npos;
       at = xml.find(open, at + 1)) {
    const std::size_t from = at + open.size();
    out.push_back(Unescape(xml.substr(from, xml.find(close, from) - from)));
  }
  return out;
}

Page ReadPage(const std::string& xml) {
  Page page;
  page.xml = xml;
  page.keys = All(xml, "Key");
  std::size_t prefixes = xml.find("<CommonPrefixes>");
  if (prefixes != std::string::npos) {
    page.common_prefixes = All(xml.substr(prefixes), "Prefix");
  }
  const auto one = [&xml](const std::string& tag) {
    const std::vector<std::string> all = All(xml, tag);
    return all.empty() ? std::string() : all.front();
  };
  page.key_count = one("KeyCount");
  page.is_truncated = one("IsTruncated");
  page.next_token = one("NextContinuationToken");
  return page;
}

class S3ListTest : public ::testing::Test {
 protected:
  // Keys under PREFIX, in the store's (byte) order.
  static std::vector<std::string> Keys() {
    std::vector<std::string> keys = {
        "a",     "b b",     "c&d<e>'\"", "dir/x",
        "dir/y", "dir/z/w", "p+q%20r",   "\xc3\xa9t\xc3\xa9 \xe2\x82\xac"};
    std::sort(keys.begin(), keys.end());
    return keys;
  }

  static void SetUpTestSuite() {
    Rgw& rgw = Rgw::Shared();
    prefix_ = new std::string(rgw.UniquePrefix("list"));
    for (const std::string& key : Keys()) {
      ASSERT_EQ(rgw.Put(*prefix_ + key, "v").status, 200) << key;
    }
    // Beside PREFIX: a key that starts with its name, and PREFIX/ itself.
    const std::string bare = prefix_->substr(0, prefix_->size() - 1);
    ASSERT_EQ(rgw.Put(bare + "x/hidden", "no").status, 200);
    ASSERT_EQ(rgw.Put(*prefix_, "").status, 200);
  }
  static void TearDownTestSuite() {
    delete prefix_;
    prefix_ = nullptr;
  }

  static storage::S3Backend::Options OptionsFor(
      const std::string& secret_access_key) {
    Rgw& rgw = Rgw::Shared();
    storage::S3Backend::Options options;
    options.spec = storage::ParseBackendSpec(
        "s3://" + rgw.bucket() + "/" + prefix_->substr(0, prefix_->size() - 1));
    options.location.endpoint =
        s3::ParseEndpoint("http://127.0.0.1:" + std::to_string(rgw.port()));
    options.location.bucket = rgw.bucket();
    options.location.region = rgw.region();
    options.credentials = {rgw.access_key_id(),
                           sigv4::Secret(secret_access_key), sigv4::Secret()};
    return options;
  }

  // The backend's answer to GET /BUCKET?`query` (run on this thread's io).
  ReadResult List(const std::string& query,
                  storage::S3Backend* backend = nullptr) {
    if (backend == nullptr) backend = &backend_;
    const storage::HttpRequest request(
        bhttp::verb::get, "/" + Rgw::Shared().bucket() + "?" + query, 11);
    std::optional<ReadResult> result;
    asio::co_spawn(
        io_,
        [&]() -> Awaitable<void> { result = co_await backend->List(request); },
        asio::detached);
    io_.restart();
    while (!result && io_.run_one() > 0) {
    }
    return std::move(*result);
  }

  // The page of `query`, which must be answered 200.
  Page ListPage(const std::string& query) {
    const ReadResult result = List(query);
    EXPECT_FALSE(result.error) << result.error.message() << result.detail;
    if (!result.upstream) return {};
    EXPECT_EQ(result.upstream->result_int(), 200);
    EXPECT_EQ((*result.upstream)[bhttp::field::content_type],
              "application/xml");
    EXPECT_EQ((*result.upstream)[bhttp::field::content_length],
              std::to_string(result.upstream->body().size()));
    const Page page = ReadPage(result.upstream->body());
    // Nothing of PREFIX ever reaches the client.
    EXPECT_EQ(page.xml.find(prefix_->substr(0, prefix_->size() - 1)),
              std::string::npos)
        << page.xml;
    return page;
  }

  static std::string* prefix_;
  asio::io_context io_;
  NoFences fences_;
  storage::S3Backend backend_{
      io_, OptionsFor(Rgw::Shared().secret_access_key()), fences_};
};

std::string* S3ListTest::prefix_ = nullptr;

TEST_F(S3ListTest, KeysUnderPrefixAreListedWithoutItAndNothingElse) {
  const Page page = ListPage("list-type=2");
  EXPECT_EQ(page.keys, Keys()) << page.xml;
  EXPECT_EQ(page.key_count, std::to_string(Keys().size()));
  EXPECT_EQ(page.is_truncated, "false");
  EXPECT_EQ(page.xml.find("hidden"), std::string::npos);
  EXPECT_NE(page.xml.find("<Name>" + Rgw::Shared().bucket() + "</Name>"),
            std::string::npos);
  // A prefix of the client's is within PREFIX, never beside it.
  EXPECT_EQ(ListPage("list-type=2&prefix=dir%2F").keys,
            (std::vector<std::string>{"dir/x", "dir/y", "dir/z/w"}));
  EXPECT_TRUE(ListPage("list-type=2&prefix=..%2F").keys.empty());
  EXPECT_TRUE(ListPage("list-type=2&prefix=x%2F").keys.empty());
}

TEST_F(S3ListTest, ADelimiterGivesCommonPrefixes) {
  Page page = ListPage("list-type=2&delimiter=%2F");
  std::vector<std::string> top;
  for (const std::string& key : Keys()) {
    if (key.find('/') == std::string::npos) top.push_back(key);
  }
  EXPECT_EQ(page.keys, top) << page.xml;
  EXPECT_EQ(page.common_prefixes, std::vector<std::string>{"dir/"});
  EXPECT_EQ(page.key_count, std::to_string(top.size() + 1));

  page = ListPage("list-type=2&delimiter=%2F&prefix=dir%2F");
  EXPECT_EQ(page.keys, (std::vector<std::string>{"dir/x", "dir/y"}));
  EXPECT_EQ(page.common_prefixes, std::vector<std::string>{"dir/z/"});
}

TEST_F(S3ListTest, PagesOfTwoWalkEveryKeyExactlyOnce) {
  for (const std::string delimiter : {"", "&delimiter=%2F"}) {
    std::vector<std::string> walked;
    std::string token;
    int pages = 0;
    for (;;) {
      std::string query = "list-type=2&max-keys=2" + delimiter;
      if (!token.empty()) {
        query += "&continuation-token=" + sigv4::UriEncode(token, false);
      }
      const Page page = ListPage(query);
      ASSERT_LE(page.keys.size() + page.common_prefixes.size(), 2u) << page.xml;
      walked.insert(walked.end(), page.keys.begin(), page.keys.end());
      walked.insert(walked.end(), page.common_prefixes.begin(),
                    page.common_prefixes.end());
      ASSERT_LT(++pages, 20) << "the walk does not end";
      if (page.is_truncated != "true") break;
      ASSERT_NE(page.next_token, "") << page.xml;
      // The token the client holds names no part of PREFIX either.
      std::string bytes;
      ASSERT_TRUE(codec::DecodeBase64(page.next_token, &bytes));
      EXPECT_EQ(bytes.find(prefix_->substr(0, prefix_->size() - 1)),
                std::string::npos);
      token = page.next_token;
    }
    std::vector<std::string> expected;
    for (const std::string& key : Keys()) {
      if (delimiter.empty() || key.find('/') == std::string::npos) {
        expected.push_back(key);
      }
    }
    if (!delimiter.empty()) expected.push_back("dir/");
    std::sort(expected.begin(), expected.end());
    std::sort(walked.begin(), walked.end());
    EXPECT_EQ(walked, expected) << "delimiter " << delimiter;
    EXPECT_GE(pages, 4);
  }
}

TEST_F(S3ListTest, StartAfterIsWithinPrefix) {
  const std::vector<std::string> keys = Keys();
  const auto from = std::upper_bound(keys.begin(), keys.end(), "b b");
  const Page page = ListPage("list-type=2&start-after=b%20b");
  EXPECT_EQ(page.keys, std::vector<std::string>(from, keys.end())) << page.xml;
  EXPECT_NE(page.xml.find("<StartAfter>b b</StartAfter>"), std::string::npos)
      << page.xml;
}

TEST_F(S3ListTest, UrlEncodingIsTheClientsKeysPercentEncoded) {
  const Page page = ListPage("list-type=2&encoding-type=url");
  std::vector<std::string> decoded;
  for (const std::string& key : page.keys) {
    EXPECT_EQ(key.find_first_of(" &<\"'\xc3"), std::string::npos) << key;
    decoded.push_back(
        codec::PercentDecode(key, codec::PercentMode::kStrict).value_or("?"));
  }
  EXPECT_EQ(decoded, Keys()) << page.xml;
  EXPECT_NE(page.xml.find("<EncodingType>url</EncodingType>"),
            std::string::npos);
}

// A token is the client's to hold, not to forge: whatever it says, the
// store is asked within PREFIX.
TEST_F(S3ListTest, AMadeUpTokenCannotWidenTheListing) {
  for (const std::string& made_up :
       {std::string("t") + "a", std::string("t") + "", std::string("k") + "..",
        std::string("t") + *prefix_ + "zzz", std::string("k") + "\xff"}) {
    const ReadResult result =
        List("list-type=2&continuation-token=" +
             sigv4::UriEncode(codec::EncodeBase64(made_up), false));
    if (result.error) continue;  // the store refused it: nothing listed
    ASSERT_TRUE(result.upstream);
    const std::vector<std::string> keys = Keys();
    for (const std::string& key : ReadPage(result.upstream->body()).keys) {
      EXPECT_TRUE(std::binary_search(keys.begin(), keys.end(), key)) << key;
    }
  }
}

TEST_F(S3ListTest, RefusalsAndTheStoresErrors) {
  for (const std::string query :
       {"list-type=2&marker=a", "prefix=a", "list-type=2&max-keys=x",
        "list-type=2&continuation-token=bm9wZQ%3D%3D"}) {
    const ReadResult result = List(query);
    EXPECT_EQ(result.error, std::errc::invalid_argument) << query;
    EXPECT_NE(result.detail, "") << query;
    EXPECT_FALSE(result.upstream);
  }
  storage::S3Backend wrong(io_, OptionsFor("not-the-secret"), fences_);
  const ReadResult refused = List("list-type=2", &wrong);
  EXPECT_EQ(refused.error, storage::Errc::kStoreRefused);
  ASSERT_TRUE(refused.store_error);
  EXPECT_EQ(refused.store_error->status, 403u);
  EXPECT_EQ(refused.store_error->code, "SignatureDoesNotMatch");
  EXPECT_FALSE(refused.upstream);
}

}  // namespace
}  // namespace fencepost::testing
