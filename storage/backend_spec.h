#pragma once

#include <stdexcept>
#include <string>
#include <string_view>

namespace fencepost::storage {

// The --backend value, parsed once for the config check, the choice of
// backend in main and the http:// backend's upstream.
struct BackendSpec {
  enum class Kind { kLmdb, kFs, kHttp, kEtcd, kS3 };
  Kind kind = Kind::kLmdb;
  std::string dir;  // kFs: DIR of fs:DIR
  // kHttp: the parts of http://HOST[:PORT][/BASE]. `host` has no brackets;
  // `port` is digits ("80" when absent); `base` is "" or a canonical path
  // (fence::EncodeKey's spelling) without a trailing '/'.
  // kHttp also https:// (`tls`, port "443" when absent). kS3: `bucket` of
  // s3://BUCKET[/PREFIX], `base` "/PREFIX" (canonical, as for kHttp) and
  // `prefix` PREFIX decoded (s3::ParseBucketUrl's).
  std::string host;
  std::string port;
  std::string base;
  bool tls = false;
  std::string bucket;
  std::string prefix;
};

// Thrown by ParseBackendSpec; the message names the spec and what is wrong,
// but not the flag.
class BadBackendSpec : public std::invalid_argument {
 public:
  using std::invalid_argument::invalid_argument;
};

// Parses "lmdb", "etcd" (values in the etcd fence store), "fs:DIR",
// "http://HOST[:PORT][/BASE]", "https://HOST[:PORT][/BASE]" (IPv6 hosts in
// brackets) or "s3://BUCKET[/PREFIX]". Throws BadBackendSpec for anything
// else: another scheme, an empty DIR or host, a port that is not digits, a
// BASE or PREFIX that is not a plain canonical path, what s3::ParseBucketUrl
// refuses (a BUCKET that is not an S3 bucket name). Nothing is resolved or
// opened.
BackendSpec ParseBackendSpec(std::string_view spec);

}  // namespace fencepost::storage
