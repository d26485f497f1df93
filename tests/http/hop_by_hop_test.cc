// StripHopByHop: what a proxy must not forward (RFC 9110 section 7.6.1).

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "http/fields.h"

namespace fencepost::http {
namespace {

namespace beast_http = boost::beast::http;

std::vector<std::string> Names(const beast_http::fields& fields) {
  std::vector<std::string> names;
  for (const auto& field : fields) names.emplace_back(field.name_string());
  return names;
}

TEST(StripHopByHopTest, RemovesTheFixedHopByHopFields) {
  beast_http::fields fields;
  fields.set("Content-Type", "text/plain");
  fields.set("Connection", "keep-alive");
  fields.set("Keep-Alive", "timeout=5");
  fields.set("Proxy-Connection", "keep-alive");
  fields.set("TE", "trailers");
  fields.set("Trailer", "X-Sum");
  fields.set("Transfer-Encoding", "chunked");
  fields.set("Upgrade", "h2c");
  fields.set("Fencing-Token", "7");
  StripHopByHop(fields);
  EXPECT_EQ(Names(fields),
            (std::vector<std::string>{"Content-Type", "Fencing-Token"}));
}

TEST(StripHopByHopTest, RemovesTheFieldsConnectionNames) {
  beast_http::fields fields;
  fields.insert("Connection", " x-private ,, X-Other\t");
  fields.insert("Connection", "x-third");
  fields.insert("X-Private", "1");
  fields.insert("X-Private", "2");
  fields.insert("x-other", "3");
  fields.insert("X-Third", "4");
  fields.insert("X-Kept", "5");
  StripHopByHop(fields);
  EXPECT_EQ(Names(fields), (std::vector<std::string>{"X-Kept"}))
      << "every Connection field, any case, around optional whitespace and "
         "empty list elements";
}

TEST(StripHopByHopTest, LeavesEndToEndFieldsAlone) {
  beast_http::fields fields;
  fields.set("Content-Length", "3");
  fields.set("Authorization", "Bearer t");
  fields.set("X-Connection-Id", "9");
  StripHopByHop(fields);
  EXPECT_EQ(Names(fields),
            (std::vector<std::string>{"Content-Length", "Authorization",
                                      "X-Connection-Id"}));
}

}  // namespace
}  // namespace fencepost::http
