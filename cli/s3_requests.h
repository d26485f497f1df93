#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "sigv4/canonical.h"
#include "sigv4/signer.h"

// S3 requests as a client builds them (SPEC "S3 backend"): where an
// object's request goes under path-style or virtual-hosted addressing, the
// request signed with SigV4 (payload hash signed), and what an S3 error
// answer says. Pure functions over strings and sigv4/, nothing of the
// project's HTTP client, so that another folder can take them over; today
// `fencepost probe s3://...` uses them.
namespace fencepost::cli::s3 {

// Bucket in the path ("/BUCKET/KEY") or in the host name ("BUCKET.HOST").
enum class Addressing { kPath, kVirtual };

// "path" or "virtual"; nullopt for anything else.
std::optional<Addressing> ParseAddressing(std::string_view text);

// An endpoint "http://HOST[:PORT][/]" or "https://...": HOST a name, an
// IPv4 literal or a bracketed IPv6 literal; PORT 80 or 443 when absent.
struct Endpoint {
  bool tls = true;
  std::string host;  // IPv6 literals without brackets
  std::uint16_t port = 443;

  // "HOST:PORT" ("[::1]:PORT" for IPv6), the port always written: what
  // the Host field carries and what is signed. An HTTP client must send
  // exactly this Host (fencepost's client does).
  std::string Authority() const;
};

// Throws std::invalid_argument naming what is wrong: another scheme, a
// path other than "/", a query, user info, an empty host, a bad port.
Endpoint ParseEndpoint(std::string_view url);

// "https://s3.REGION.amazonaws.com", AWS's endpoint for `region`.
std::string DefaultEndpoint(std::string_view region);

// kVirtual on AWS's endpoints (a host name ending in ".amazonaws.com"),
// else kPath: the other stores (RGW, MinIO, ...) take path-style by default.
Addressing DefaultAddressing(const Endpoint& endpoint);

// What s3://BUCKET[/PREFIX] names.
struct BucketUrl {
  std::string bucket;
  // The keys' prefix, decoded ("%20" is a space), without the slashes
  // around it; "" for the whole bucket.
  std::string prefix;
};

// Parses "s3://BUCKET[/PREFIX]". BUCKET is an S3 bucket name: 3 to 63 of
// a-z 0-9 . -, starting and ending with a letter or digit. PREFIX is
// percent-decoded once. Throws std::invalid_argument.
BucketUrl ParseBucketUrl(std::string_view url);

// One bucket at one endpoint, as requests are addressed and signed.
struct Location {
  Endpoint endpoint;
  std::string bucket;
  Addressing addressing = Addressing::kPath;
  std::string region = "us-east-1";

  // Throws std::invalid_argument when virtual-hosted addressing cannot
  // name the bucket: an IP-literal endpoint, or (over https) a bucket with
  // a '.' that no wildcard certificate covers.
  void Check() const;
  // The URL an HTTP client connects to: the endpoint, with "BUCKET." before
  // the host under virtual addressing ("http://b.s3.example:80").
  std::string BaseUrl() const;
  // The Host field of every request (Endpoint::Authority, with "BUCKET."
  // before it under virtual addressing).
  std::string Host() const;
};

// The path of an object's request, decoded ("/BUCKET/KEY" under path
// style, "/KEY" under virtual): what SigV4 encodes (PathStyle::kS3).
std::string ObjectPath(const Location& location, std::string_view key);

// A request ready to send to Location::BaseUrl(): `target` is the request
// line's path (ObjectPath encoded as SigV4's S3 style, '/' kept), `headers`
// the fields to send besides Host (Location::Host(), signed) and
// Content-Length, the signature's among them.
struct SignedRequest {
  std::string method;
  std::string target;
  std::vector<sigv4::Header> headers;
};

// Builds and signs `method` of object `key` with `extra` headers (each
// signed, as given) and `body` (its hex SHA-256 is the payload hash), at
// `now`. Nothing of the credentials' secrets appears in the result but in
// the signature.
SignedRequest SignObjectRequest(const Location& location,
                                const sigv4::Credentials& credentials,
                                std::string_view method, std::string_view key,
                                const std::vector<sigv4::Header>& extra,
                                std::string_view body,
                                std::chrono::system_clock::time_point now);

// An answer for people: "HTTP 200" for a success; for an error "HTTP 403
// SignatureDoesNotMatch" with ": MESSAGE" when the store gave one, and ",
// request id ID" from the XML or, without a body (HEAD), from the
// x-amz-request-id field `request_id_field`. Never the rest of the body.
std::string DescribeAnswer(int status, std::string_view body,
                           std::string_view request_id_field);

}  // namespace fencepost::cli::s3
