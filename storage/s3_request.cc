#include "storage/s3_request.h"

#include <utility>

#include "codec/percent.h"
#include "fence/token.h"
#include "s3/request.h"
#include "sigv4/crypto.h"

namespace fencepost::storage {

namespace bhttp = boost::beast::http;

http::Request S3Request(const s3::Location& location, bhttp::verb method,
                        std::string_view object_key, std::string body,
                        const std::vector<sigv4::QueryParam>& query) {
  http::Request request(
      method, s3::RequestTarget(s3::ObjectPath(location, object_key), query),
      11);
  request.set(bhttp::field::host, location.Host());
  const bool has_body = !body.empty() || method == bhttp::verb::put;
  request.body() = std::move(body);
  if (has_body) request.content_length(request.body().size());
  request.keep_alive(true);
  return request;
}

http::Request S3ListRequest(const s3::Location& location,
                            const std::vector<sigv4::QueryParam>& store_query) {
  http::Request request = S3Request(location, bhttp::verb::get, "", "");
  request.target(s3::RequestTarget(s3::ObjectPath(location, ""), store_query));
  return request;
}

void SignS3(http::Request& request, const s3::Location& location,
            const sigv4::Credentials& credentials,
            std::chrono::system_clock::time_point time,
            std::string_view payload_hash) {
  s3::RequestParts parts;
  parts.method = std::string(request.method_string());
  // The target is s3::RequestTarget's: the path and the query encoded once.
  const std::string_view target = request.target();
  const std::size_t mark = target.find('?');
  parts.path =
      codec::PercentDecode(target.substr(0, mark), codec::PercentMode::kStrict)
          .value_or("/");
  if (mark != std::string_view::npos) {
    parts.query = sigv4::ParseQuery(target.substr(mark + 1))
                      .value_or(std::vector<sigv4::QueryParam>{});
  }
  for (const auto& field : request) {
    if (field.name() == bhttp::field::connection ||
        field.name() == bhttp::field::host) {
      continue;
    }
    parts.headers.push_back(
        {std::string(field.name_string()), std::string(field.value())});
  }
  parts.payload_hash = payload_hash.empty() ? sigv4::HexSha256(request.body())
                                            : std::string(payload_hash);
  const std::size_t given = parts.headers.size();
  const s3::SignedRequest signed_request =
      s3::SignRequest(location, credentials, std::move(parts), time);
  for (std::size_t i = given; i < signed_request.headers.size(); ++i) {
    request.insert(signed_request.headers[i].name,
                   signed_request.headers[i].value);
  }
}

s3::ErrorAnswer ParseS3Error(const http::Response& response) {
  return s3::ReadErrorAnswer(response.result_int(), response.body(),
                             response["x-amz-request-id"]);
}

std::optional<std::uint64_t> TokenOfObject(const http::Response& response) {
  const auto it = response.find("x-amz-meta-fencing-token");
  if (it == response.end()) return std::nullopt;
  return fence::ParseToken(it->value());
}

}  // namespace fencepost::storage
