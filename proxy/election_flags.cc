#include <sys/stat.h>

#include <algorithm>
#include <fstream>
#include <string>
#include <vector>

#include "fence/key.h"
#include "fence/scope.h"
#include "proxy/config.h"

namespace fencepost::proxy {

namespace {

// An elected SCOPE: a --fence-scope, or a key of its own fence, and no
// --fence-scope inside it left unelected (its keys would have a fence of
// their own, which nobody elects).
void CheckScope(const Config& c, const fence::Scopes& scopes,
                const std::string& scope) {
  if (!scopes.IsScope(scope)) {
    if (fence::ValidateKey(scope) != fence::KeyError::kOk) {
      throw ConfigError("--election: '" + scope +
                        "' is neither a --fence-scope nor a valid key");
    }
    if (scopes.FenceFor(scope) != scope) {
      throw ConfigError(
          "--election: the key '" + scope + "' is under --fence-scope '" +
          std::string(scopes.FenceFor(scope)) + "': elect that scope");
    }
  }
  for (const std::string& other : c.fence_scopes) {
    if (scopes.IsScope(scope) && other != scope && other.starts_with(scope) &&
        std::none_of(
            c.elections.begin(), c.elections.end(),
            [&](const ElectionConfig& e) { return e.scope == other; })) {
      // Its keys have a fence of their own, which nobody would elect.
      throw ConfigError("--election: --fence-scope '" + other +
                        "' lies inside the elected scope '" + scope +
                        "' and has a fence of its own: elect it too, or "
                        "drop it");
    }
  }
}

}  // namespace

// --election: each SCOPE a configured --fence-scope or a key of its own
// fence, one election per fence; the TLS files and the digest handed to the
// sources that use them.
void CheckElections(Config& c) {
  const fence::Scopes scopes(c.fence_scopes);
  std::vector<std::string> fences;
  bool etcds = false, zookeeper = false;
  for (ElectionConfig& election : c.elections) {
    const std::string& scope = election.scope;
    CheckScope(c, scopes, scope);
    if (std::find(fences.begin(), fences.end(), scope) != fences.end()) {
      throw ConfigError("--election: '" + scope +
                        "' has two elections; one election per fence");
    }
    fences.push_back(scope);
    storage::ElectionSpec& source = election.source;
    if (source.kind == storage::ElectionSpec::Kind::kEtcd) {
      etcds = etcds || source.etcd.tls;
      source.etcd.ca_file = c.election_ca;
      source.etcd.cert_file = c.election_cert;
      source.etcd.key_file = c.election_key;
    } else {
      zookeeper = true;
    }
  }
  if (c.election_cert.empty() != c.election_key.empty()) {
    throw ConfigError("--election-cert and --election-key go together");
  }
  if ((!c.election_ca.empty() || !c.election_cert.empty()) && !etcds) {
    throw ConfigError(
        "--election-ca, --election-cert and --election-key need an "
        "--election with an etcds:// source");
  }
  if (c.election_digest_file.empty()) return;
  if (!zookeeper) {
    throw ConfigError(
        "--election-digest-file needs an --election with a zookeeper:// "
        "source");
  }
  // A password: readable by its owner alone (0600; 0640 when root owns it),
  // as --s3-client-credentials.
  struct stat st {};
  if (::stat(c.election_digest_file.c_str(), &st) == 0 &&
      (st.st_mode & 0777 & ~(st.st_uid == 0 ? 0640 : 0600)) != 0) {
    throw ConfigError("--election-digest-file: '" + c.election_digest_file +
                      "' is readable by others; chmod 600 it");
  }
  std::ifstream in(c.election_digest_file);
  std::string digest;
  if (!in || !std::getline(in, digest)) {
    throw ConfigError("--election-digest-file: cannot read '" +
                      c.election_digest_file + "'");
  }
  while (!digest.empty() && (digest.back() == '\r' || digest.back() == ' ')) {
    digest.pop_back();
  }
  if (digest.find(':') == std::string::npos || digest.front() == ':') {
    throw ConfigError(
        "--election-digest-file: its first line is not "
        "USER:PASSWORD");
  }
  for (ElectionConfig& election : c.elections) {
    if (election.source.kind == storage::ElectionSpec::Kind::kZooKeeper) {
      election.source.digest = digest;
    }
  }
}

}  // namespace fencepost::proxy
