#include "storage/s3_request.h"

#include "fence/token.h"
#include "http/host_port.h"
#include "sigv4/canonical.h"
#include "sigv4/crypto.h"

namespace fencepost::storage {

namespace beast = boost::beast;
namespace bhttp = beast::http;

namespace {

constexpr std::size_t kMaxErrorField = 256;

// The text of the first <tag>...</tag> in `xml`, entities left as they are
// (S3's codes and ids have none), bounded, control characters dropped.
std::string Element(std::string_view xml, std::string_view tag) {
  const std::string open = "<" + std::string(tag) + ">";
  const std::string close = "</" + std::string(tag) + ">";
  const std::size_t at = xml.find(open);
  if (at == std::string_view::npos) return "";
  const std::size_t from = at + open.size();
  const std::size_t to = xml.find(close, from);
  if (to == std::string_view::npos) return "";
  std::string out;
  for (const char c : xml.substr(from, std::min(to - from, kMaxErrorField))) {
    if (static_cast<unsigned char>(c) >= 0x20 && c != 0x7f) out.push_back(c);
  }
  return out;
}

std::string Bounded(std::string_view text) {
  std::string out;
  for (const char c : text.substr(0, kMaxErrorField)) {
    if (static_cast<unsigned char>(c) >= 0x20 && c != 0x7f) out.push_back(c);
  }
  return out;
}

}  // namespace

std::string ObjectKey(std::string_view prefix, std::string_view key) {
  if (prefix.empty()) return std::string(key);
  // A canonical prefix decodes (it was checked when the spec was parsed).
  std::string decoded =
      sigv4::PercentDecode(prefix.substr(1)).value_or(std::string(prefix));
  decoded += '/';
  decoded += key;
  return decoded;
}

http::Request S3Request(const S3Bucket& bucket, bhttp::verb method,
                        std::string_view object_key, std::string body) {
  const bool default_port =
      bucket.port == (bucket.tls ? std::string_view("443") : "80");
  std::string host = http::FormatHostPort(bucket.host, bucket.port);
  if (default_port) host = host.substr(0, host.rfind(':'));
  std::string path = "/";
  if (bucket.virtual_hosted) {
    host = bucket.bucket + "." + host;
  } else {
    path += bucket.bucket;
    if (!object_key.empty()) path += '/';
  }
  path += object_key;
  http::Request request(method, sigv4::UriEncode(path, true), 11);
  request.set(bhttp::field::host, host);
  const bool has_body = !body.empty() || method == bhttp::verb::put;
  request.body() = std::move(body);
  if (has_body) request.content_length(request.body().size());
  request.keep_alive(true);
  return request;
}

void SignS3(http::Request& request, const S3Bucket& bucket,
            const sigv4::Credentials& credentials,
            std::chrono::system_clock::time_point time) {
  sigv4::Request to_sign;
  to_sign.method = std::string(request.method_string());
  // The target is the path UriEncode'd once; SigV4 encodes the decoded one.
  to_sign.path = sigv4::PercentDecode(request.target()).value_or("/");
  to_sign.path_style = sigv4::PathStyle::kS3;
  for (const auto& field : request) {
    if (field.name() == bhttp::field::connection) continue;
    to_sign.headers.push_back(
        {std::string(field.name_string()), std::string(field.value())});
  }
  to_sign.payload_hash = sigv4::HexSha256(request.body());
  sigv4::SigningParams params;
  params.region = bucket.region;
  params.time = time;
  const std::size_t given = to_sign.headers.size();
  sigv4::SignRequest(to_sign, credentials, params);
  // SignRequest appended its fields after the ones it was given.
  for (std::size_t i = given; i < to_sign.headers.size(); ++i) {
    request.insert(to_sign.headers[i].name, to_sign.headers[i].value);
  }
}

S3Error ParseS3Error(const http::Response& response) {
  S3Error error;
  error.status = response.result_int();
  const std::string_view body = response.body();
  error.code = Element(body, "Code");
  error.message = Element(body, "Message");
  error.request_id = Element(body, "RequestId");
  if (error.request_id.empty()) {
    error.request_id = Bounded(response["x-amz-request-id"]);
  }
  return error;
}

std::string UnquoteEtag(std::string_view etag) {
  std::string_view weak;
  if (etag.substr(0, 2) == "W/") {
    weak = etag.substr(0, 2);
    etag.remove_prefix(2);
  }
  if (etag.size() >= 2 && etag.front() == '"' && etag.back() == '"') {
    etag = etag.substr(1, etag.size() - 2);
  }
  return std::string(weak) + std::string(etag);
}

std::optional<std::uint64_t> TokenOfObject(const http::Response& response) {
  const auto it = response.find("x-amz-meta-fencing-token");
  if (it == response.end()) return std::nullopt;
  return fence::ParseToken(it->value());
}

}  // namespace fencepost::storage
