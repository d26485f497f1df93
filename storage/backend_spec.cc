#include "storage/backend_spec.h"

#include "fence/key.h"
#include "http/host_port.h"

namespace fencepost::storage {
namespace {

BackendSpec ParseHttpUrl(std::string_view url) {
  auto bad = [url](const std::string& why) {
    return BadBackendSpec("'" + std::string(url) + "': " + why +
                          " (expected http://HOST:PORT[/BASE])");
  };
  const std::string_view rest = url.substr(7);
  const std::size_t slash = rest.find('/');
  const auto authority = http::SplitHostPort(rest.substr(0, slash));
  if (!authority) throw bad("unclosed [ or junk after ]");
  BackendSpec out;
  out.kind = BackendSpec::Kind::kHttp;
  out.host = authority->host;
  out.port = authority->port.value_or("80");
  if (slash != std::string_view::npos) out.base = rest.substr(slash);
  while (!out.base.empty() && out.base.back() == '/') out.base.pop_back();
  if (!out.base.empty()) {
    // BASE is joined to canonical key paths, so it must be canonical too.
    std::string decoded;
    if (fence::DecodeKey(out.base, &decoded) != fence::KeyError::kOk ||
        "/" + fence::EncodeKey(decoded) != out.base ||
        !fence::QueryOf(out.base).empty()) {
      throw bad(
          "BASE must be a plain path: segments of unreserved "
          "characters, others percent-encoded in upper case");
    }
  }
  if (out.host.empty()) throw bad("no host");
  if (out.port.empty() ||
      out.port.find_first_not_of("0123456789") != std::string::npos) {
    throw bad("bad port");
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
  if (spec.substr(0, 7) == "http://") return ParseHttpUrl(spec);
  throw BadBackendSpec("'" + std::string(spec) +
                       "' is not lmdb, etcd, fs:DIR or http://HOST:PORT[/BASE]");
}

}  // namespace fencepost::storage
