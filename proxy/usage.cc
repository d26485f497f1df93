#include <string>

#include "proxy/config.h"

namespace fencepost::proxy {

namespace {

// The flags of `fencepost serve`.
std::string ServeFlags();

}  // namespace

std::string Usage() {
  return R"(fencepost: a fencing-token guard in front of a key-value or file store.

Usage:
  fencepost [serve] [flags]
  fencepost lease acquire|release|get|run ...   (fencepost lease --help)
  fencepost fence get|bump ...                  (fencepost fence --help)
  fencepost batch --token N [FILE]              (fencepost batch --help)
  fencepost probe URL [--token N]               (fencepost probe --help)
  fencepost watch [PREFIX]                     (fencepost watch --help)
  fencepost effect NAME[/REST] [FILE]           (fencepost effect --help)
  fencepost --help | --version

)" + ServeFlags();
}

namespace {

std::string ServeFlags() {
  return R"(Flags (each may instead be set as FENCEPOST_<NAME>, e.g. FENCEPOST_DATA_DIR):
  --listen HOST:PORT           data port (default 127.0.0.1:7400)
  --admin-listen HOST:PORT     admin port: metrics, health, fences (default 127.0.0.1:7401)
  --data-dir DIR               LMDB environment directory (default ./fencepost-data)
  --backend SPEC               lmdb | etcd | fs:DIR | http[s]://HOST[:PORT][/BASE] |
                               s3://BUCKET[/PREFIX] (default lmdb)
  --fence-store STORE          lmdb | etcd[s]://HOST:PORT[,HOST:PORT...][/PREFIX]: where fences
                               live; etcd is shared by replicas, with --backend etcd, fs: or
                               http:// (default lmdb)
  --fence-store-timeout SECONDS
                               deadline of one etcd request (default 2)
  --fence-store-ca FILE        etcds://: the CA etcd's certificate must chain to (default: the system's)
  --fence-store-cert FILE, --fence-store-key FILE
                               etcds://: this replica's client certificate and key
  --fence-scope PREFIX         keys starting with PREFIX share one fence (repeatable)
  --election SCOPE=SOURCE      the fence of SCOPE (a --fence-scope or a key) follows the
                               election at etcd[s]://HOST:PORT[,...]/PATH or
                               zookeeper://HOST:PORT[,...]/PATH (repeatable)
  --election-ca FILE, --election-cert FILE, --election-key FILE
                               etcds:// elections: the CA, and a client certificate and key
  --election-digest-file FILE  zookeeper:// elections: USER:PASSWORD for digest auth
  --effect-target NAME=URL     fenced calls out: /v1/effects/NAME[/REST] on the data port is
                               sent once to URL[/REST] (http:// or https://; repeatable)
  --effect-retention DURATION  how long answered effects are kept for retries (default 24h)
  --max-body BYTES             larger request bodies get 413 (default 4194304)
  --mode enforce|observe       observe stores writes enforce would reject (default enforce)
  --upstream-timeout SECONDS   http:// backend deadline (default 10)
  --upstream-settle SECONDS    http:// backend hold after an unknown outcome (default 2)
  --forward-token              http:// backend: send Fencing-Token upstream
  --upstream-tls-ca FILE       https:// backends and S3 endpoints: the CA their certificate
                               must chain to (default: the system's)
  --s3-endpoint URL            s3:// backend: http[s]://HOST[:PORT] of the store
                               (default https://s3.REGION.amazonaws.com)
  --s3-region REGION           s3:// backend: the region requests are signed for (default us-east-1)
  --s3-listen HOST:PORT        s3:// backend: a port that speaks S3 itself for the bucket
                               (the S3 front door; default off)
  --s3-listen-domain NAME      with --s3-listen: the door's DNS name; a request to
                               BUCKET.NAME is virtual-hosted style (default: path style only)
  --s3-client-credentials FILE with --s3-listen: ACCESS_KEY_ID SECRET per line, the keys
                               fencepost's S3 clients sign with (mode 0600)
  --s3-allow-unsigned-payload  with --s3-listen and no --tls-cert: take PUTs and POSTs whose
                               body the signature does not cover (UNSIGNED-PAYLOAD, presigned)
  --s3-addressing path|virtual s3:// backend: bucket in the path or the host name
                               (default virtual on AWS's endpoint, else path)
  --s3-credentials-file FILE, --s3-profile NAME
                               s3:// backend: AWS shared-credentials file and profile (default:
                               AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN)
  --forward-authorization      http:// backend: send Authorization upstream even with --auth-token-file
  --auth-token-file FILE       writes and admin mutations need Authorization: Bearer <a token in FILE>
  --tls-cert FILE, --tls-key FILE
                               serve both ports over TLS 1.2+ with this PEM chain and key
  --tls-client-ca FILE         with --tls-cert: require client certificates from this CA (mTLS)
  --max-map-size BYTES         largest LMDB map, at least 1048576 (default 68719476736)
  --log-format text|json       (default text)
  --log-level LEVEL            trace, debug, info, warn, error, critical, off (default info)
  --access-log                 log one line per request, whatever --log-level is (default off)
  --read-timeout SECONDS       deadline for a request's headers, then its body (default 10)
  --idle-timeout SECONDS       idle keep-alive connections close after this (default 75)
  --write-timeout SECONDS      deadline for the client to take an answer (default 10)
  --max-leases N               live leases at once; a grant past it gets 507 (default 100000)
  --max-connections N          open data-port connections; past it the oldest idle one
                               closes, or a new one gets 503 (default 4096)
  --admin-max-connections N    the same for the admin port (default 64)
  --lmdb-shards N              LMDB environments of a new data directory, 1-)" +
         std::to_string(storage::kMaxLmdbShards) + R"( (default )" +
         std::to_string(storage::kDefaultLmdbShards) + R"()

Port 0 binds an ephemeral port; bound addresses are logged at start-up.
Bad flags exit with status 2.
)";
}

}  // namespace

}  // namespace fencepost::proxy
