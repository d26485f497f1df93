#include "s3/request.h"

#include <utility>

#include "sigv4/crypto.h"

namespace fencepost::s3 {

std::string RequestTarget(std::string_view path,
                          std::span<const sigv4::QueryParam> query) {
  std::string target = sigv4::CanonicalUri(path, sigv4::PathStyle::kS3);
  const std::string canonical = sigv4::CanonicalQuery(query);
  if (!canonical.empty()) target += "?" + canonical;
  return target;
}

SignedRequest SignRequest(const Location& location,
                          const sigv4::Credentials& credentials,
                          RequestParts parts,
                          std::chrono::system_clock::time_point now) {
  sigv4::Request request;
  request.method = std::move(parts.method);
  request.path = std::move(parts.path);
  request.path_style = sigv4::PathStyle::kS3;
  request.query = std::move(parts.query);
  request.headers.reserve(parts.headers.size() + 5);
  request.headers.push_back({"host", location.Host()});
  for (sigv4::Header& header : parts.headers) {
    request.headers.push_back(std::move(header));
  }
  request.payload_hash = std::move(parts.payload_hash);
  sigv4::SigningParams params;
  params.region = location.region;
  params.time = now;
  sigv4::SignRequest(request, credentials, params);
  SignedRequest out;
  out.method = std::move(request.method);
  out.target = RequestTarget(request.path, request.query);
  // Host went first; SignRequest appended its fields after the given ones.
  out.headers.assign(std::make_move_iterator(request.headers.begin() + 1),
                     std::make_move_iterator(request.headers.end()));
  return out;
}

SignedRequest SignObjectRequest(const Location& location,
                                const sigv4::Credentials& credentials,
                                std::string_view method, std::string_view key,
                                std::vector<sigv4::Header> extra,
                                std::string_view body,
                                std::chrono::system_clock::time_point now) {
  RequestParts parts;
  parts.method = std::string(method);
  parts.path = ObjectPath(location, key);
  parts.headers = std::move(extra);
  parts.payload_hash = sigv4::HexSha256(body);
  return SignRequest(location, credentials, std::move(parts), now);
}

}  // namespace fencepost::s3
