#pragma once

#include <sys/types.h>

#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

// A real S3 store for the tests: a one-node Ceph RGW 16.2 (Debian's
// packages) on 127.0.0.1, started by tests/coordination/rgw.sh, and an
// independent client to check what is in it (tests/coordination/
// s3_object.py: Debian's boto3). Linked as fencepost_testing_s3.
namespace fencepost::testing {

// An object (or the store's refusal) as the independent client saw it.
struct S3Object {
  // The store's HTTP status (200, 204, 404, 412, ...); 0 when there was no
  // answer (connection refused or closed, timeout): then `error` says why.
  int status = 0;
  // The S3 error code ("NoSuchKey", "PreconditionFailed"; "NotFound" for a
  // HEAD of a missing key), or why there was no answer; "" on success.
  std::string error;
  std::string request_id;
  std::string etag;  // as the store sent it, with its quotes
  // The x-amz-meta-* headers: names without the prefix, in lower case.
  std::map<std::string, std::string> metadata;
  std::string content_type;
  std::int64_t content_length = 0;
  std::string body;  // Get only: the bytes, exactly
};

// What Rgw::Put sends besides the key and body.
struct S3Put {
  std::map<std::string, std::string> metadata;  // x-amz-meta-NAME: VALUE
  std::string content_type;                     // "": the client's default
  // Sent exactly as given when not empty (RGW 16.2 compares If-Match with
  // the ETag without its quotes; see docs of the S3 backend).
  std::string if_match;
  std::string if_none_match;
  // Another endpoint than the store's ("http://127.0.0.1:PORT", e.g. an
  // AnswerDropper in front of it); "" for the store itself.
  std::string endpoint;
};

// One Ceph cluster (monitor, memstore OSD, radosgw) in a temporary
// directory, with an S3 user and one bucket. Start-up takes 5-15 s.
//
// Contract:
// - Shared() is the cluster of this test process, started on first use and
//   stopped when the process exits; if the process dies instead (crash,
//   SIGKILL, a ctest timeout), rgw.sh's watcher stops the daemons and
//   removes the directory within about a second. Tests sharing it share the
//   bucket: each puts its objects under its own UniquePrefix().
// - A test that pauses or stops the gateway brings it back before it ends
//   (ResumeGateway() and StartGateway() do nothing when it runs).
// - Every method throws std::runtime_error (with the script's output) when
//   the cluster cannot be started or a gateway command fails; Shared()
//   throws the same error again at each call after a failed start, without
//   trying again. The S3 calls never throw for what the store answers.
// - Objects live in the OSD's memory: they survive StopGateway() and
//   StartGateway(), not the cluster.
class Rgw {
 public:
  static Rgw& Shared();

  // A cluster of the caller's own (for a test that must break the whole
  // store); the destructor stops it and removes its directory.
  Rgw();
  ~Rgw();
  Rgw(const Rgw&) = delete;
  Rgw& operator=(const Rgw&) = delete;

  const std::string& endpoint() const { return endpoint_; }  // http://HOST:PORT
  std::uint16_t port() const { return port_; }
  const std::string& region() const { return region_; }
  const std::string& bucket() const { return bucket_; }
  const std::string& access_key_id() const { return access_key_id_; }
  const std::string& secret_access_key() const { return secret_access_key_; }
  // The cluster's directory (logs under log/).
  const std::string& dir() const { return dir_; }
  // NAME=VALUE for a child process: S3_ENDPOINT, S3_REGION, S3_BUCKET,
  // AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, CEPH_CONF.
  std::vector<std::string> Env() const;

  // "NAME.N/" with N new in this process: a key prefix no other test of the
  // process uses. NAME should be short: S3 keys are at most 1024 bytes.
  std::string UniquePrefix(std::string_view name);

  // radosgw frozen (SIGSTOP; connections are accepted by the kernel, nothing
  // is answered) and thawed (SIGCONT).
  void PauseGateway();
  void ResumeGateway();
  // radosgw killed (SIGKILL, waited for) and started again on the same port
  // (returns once it answers).
  void StopGateway();
  void StartGateway();
  pid_t gateway_pid() const;  // -1 while stopped

  // The independent client (s3_object.py), one request each, no retries.
  S3Object Get(std::string_view key) const;
  S3Object Head(std::string_view key) const;
  S3Object Put(std::string_view key, std::string_view body,
               const S3Put& options = {}) const;
  S3Object Delete(std::string_view key, std::string_view if_match = "") const;
  // The keys under `prefix`, in the store's order; throws when the store
  // does not answer 200.
  std::vector<std::string> List(std::string_view prefix) const;

 private:
  // rgw.sh COMMAND DIR [ARG]: its stdout; throws when it fails.
  std::string Script(const std::string& command,
                     const std::string& arg = "") const;
  // s3_object.py with `args`, `body` on its stdin; its answer parsed (a
  // listing's keys into `keys`).
  S3Object Client(const std::vector<std::string>& args,
                  std::string_view body = "",
                  std::vector<std::string>* keys = nullptr) const;

  std::string dir_;
  std::string endpoint_;
  std::uint16_t port_ = 0;
  std::string region_;
  std::string bucket_;
  std::string access_key_id_;
  std::string secret_access_key_;
  std::string ceph_conf_;
  mutable std::mutex mu_;
  pid_t gateway_pid_ = -1;
  bool paused_ = false;
  int prefixes_ = 0;
};

}  // namespace fencepost::testing
