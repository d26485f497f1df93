#pragma once

// What the S3 front door's tests share: a fencepost serving the door over
// s3://BUCKET/PREFIX of the shared RGW, requests signed with the SigV4
// library and sent raw, and the S3 error code of an answer.

#include <boost/beast/http/write.hpp>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "s3/location.h"
#include "sigv4/signer.h"
#include "storage/s3_request.h"
#include "tests/testing/http_client.h"
#include "tests/testing/rgw.h"
#include "tests/testing/server_process.h"
#include "tests/testing/temp_dir.h"

namespace fencepost::testing {

inline constexpr char kDoorKeyId[] = "door-client";
inline constexpr char kDoorSecret[] = "door-client-secret-0123456789";

// The flags of a fencepost with the front door over s3://BUCKET/PREFIX of
// the shared RGW, its clients' keys in `clients`.
inline std::vector<std::string> DoorFlags(const std::string& prefix,
                                          const std::string& clients) {
  const Rgw& rgw = Rgw::Shared();
  return {"--backend",
          "s3://" + rgw.bucket() + "/" + prefix.substr(0, prefix.size() - 1),
          "--s3-endpoint",
          rgw.endpoint(),
          "--s3-listen",
          "127.0.0.1:0",
          "--s3-client-credentials",
          clients};
}

// The clients' keys file of Door: kDoorKeyId and another.
inline constexpr char kDoorClients[] =
    "# fencepost's S3 clients\ndoor-client door-client-secret-0123456789\n"
    "other-client other-secret\n";

// fencepost with the front door over s3://BUCKET/PREFIX of the shared RGW;
// its clients are those of `clients` (written to a file of mode 0600),
// `flags` added to its own; it reaches the store at `endpoint` when given
// (a relay in front of RGW, "http://127.0.0.1:PORT").
class Door {
 public:
  explicit Door(const std::string& prefix,
                const std::vector<std::string>& flags = {},
                const std::string& clients = kDoorClients,
                const std::string& endpoint = "") {
    std::ofstream(dir_ / "clients") << clients;
    std::filesystem::permissions(dir_ / "clients",
                                 std::filesystem::perms::owner_read |
                                     std::filesystem::perms::owner_write);
    args_ = DoorFlags(prefix, dir_ / "clients");
    if (!endpoint.empty()) args_[3] = endpoint;  // --s3-endpoint's value
    args_.insert(args_.end(), flags.begin(), flags.end());
    server_.emplace(dir_ / "data", args_, Rgw::Shared().Env());
  }
  // Stops fencepost (SIGTERM and its clean stop, or SIGKILL with `kill`)
  // and starts another with the same flags on the same data directory: its
  // ports are new.
  void Restart(bool kill) {
    if (kill) server_->Kill();
    server_.reset();
    server_.emplace(dir_ / "data", args_, Rgw::Shared().Env());
  }
  ServerProcess& server() { return *server_; }
  std::uint16_t port() const { return server_->s3_port(); }
  s3::Location Bucket() const {
    s3::Location location;
    location.endpoint =
        s3::ParseEndpoint("http://127.0.0.1:" + std::to_string(port()));
    location.bucket = Rgw::Shared().bucket();
    return location;
  }

 private:
  TempDir dir_;
  std::vector<std::string> args_;
  std::optional<ServerProcess> server_;
};

inline sigv4::Credentials DoorKey(const std::string& secret = kDoorSecret,
                                  const std::string& id = kDoorKeyId) {
  return {id, sigv4::Secret(secret), sigv4::Secret()};
}

// Sends `request` as it is on a new connection (a HEAD's answer read
// without a body).
inline HttpResponse SendRaw(std::uint16_t port, const http::Request& request) {
  std::ostringstream wire;
  wire << request;
  HttpClient client(port);
  if (request.method() == boost::beast::http::verb::head) {
    client.Send(wire.str());
    return client.ReadResponse(true);
  }
  return client.Raw(wire.str());
}

// A request to the door for `key` with `fields` (a name may repeat), every
// field signed with `with` at `time`, the payload's SHA-256 signed.
inline http::Request SignedForDoor(const Door& door,
                                   boost::beast::http::verb method,
                                   const std::string& key,
                                   const std::string& body,
                                   const Headers& fields = {},
                                   const sigv4::Credentials& with = DoorKey(),
                                   std::chrono::system_clock::time_point time =
                                       std::chrono::system_clock::now()) {
  http::Request request = storage::S3Request(door.Bucket(), method, key, body);
  for (const auto& [name, value] : fields) request.insert(name, value);
  storage::SignS3(request, door.Bucket(), with, time);
  return request;
}

// As SignedForDoor, with `payload_hash` (UNSIGNED-PAYLOAD, say) signed as
// x-amz-content-sha256 instead of the body's SHA-256.
inline http::Request SignedWithPayloadHash(const Door& door,
                                           boost::beast::http::verb method,
                                           const std::string& key,
                                           const std::string& body,
                                           const Headers& fields,
                                           std::string_view payload_hash) {
  http::Request request = storage::S3Request(door.Bucket(), method, key, body);
  for (const auto& [name, value] : fields) request.insert(name, value);
  sigv4::Request to_sign;
  to_sign.method = std::string(request.method_string());
  to_sign.path = "/" + Rgw::Shared().bucket() + "/" + key;
  to_sign.path_style = sigv4::PathStyle::kS3;
  for (const auto& field : request) {
    if (field.name() == boost::beast::http::field::connection) continue;
    to_sign.headers.push_back(
        {std::string(field.name_string()), std::string(field.value())});
  }
  to_sign.payload_hash = std::string(payload_hash);
  sigv4::SigningParams params;
  params.region = "us-east-1";
  params.time = std::chrono::system_clock::now();
  const std::size_t given = to_sign.headers.size();
  sigv4::SignRequest(to_sign, DoorKey(), params);
  for (std::size_t i = given; i < to_sign.headers.size(); ++i) {
    request.insert(to_sign.headers[i].name, to_sign.headers[i].value);
  }
  return request;
}

// A presigned request (query-string authentication, good for a minute) for
// `key` with `fields` signed, and `body`.
inline http::Request PresignedForDoor(const Door& door,
                                      boost::beast::http::verb method,
                                      const std::string& key,
                                      const std::string& body,
                                      const Headers& fields = {}) {
  const std::string host = "127.0.0.1:" + std::to_string(door.port());
  sigv4::Request to_sign;
  to_sign.method = std::string(boost::beast::http::to_string(method));
  to_sign.path = "/" + Rgw::Shared().bucket() + "/" + key;
  to_sign.path_style = sigv4::PathStyle::kS3;
  to_sign.headers = {{"host", host}};
  for (const auto& [name, value] : fields) {
    to_sign.headers.push_back({name, value});
  }
  sigv4::SigningParams params;
  params.region = "us-east-1";
  params.time = std::chrono::system_clock::now();
  const sigv4::Presigned url =
      sigv4::Presign(to_sign, DoorKey(), params, std::chrono::seconds(60));
  http::Request request(method, to_sign.path + "?" + url.query, 11);
  request.set(boost::beast::http::field::host, host);
  for (const auto& [name, value] : fields) request.insert(name, value);
  request.body() = body;
  if (!body.empty() || method == boost::beast::http::verb::put) {
    request.content_length(body.size());
  }
  return request;
}

// The <Code> of an S3 error answer, or "".
inline std::string S3Code(const HttpResponse& response) {
  const auto from = response.body.find("<Code>");
  const auto to = response.body.find("</Code>");
  if (from == std::string::npos || to == std::string::npos) return "";
  return response.body.substr(from + 6, to - from - 6);
}

}  // namespace fencepost::testing
