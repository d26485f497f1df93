#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "storage/backend_spec.h"
#include "storage/election_spec.h"
#include "storage/etcd_spec.h"
#include "storage/lmdb_shards.h"

namespace fencepost::proxy {

enum class Mode { kEnforce, kObserve };

// --election SCOPE=SOURCE (SPEC "Elections watched at their source").
struct ElectionConfig {
  std::string scope;  // a configured --fence-scope, or a key
  storage::ElectionSpec source;
};
// --effect-target NAME=URL (SPEC "Fenced side effects").
struct EffectTargetConfig {
  std::string name;           // fence::IsEffectTargetName
  std::string url;            // as given, for logs
  storage::BackendSpec spec;  // http:// or https://
};
enum class LogFormat { kText, kJson };

// A HOST:PORT the server binds.
struct ListenAddress {
  std::string host;  // an IP literal (IPv6 without brackets)
  std::uint16_t port = 0;
  std::string ToString() const;
};

// Everything `fencepost serve` is configured with. Field defaults are SPEC's.
struct Config {
  ListenAddress listen{"127.0.0.1", 7400};
  ListenAddress admin_listen{"127.0.0.1", 7401};
  std::string data_dir = "./fencepost-data";
  std::string backend = "lmdb";       // as given, for logs and /v1/status
  storage::BackendSpec backend_spec;  // `backend` parsed
  // Not in SPEC's table: where fences live. "lmdb" (the data directory) or
  // etcd://HOST:PORT[,HOST:PORT...][/PREFIX], shared by replicas.
  std::string fence_store = "lmdb";
  std::optional<storage::EtcdSpec> etcd;  // `fence_store` parsed, for etcd
  double fence_store_timeout = 2;         // per etcd request, seconds
  // etcds://: the CA for etcd's certificate, and a client certificate.
  std::string fence_store_ca;
  std::string fence_store_cert;
  std::string fence_store_key;
  std::vector<std::string> fence_scopes;
  std::vector<ElectionConfig> elections;
  // etcds:// elections: the CA, and a client certificate; zookeeper://
  // elections: a file holding USER:PASSWORD for digest authentication.
  std::string election_ca;
  std::string election_cert;
  std::string election_key;
  std::string election_digest_file;
  std::vector<EffectTargetConfig> effect_targets;
  std::chrono::milliseconds effect_retention{24 * 60 * 60 * 1000};
  std::uint64_t max_body = 4194304;
  Mode mode = Mode::kEnforce;
  double upstream_timeout = 10;
  double upstream_settle = 2;
  bool forward_token = false;
  // --backend s3:// (SPEC "S3 backend"). Empty endpoint: AWS's for the
  // region; empty addressing: "virtual" on AWS's endpoint, else "path" (set
  // by the checks once every flag is read).
  std::string s3_endpoint;
  std::string s3_region = "us-east-1";
  std::string s3_addressing;
  std::string s3_credentials_file;
  std::string s3_profile;
  // The S3 front door (SPEC "S3 front door"): its address, and the keys of
  // fencepost's own S3 clients.
  std::optional<ListenAddress> s3_listen;
  std::string s3_client_credentials;
  // The door's DNS name (lower case; empty: none): a request to
  // BUCKET.NAME is virtual-hosted style.
  std::string s3_listen_domain;
  // Whether the door takes a PUT whose body its signature does not cover
  // on plain HTTP (it always does over TLS).
  bool s3_allow_unsigned_payload = false;
  // https:// backends and S3 endpoints: the CA their certificate must chain
  // to (empty: the system's).
  std::string upstream_tls_ca;
  // Not in SPEC's table: with --auth-token-file, Authorization is
  // fencepost's credential and is not sent upstream unless this is set.
  bool forward_authorization = false;
  // Not in SPEC's table: open connections per port; past it the oldest idle
  // connection is closed, or the new one refused with 503.
  std::size_t max_connections = 4096;
  std::size_t admin_max_connections = 64;
  std::string auth_token_file;  // empty: no auth
  // TLS on both ports (not in SPEC's table): a PEM certificate chain and key,
  // and optionally the CA that client certificates must chain to (mTLS).
  std::string tls_cert;
  std::string tls_key;
  std::string tls_client_ca;
  std::uint64_t max_map_size = 68719476736ull;
  LogFormat log_format = LogFormat::kText;
  std::string log_level = "info";
  // Not in SPEC's table: how long one request's headers, and then its body,
  // may take to arrive, and how long an idle keep-alive connection is kept.
  double read_timeout = 10;
  double idle_timeout = 75;
  // Not in SPEC's table: how long a client may take to read one answer.
  double write_timeout = 10;
  // Not in SPEC's table: live leases at once (a grant past it is refused;
  // renewals never are).
  std::size_t max_leases = 100000;
  // Not in SPEC's table: how many LMDB environments a new data directory is
  // split into (see storage::LocalEngine); an existing directory keeps its own.
  std::size_t lmdb_shards = storage::kDefaultLmdbShards;
  // Not in SPEC's table: one log line per request (--access-log).
  bool access_log = false;
};

enum class Command { kServe, kHelp, kVersion };

struct Invocation {
  Command command = Command::kServe;
  Config config;
};

// Thrown for unknown flags and bad values; the message names the flag.
class ConfigError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Reads the command line, with FENCEPOST_<NAME> environment variables (looked
// up through `getenv`) as the fallback for each flag. Throws ConfigError.
Invocation ParseInvocation(
    const std::vector<std::string>& args,
    const std::function<std::optional<std::string>(const std::string&)>&
        getenv);

// Checks the --election flags against the others once all are read (each
// SCOPE a --fence-scope or a key of its own fence, one per fence) and hands
// the TLS files and the digest to their sources. Throws ConfigError.
void CheckElections(Config& config);

// The --help text.
std::string Usage();

}  // namespace fencepost::proxy
