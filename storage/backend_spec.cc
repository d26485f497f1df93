#include "storage/backend_spec.h"

#include "fence/key.h"
#include "http/host_port.h"
#include "s3/location.h"

namespace fencepost::storage {
namespace {

// BASE (or PREFIX) is joined to canonical key paths, so it must be
// canonical too: "" or "/seg[/seg...]" in fence::EncodeKey's spelling.
bool CanonicalBase(const std::string& base) {
  if (base.empty()) return true;
  std::string decoded;
  return fence::DecodeKey(base, &decoded) == fence::KeyError::kOk &&
         "/" + fence::EncodeKey(decoded) == base &&
         fence::QueryOf(base).empty();
}

BackendSpec ParseHttpUrl(std::string_view url, bool tls) {
  auto bad = [url](const std::string& why) {
    return BadBackendSpec("'" + std::string(url) + "': " + why +
                          " (expected http://HOST:PORT[/BASE] or https://...)");
  };
  const std::string_view rest = url.substr(tls ? 8 : 7);
  const std::size_t slash = rest.find('/');
  const auto authority = http::SplitHostPort(rest.substr(0, slash));
  if (!authority) throw bad("unclosed [ or junk after ]");
  BackendSpec out;
  out.kind = BackendSpec::Kind::kHttp;
  out.tls = tls;
  out.host = authority->host;
  out.port = authority->port.value_or(tls ? "443" : "80");
  if (slash != std::string_view::npos) out.base = rest.substr(slash);
  while (!out.base.empty() && out.base.back() == '/') out.base.pop_back();
  if (!CanonicalBase(out.base)) {
    throw bad(
        "BASE must be a plain path: segments of unreserved "
        "characters, others percent-encoded in upper case");
  }
  if (out.host.empty()) throw bad("no host");
  if (out.host.find_first_of("@?# \t") != std::string::npos) {
    throw bad(
        "the host has a character a host name cannot have (user "
        "info, USER@HOST, is not taken)");
  }
  if (out.port.empty() ||
      out.port.find_first_not_of("0123456789") != std::string::npos) {
    throw bad("bad port");
  }
  return out;
}

BackendSpec ParseS3Url(std::string_view url) {
  auto bad = [url](const std::string& why) {
    return BadBackendSpec("'" + std::string(url) + "': " + why +
                          " (expected s3://BUCKET[/PREFIX])");
  };
  BackendSpec out;
  out.kind = BackendSpec::Kind::kS3;
  try {
    s3::BucketUrl parsed = s3::ParseBucketUrl(url);
    out.bucket = std::move(parsed.bucket);
    out.prefix = std::move(parsed.prefix);
  } catch (const std::invalid_argument& e) {
    throw BadBackendSpec(std::string(e.what()) +
                         " (expected s3://BUCKET[/PREFIX])");
  }
  const std::string_view rest = url.substr(5);
  const std::size_t slash = rest.find('/');
  if (slash != std::string_view::npos) out.base = rest.substr(slash);
  while (!out.base.empty() && out.base.back() == '/') out.base.pop_back();
  if (!CanonicalBase(out.base)) {
    throw bad(
        "PREFIX must be a plain path: segments of unreserved characters, "
        "others percent-encoded in upper case");
  }
  return out;
}

}  // namespace

BackendSpec ParseBackendSpec(std::string_view spec) {
  if (spec == "lmdb") return {};
  if (spec == "etcd") {
    BackendSpec out;
    out.kind = BackendSpec::Kind::kEtcd;
    return out;
  }
  if (spec.substr(0, 3) == "fs:" && spec.size() > 3) {
    BackendSpec out;
    out.kind = BackendSpec::Kind::kFs;
    out.dir = spec.substr(3);
    return out;
  }
  if (spec.substr(0, 7) == "http://") return ParseHttpUrl(spec, false);
  if (spec.substr(0, 8) == "https://") return ParseHttpUrl(spec, true);
  if (spec.substr(0, 5) == "s3://") return ParseS3Url(spec);
  throw BadBackendSpec("'" + std::string(spec) +
                       "' is not lmdb, etcd, fs:DIR, http://HOST:PORT[/BASE], "
                       "https://HOST[:PORT][/BASE] or s3://BUCKET[/PREFIX]");
}

}  // namespace fencepost::storage
