#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

// Where S3 requests go (SPEC "S3 backend"): an endpoint, a bucket at it
// under path-style or virtual-hosted addressing, and the object keys of a
// bucket's prefix. Pure functions over strings: the s3:// backend, the S3
// front door's tests and `fencepost probe s3://` address requests alike.
namespace fencepost::s3 {

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

  // "HOST:PORT" ("[::1]:PORT" for IPv6), the port always written: how
  // messages name the endpoint.
  std::string Authority() const;
  // Whether `port` is the scheme's (443 over https, 80 over http).
  bool HasDefaultPort() const;
};

// Throws std::invalid_argument naming what is wrong: another scheme, a
// path other than "/", a query, user info, an empty host, a bad port.
Endpoint ParseEndpoint(std::string_view url);

// "https://s3.REGION.amazonaws.com", AWS's endpoint for `region`.
std::string DefaultEndpoint(std::string_view region);

// kVirtual on AWS's endpoints (a host name ending in ".amazonaws.com"),
// else kPath: the other stores (RGW, MinIO, ...) take path-style by default.
Addressing DefaultAddressing(const Endpoint& endpoint);

// S3's rule for new buckets, the one every store accepts: 3 to 63 of
// a-z 0-9 . -, starting and ending with a letter or digit, no "..".
bool IsBucketName(std::string_view name);

// What s3://BUCKET[/PREFIX] names.
struct BucketUrl {
  std::string bucket;
  // The keys' prefix, decoded ("%20" is a space), without the slashes
  // around it; "" for the whole bucket.
  std::string prefix;
};

// Parses "s3://BUCKET[/PREFIX]": BUCKET an IsBucketName, PREFIX
// percent-decoded once, without a query, a fragment or a control
// character. Throws std::invalid_argument naming what is wrong and `url`.
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
  // The host to resolve, connect to and (over https) verify: the
  // endpoint's, with "BUCKET." before it under virtual addressing; IPv6
  // literals without brackets.
  std::string HostName() const;
  // The URL an HTTP client connects to, its port always written
  // ("http://b.s3.example:80").
  std::string BaseUrl() const;
  // The Host field of every request, as it is signed and sent: HostName
  // (an IPv6 literal in brackets), then ":PORT" unless the port is the
  // scheme's. That is the URL's normal form (RFC 3986 section 6.2.3), the
  // Host that AWS's SDKs and curl send; a client must send exactly this
  // (fencepost's HTTP client and the backend's pool do).
  std::string Host() const;
};

// The longest object key S3 takes, in bytes.
inline constexpr std::size_t kMaxObjectKeyBytes = 1024;

// The object key of `key` under `prefix` (BucketUrl::prefix, decoded):
// PREFIX, '/', then the key's own bytes; `key` itself when there is no
// prefix. A key is never normalised: its bytes are the object's name.
std::string ObjectKey(std::string_view prefix, std::string_view key);

// The decoded path of a request for `object_key` ("" for the bucket
// itself): "/BUCKET/KEY" ("/BUCKET") under path style, "/KEY" ("/") under
// virtual. What SigV4 encodes (PathStyle::kS3) into the request target.
std::string ObjectPath(const Location& location, std::string_view object_key);

}  // namespace fencepost::s3
