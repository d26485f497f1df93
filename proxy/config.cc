#include "proxy/config.h"

#include <arpa/inet.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <map>
#include <sstream>

#include "codec/duration.h"
#include "codec/utf8.h"
#include "fence/effect.h"
#include "fence/key.h"
#include "fence/wal.h"
#include "http/host_port.h"
#include "proxy/logging.h"
#include "s3/location.h"
#include "storage/election_source.h"

namespace fencepost::proxy {
namespace {

std::uint64_t ParseUnsigned(const std::string& flag, const std::string& v) {
  std::uint64_t out = 0;
  auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), out);
  if (v.empty() || ec != std::errc() || end != v.data() + v.size()) {
    throw ConfigError("--" + flag + ": '" + v + "' is not a whole number");
  }
  return out;
}

// A connection cap: 1 to 1000000.
std::size_t ParseCount(const std::string& flag, const std::string& v) {
  const std::uint64_t n = ParseUnsigned(flag, v);
  if (n < 1 || n > 1000000) {
    throw ConfigError("--" + flag + ": must be from 1 to 1000000");
  }
  return n;
}

double ParseSeconds(const std::string& flag, const std::string& v) {
  double out = 0;
  auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), out);
  if (v.empty() || ec != std::errc() || end != v.data() + v.size() ||
      !std::isfinite(out) || out <= 0 || out > 86400) {
    throw ConfigError("--" + flag + ": '" + v +
                      "' is not a number of seconds above 0, at most 86400");
  }
  return out;
}

bool ParseSwitch(const std::string& flag, const std::string& v) {
  if (v == "1" || v == "true") return true;
  if (v == "0" || v == "false") return false;
  throw ConfigError("--" + flag + ": '" + v + "' is not 1, true, 0 or false");
}

ListenAddress ParseListen(const std::string& flag, const std::string& v) {
  const auto split = fencepost::http::SplitHostPort(v);
  if (!split || !split->port) {
    throw ConfigError("--" + flag + ": '" + v + "' is not HOST:PORT");
  }
  ListenAddress address;
  address.host = split->host;
  if (!split->bracketed) {
    if (address.host == "localhost") address.host = "127.0.0.1";
    if (address.host.empty()) address.host = "0.0.0.0";
  }
  unsigned char buf[16];
  if (inet_pton(AF_INET, address.host.c_str(), buf) != 1 &&
      inet_pton(AF_INET6, address.host.c_str(), buf) != 1) {
    throw ConfigError("--" + flag + ": '" + address.host +
                      "' is not an IP address");
  }
  const std::uint64_t port = ParseUnsigned(flag, *split->port);
  if (port > 65535) {
    throw ConfigError("--" + flag + ": port " + std::to_string(port) +
                      " is out of range");
  }
  address.port = static_cast<std::uint16_t>(port);
  return address;
}

// A host name (RFC 1123): dot-separated labels of 1 to 63 letters, digits
// and '-', neither first nor last, 253 bytes at most; lower-cased. An IP
// address (a last label of digits only) is none.
std::string DnsName(const std::string& flag, const std::string& v) {
  std::string name;
  for (char c : v) name.push_back(static_cast<char>(std::tolower(c)));
  bool good = !name.empty() && name.size() <= 253;
  std::stringstream in(name);
  std::string label;
  while (good && std::getline(in, label, '.')) {
    good = !label.empty() && label.size() <= 63 && label.front() != '-' &&
           label.back() != '-' &&
           label.find_first_not_of("abcdefghijklmnopqrstuvwxyz0123456789-") ==
               std::string::npos;
  }
  good = good && name.back() != '.' &&
         label.find_first_not_of("0123456789") != std::string::npos;
  if (!good) {
    throw ConfigError("--" + flag + ": '" + v +
                      "' is not a DNS name (dot-separated labels of a-z, 0-9 "
                      "and '-', not an IP address)");
  }
  return name;
}

storage::BackendSpec ParseBackend(const std::string& v) {
  try {
    return storage::ParseBackendSpec(v);
  } catch (const storage::BadBackendSpec& e) {
    throw ConfigError(std::string("--backend: ") + e.what());
  }
}

std::vector<std::string> SplitList(const std::string& v, char separator) {
  std::vector<std::string> out;
  std::stringstream in(v);
  for (std::string item; std::getline(in, item, separator);) {
    if (!item.empty()) out.push_back(item);
  }
  return out;
}

void CheckScope(const std::string& prefix) {
  if (prefix.empty() || prefix.size() > fence::kMaxNameBytes ||
      prefix.find('\0') != std::string::npos || !codec::IsValidUtf8(prefix)) {
    throw ConfigError("--fence-scope: '" + prefix +
                      "' is not a prefix of 1 to " +
                      std::to_string(fence::kMaxNameBytes) + " bytes of UTF-8");
  }
}

enum class Kind { kValue, kSwitch, kRepeatable };

struct Flag {
  Kind kind;
  std::function<void(Config&, const std::string&)> set;
};

// Where it listens and what it stores in.
void ListenAndStoreFlags(std::map<std::string, Flag>* flags) {
  flags->insert({
      {"listen",
       {Kind::kValue,
        [](Config& c, const std::string& v) {
          c.listen = ParseListen("listen", v);
        }}},
      {"admin-listen",
       {Kind::kValue,
        [](Config& c, const std::string& v) {
          c.admin_listen = ParseListen("admin-listen", v);
        }}},
      {"data-dir",
       {Kind::kValue,
        [](Config& c, const std::string& v) {
          if (v.empty()) throw ConfigError("--data-dir: empty path");
          c.data_dir = v;
        }}},
      {"backend",
       {Kind::kValue,
        [](Config& c, const std::string& v) {
          c.backend_spec = ParseBackend(v);
          c.backend = v;
        }}},
      {"fence-store",
       {Kind::kValue,
        [](Config& c, const std::string& v) {
          c.fence_store = v;
          c.etcd.reset();
          if (v == "lmdb") return;
          storage::EtcdSpec spec;
          if (std::string error = storage::ParseEtcdSpec(v, &spec);
              !error.empty()) {
            throw ConfigError("--fence-store: '" + v + "': " + error +
                              " (expected lmdb or "
                              "etcd[s]://HOST:PORT[,HOST:PORT...][/PREFIX])");
          }
          c.etcd = std::move(spec);
        }}},
      {"fence-store-ca",
       {Kind::kValue,
        [](Config& c, const std::string& v) { c.fence_store_ca = v; }}},
      {"fence-store-cert",
       {Kind::kValue,
        [](Config& c, const std::string& v) { c.fence_store_cert = v; }}},
      {"fence-store-key",
       {Kind::kValue,
        [](Config& c, const std::string& v) { c.fence_store_key = v; }}},
      {"fence-store-timeout",
       {Kind::kValue,
        [](Config& c, const std::string& v) {
          c.fence_store_timeout = ParseSeconds("fence-store-timeout", v);
        }}},
      {"fence-scope",
       {Kind::kRepeatable,
        [](Config& c, const std::string& v) {
          CheckScope(v);
          c.fence_scopes.push_back(v);
        }}},
  });
}

// --election and the files its sources use (election_flags.cc checks them).
void ElectionFlags(std::map<std::string, Flag>* flags) {
  flags->insert({
      {"election",
       {Kind::kRepeatable,
        [](Config& c, const std::string& v) {
          const std::size_t equals = v.find('=');
          ElectionConfig election;
          election.scope = v.substr(0, std::min(equals, v.size()));
          if (equals == std::string::npos || election.scope.empty()) {
            throw ConfigError("--election: '" + v + "' is not SCOPE=SOURCE");
          }
          if (std::string error = storage::ParseElectionSpec(
                  v.substr(equals + 1), &election.source);
              !error.empty()) {
            throw ConfigError("--election: '" + v + "': " + error);
          }
          c.elections.push_back(std::move(election));
        }}},
      {"election-ca",
       {Kind::kValue,
        [](Config& c, const std::string& v) { c.election_ca = v; }}},
      {"election-cert",
       {Kind::kValue,
        [](Config& c, const std::string& v) { c.election_cert = v; }}},
      {"election-key",
       {Kind::kValue,
        [](Config& c, const std::string& v) { c.election_key = v; }}},
      {"election-digest-file",
       {Kind::kValue,
        [](Config& c, const std::string& v) { c.election_digest_file = v; }}},
  });
}

// --effect-target and --effect-retention (SPEC "Fenced side effects").
void EffectFlags(std::map<std::string, Flag>* flags) {
  flags->insert({
      {"effect-target",
       {Kind::kRepeatable,
        [](Config& c, const std::string& v) {
          const std::size_t equals = v.find('=');
          EffectTargetConfig target;
          target.name = v.substr(0, std::min(equals, v.size()));
          if (equals == std::string::npos ||
              !fence::IsEffectTargetName(target.name)) {
            throw ConfigError("--effect-target: '" + v +
                              "' is not NAME=URL with a NAME of 1 to 64 "
                              "letters, digits, '.', '_' or '-'");
          }
          target.url = v.substr(equals + 1);
          try {
            target.spec = storage::ParseBackendSpec(target.url);
          } catch (const storage::BadBackendSpec& e) {
            throw ConfigError("--effect-target: '" + v + "': " + e.what());
          }
          if (target.spec.kind != storage::BackendSpec::Kind::kHttp) {
            throw ConfigError("--effect-target: '" + v +
                              "': the URL must be http:// or https://");
          }
          for (const EffectTargetConfig& other : c.effect_targets) {
            if (other.name == target.name) {
              throw ConfigError("--effect-target: '" + target.name +
                                "' is named twice");
            }
          }
          c.effect_targets.push_back(std::move(target));
        }}},
      {"effect-retention",
       {Kind::kValue,
        [](Config& c, const std::string& v) {
          const auto retention = codec::ParseDuration(v);
          if (!retention || retention->count() < 1000) {
            throw ConfigError("--effect-retention: '" + v +
                              "' is not a duration of at least 1s "
                              "(500ms, 10s, 2m, 24h)");
          }
          c.effect_retention = *retention;
        }}},
  });
}

// The s3:// backend's store, and the CA of any TLS upstream.
void S3Flags(std::map<std::string, Flag>* flags) {
  flags->insert({
      {"s3-endpoint",
       {Kind::kValue,
        [](Config& c, const std::string& v) {
          try {
            s3::ParseEndpoint(v);
          } catch (const std::invalid_argument& e) {
            throw ConfigError(std::string("--s3-endpoint: ") + e.what());
          }
          // Without the one '/' that ParseEndpoint takes after HOST[:PORT].
          c.s3_endpoint = v.back() == '/' ? v.substr(0, v.size() - 1) : v;
        }}},
      {"s3-region",
       {Kind::kValue,
        [](Config& c, const std::string& v) {
          if (v.empty() ||
              v.find_first_not_of("abcdefghijklmnopqrstuvwxyz0123456789-") !=
                  std::string::npos) {
            throw ConfigError("--s3-region: '" + v +
                              "' is not a region name (a-z 0-9 -)");
          }
          c.s3_region = v;
        }}},
      {"s3-listen",
       {Kind::kValue,
        [](Config& c, const std::string& v) {
          c.s3_listen = ParseListen("s3-listen", v);
        }}},
      {"s3-listen-domain",
       {Kind::kValue,
        [](Config& c, const std::string& v) {
          c.s3_listen_domain = DnsName("s3-listen-domain", v);
        }}},
      {"s3-client-credentials",
       {Kind::kValue,
        [](Config& c, const std::string& v) {
          if (v.empty()) {
            throw ConfigError("--s3-client-credentials: empty path");
          }
          c.s3_client_credentials = v;
        }}},
      {"s3-allow-unsigned-payload",
       {Kind::kSwitch,
        [](Config& c, const std::string& v) {
          c.s3_allow_unsigned_payload =
              ParseSwitch("s3-allow-unsigned-payload", v);
        }}},
      {"s3-addressing",
       {Kind::kValue,
        [](Config& c, const std::string& v) {
          if (!s3::ParseAddressing(v)) {
            throw ConfigError("--s3-addressing: '" + v +
                              "' is not path or virtual");
          }
          c.s3_addressing = v;
        }}},
      {"s3-credentials-file",
       {Kind::kValue,
        [](Config& c, const std::string& v) {
          if (v.empty()) throw ConfigError("--s3-credentials-file: empty path");
          c.s3_credentials_file = v;
        }}},
      {"s3-profile",
       {Kind::kValue,
        [](Config& c, const std::string& v) {
          if (v.empty()) throw ConfigError("--s3-profile: empty name");
          c.s3_profile = v;
        }}},
      {"upstream-tls-ca",
       {Kind::kValue,
        [](Config& c, const std::string& v) {
          if (v.empty()) throw ConfigError("--upstream-tls-ca: empty path");
          c.upstream_tls_ca = v;
        }}},
  });
}

// How writes are checked and forwarded, and who may make them.
void WriteFlags(std::map<std::string, Flag>* flags) {
  flags->insert({
      {"max-body",
       {Kind::kValue,
        [](Config& c, const std::string& v) {
          c.max_body = ParseUnsigned("max-body", v);
          if (c.max_body == 0) {
            throw ConfigError("--max-body: must be at least 1 byte");
          }
        }}},
      {"mode",
       {Kind::kValue,
        [](Config& c, const std::string& v) {
          if (v == "enforce") {
            c.mode = Mode::kEnforce;
          } else if (v == "observe") {
            c.mode = Mode::kObserve;
          } else {
            throw ConfigError("--mode: '" + v + "' is not enforce or observe");
          }
        }}},
      {"upstream-timeout",
       {Kind::kValue,
        [](Config& c, const std::string& v) {
          c.upstream_timeout = ParseSeconds("upstream-timeout", v);
        }}},
      {"upstream-settle",
       {Kind::kValue,
        [](Config& c, const std::string& v) {
          c.upstream_settle = ParseSeconds("upstream-settle", v);
        }}},
      {"tls-cert",
       {Kind::kValue, [](Config& c, const std::string& v) { c.tls_cert = v; }}},
      {"tls-key",
       {Kind::kValue, [](Config& c, const std::string& v) { c.tls_key = v; }}},
      {"tls-client-ca",
       {Kind::kValue,
        [](Config& c, const std::string& v) { c.tls_client_ca = v; }}},
      {"auth-token-file",
       {Kind::kValue,
        [](Config& c, const std::string& v) { c.auth_token_file = v; }}},
      {"forward-token",
       {Kind::kSwitch,
        [](Config& c, const std::string& v) {
          c.forward_token = ParseSwitch("forward-token", v);
        }}},
      {"access-log",
       {Kind::kSwitch,
        [](Config& c, const std::string& v) {
          c.access_log = ParseSwitch("access-log", v);
        }}},
      {"forward-authorization",
       {Kind::kSwitch,
        [](Config& c, const std::string& v) {
          c.forward_authorization = ParseSwitch("forward-authorization", v);
        }}},
  });
}

// Limits, logging and the LMDB layout.
void LimitFlags(std::map<std::string, Flag>* flags) {
  flags->insert({
      {"max-connections",
       {Kind::kValue,
        [](Config& c, const std::string& v) {
          c.max_connections = ParseCount("max-connections", v);
        }}},
      {"admin-max-connections",
       {Kind::kValue,
        [](Config& c, const std::string& v) {
          c.admin_max_connections = ParseCount("admin-max-connections", v);
        }}},
      {"max-map-size",
       {Kind::kValue,
        [](Config& c, const std::string& v) {
          c.max_map_size = ParseUnsigned("max-map-size", v);
          if (c.max_map_size < (1u << 20)) {
            throw ConfigError("--max-map-size: must be at least 1048576");
          }
        }}},
      {"log-format",
       {Kind::kValue,
        [](Config& c, const std::string& v) {
          if (v == "text") {
            c.log_format = LogFormat::kText;
          } else if (v == "json") {
            c.log_format = LogFormat::kJson;
          } else {
            throw ConfigError("--log-format: '" + v + "' is not text or json");
          }
        }}},
      {"log-level",
       {Kind::kValue,
        [](Config& c, const std::string& v) {
          if (!ParseLogLevel(v)) {
            throw ConfigError("--log-level: '" + v + "' is not " +
                              std::string(kLevelNames));
          }
          c.log_level = v;
        }}},
      {"read-timeout",
       {Kind::kValue,
        [](Config& c, const std::string& v) {
          c.read_timeout = ParseSeconds("read-timeout", v);
        }}},
      {"idle-timeout",
       {Kind::kValue,
        [](Config& c, const std::string& v) {
          c.idle_timeout = ParseSeconds("idle-timeout", v);
        }}},
      {"write-timeout",
       {Kind::kValue,
        [](Config& c, const std::string& v) {
          c.write_timeout = ParseSeconds("write-timeout", v);
        }}},
      {"max-leases",
       {Kind::kValue,
        [](Config& c, const std::string& v) {
          c.max_leases = ParseCount("max-leases", v);
        }}},
      {"lmdb-shards",
       {Kind::kValue,
        [](Config& c, const std::string& v) {
          const std::uint64_t n = ParseUnsigned("lmdb-shards", v);
          if (n < 1 || n > storage::kMaxLmdbShards) {
            throw ConfigError("--lmdb-shards: must be from 1 to " +
                              std::to_string(storage::kMaxLmdbShards));
          }
          c.lmdb_shards = n;
        }}},
  });
}

const std::map<std::string, Flag>& Flags() {
  static const std::map<std::string, Flag> flags = [] {
    std::map<std::string, Flag> all;
    ListenAndStoreFlags(&all);
    WriteFlags(&all);
    S3Flags(&all);
    ElectionFlags(&all);
    EffectFlags(&all);
    LimitFlags(&all);
    return all;
  }();
  return flags;
}

std::string EnvName(const std::string& flag) {
  std::string name = "FENCEPOST_";
  for (char c : flag) name.push_back(c == '-' ? '_' : std::toupper(c));
  return name;
}

// The s3:// backend's flags, and the defaults that depend on the endpoint.
void CheckS3(Config& c) {
  using BackendKind = storage::BackendSpec::Kind;
  const bool s3 = c.backend_spec.kind == BackendKind::kS3;
  if (c.s3_listen.has_value() != !c.s3_client_credentials.empty()) {
    throw ConfigError(
        "--s3-listen and --s3-client-credentials go together (the front "
        "door's clients sign with those keys)");
  }
  if (!c.s3_listen_domain.empty() && !c.s3_listen) {
    throw ConfigError(
        "--s3-listen-domain needs --s3-listen (it is the front door's name)");
  }
  if (c.s3_allow_unsigned_payload && !c.s3_listen) {
    throw ConfigError(
        "--s3-allow-unsigned-payload needs --s3-listen (it is the front "
        "door's)");
  }
  if (!s3 && (c.s3_listen || !c.s3_endpoint.empty() ||
              !c.s3_addressing.empty() || !c.s3_credentials_file.empty() ||
              !c.s3_profile.empty() || c.s3_region != "us-east-1")) {
    throw ConfigError("the --s3-* flags need --backend s3://BUCKET[/PREFIX]");
  }
  if (s3) {
    const bool aws = c.s3_endpoint.empty();
    if (aws) c.s3_endpoint = s3::DefaultEndpoint(c.s3_region);
    if (c.s3_addressing.empty()) c.s3_addressing = aws ? "virtual" : "path";
    s3::Location location;
    location.endpoint = s3::ParseEndpoint(c.s3_endpoint);  // checked above
    location.bucket = c.backend_spec.bucket;
    location.addressing = *s3::ParseAddressing(c.s3_addressing);
    try {
      location.Check();
    } catch (const std::invalid_argument& e) {
      throw ConfigError(std::string("--s3-addressing virtual: ") + e.what());
    }
  }
  const bool tls_upstream =
      (c.backend_spec.kind == BackendKind::kHttp && c.backend_spec.tls) ||
      (s3 && c.s3_endpoint.rfind("https://", 0) == 0) ||
      std::any_of(c.effect_targets.begin(), c.effect_targets.end(),
                  [](const EffectTargetConfig& t) { return t.spec.tls; });
  if (!c.upstream_tls_ca.empty() && !tls_upstream) {
    throw ConfigError(
        "--upstream-tls-ca needs --backend https://..., an https:// "
        "--s3-endpoint or an https:// --effect-target");
  }
}

// The flags that need (or exclude) one another, once all are read; fills
// the etcd spec's TLS files from theirs.
void CheckTogether(Config& c) {
  using BackendKind = storage::BackendSpec::Kind;
  if (c.fence_store_cert.empty() != c.fence_store_key.empty()) {
    throw ConfigError("--fence-store-cert and --fence-store-key go together");
  }
  const bool tls_files =
      !c.fence_store_ca.empty() || !c.fence_store_cert.empty();
  if (tls_files && !(c.etcd && c.etcd->tls)) {
    throw ConfigError(
        "--fence-store-ca, --fence-store-cert and --fence-store-key need "
        "--fence-store etcds://...");
  }
  if (c.etcd) {
    c.etcd->ca_file = c.fence_store_ca;
    c.etcd->cert_file = c.fence_store_cert;
    c.etcd->key_file = c.fence_store_key;
  }
  CheckS3(c);
  CheckElections(c);
  if (c.backend_spec.kind == BackendKind::kEtcd && !c.etcd) {
    throw ConfigError("--backend etcd needs --fence-store etcd://...");
  }
  if (c.etcd && c.backend_spec.kind == BackendKind::kLmdb) {
    throw ConfigError(
        "--fence-store etcd:// keeps fences apart from this process: pick "
        "--backend etcd, fs:DIR (storage the replicas share) or http://");
  }
  if (c.backend_spec.kind == BackendKind::kLmdb &&
      c.max_body > fence::kMaxValueBytes) {
    // The value goes into one log record, which recovery must read back.
    throw ConfigError("--max-body: " + std::to_string(c.max_body) +
                      " is above " + std::to_string(fence::kMaxValueBytes) +
                      ", the largest value the lmdb backend's write-ahead "
                      "log holds in one record");
  }
  if (c.tls_cert.empty() != c.tls_key.empty()) {
    throw ConfigError("--tls-cert and --tls-key go together");
  }
  if (!c.tls_client_ca.empty() && c.tls_cert.empty()) {
    throw ConfigError("--tls-client-ca needs --tls-cert and --tls-key");
  }
  if (c.listen.host == c.admin_listen.host && c.listen.port != 0 &&
      c.listen.port == c.admin_listen.port) {
    throw ConfigError("--listen and --admin-listen are both " +
                      c.listen.ToString() +
                      "; the ports need addresses of "
                      "their own");
  }
}

}  // namespace

std::string ListenAddress::ToString() const {
  return fencepost::http::FormatHostPort(host, port);
}

Invocation ParseInvocation(
    const std::vector<std::string>& args,
    const std::function<std::optional<std::string>(const std::string&)>&
        getenv) {
  Invocation out;
  std::map<std::string, std::vector<std::string>> given;
  std::size_t i = 0;
  if (!args.empty() && args[0] == "serve") ++i;
  for (; i < args.size(); ++i) {
    const std::string& arg = args[i];
    if (arg == "--help" || arg == "-h" || arg == "help") {
      out.command = Command::kHelp;
      return out;
    }
    if (arg == "--version" || arg == "version") {
      out.command = Command::kVersion;
      return out;
    }
    if (arg.rfind("--", 0) != 0) {
      throw ConfigError("unexpected argument '" + arg + "'");
    }
    std::string name = arg.substr(2);
    std::optional<std::string> value;
    if (const auto eq = name.find('='); eq != std::string::npos) {
      value = name.substr(eq + 1);
      name.resize(eq);
    }
    const auto flag = Flags().find(name);
    if (flag == Flags().end()) throw ConfigError("unknown flag --" + name);
    if (!value) {
      if (flag->second.kind == Kind::kSwitch) {
        value = "true";
      } else if (i + 1 < args.size()) {
        value = args[++i];
      } else {
        throw ConfigError("--" + name + " needs a value");
      }
    }
    if (flag->second.kind != Kind::kRepeatable && given.count(name)) {
      throw ConfigError("--" + name + " given twice");
    }
    given[name].push_back(*value);
  }

  for (const auto& [name, flag] : Flags()) {
    std::vector<std::string> values;
    if (auto it = given.find(name); it != given.end()) {
      values = it->second;
    } else if (auto env = getenv(EnvName(name))) {
      if (flag.kind == Kind::kRepeatable) {
        // An election's source has commas of its own: its list is spaced.
        // So may an effect target's URL.
        values = SplitList(
            *env, name == "election" || name == "effect-target" ? ' ' : ',');
      } else {
        values.push_back(*env);
      }
    }
    for (const std::string& v : values) {
      try {
        flag.set(out.config, v);
      } catch (const ConfigError& e) {
        if (given.count(name)) throw;
        throw ConfigError(std::string(e.what()) + " (from " + EnvName(name) +
                          ")");
      }
    }
  }
  CheckTogether(out.config);
  return out;
}

}  // namespace fencepost::proxy
