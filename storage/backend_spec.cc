#include "storage/backend_spec.h"

#include "fence/key.h"
#include "http/host_port.h"

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
  const std::string_view rest = url.substr(5);
  const std::size_t slash = rest.find('/');
  BackendSpec out;
  out.kind = BackendSpec::Kind::kS3;
  out.bucket = rest.substr(0, slash);
  const std::string& b = out.bucket;
  const auto edge_ok = [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
  };
  if (b.size() < 3 || b.size() > 63 || !edge_ok(b.front()) ||
      !edge_ok(b.back()) ||
      b.find_first_not_of("abcdefghijklmnopqrstuvwxyz0123456789.-") !=
          std::string::npos ||
      b.find("..") != std::string::npos) {
    throw bad(
        "BUCKET must be 3 to 63 of a-z 0-9 . -, starting and ending with a "
        "letter or digit");
  }
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
