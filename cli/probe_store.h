#pragma once

#include <chrono>
#include <cstddef>
#include <memory>
#include <string>

#include "cli/flags.h"
#include "client/client.h"

// What `fencepost probe` runs its checks against (cli/probe.cc): a plain
// HTTP store (probe.cc) or an S3 bucket, every request signed with SigV4
// (probe_s3.cc). The checks are the same; the stores differ in how a key
// becomes a request and in how an answer is told.
namespace fencepost::cli {

// Every request of a probe ends within this, and its answer is read only
// up to kProbeMaxBody: the probe's values are a few bytes, and an error
// page longer than this says nothing more.
inline constexpr std::chrono::milliseconds kProbeTimeout{10000};
inline constexpr std::size_t kProbeMaxBody = std::size_t{1} << 20;

class ProbeStore {
 public:
  virtual ~ProbeStore() = default;

  // A scratch key no probe has used, ending in fencepost-probe-<16 hex>,
  // as Write and Read take it and as it is printed.
  virtual std::string NewKey() const = 0;
  // A write (PUT with `body`, or DELETE) of `key` with `headers` added.
  virtual client::Result Write(const std::string& key,
                               const std::string& method,
                               const client::Headers& headers,
                               std::string body) = 0;
  // A GET of `key`.
  virtual client::Result Read(const std::string& key) = 0;

  // An answer's status for a check's line: "HTTP 412", or with an S3
  // store "HTTP 412 PreconditionFailed, request id ...".
  virtual std::string Status(const client::Result& answer) const = 0;
  // Why a request failed or was refused, for people.
  virtual std::string Explain(const client::Result& answer) const = 0;
  // What to do about a first write refused with `first` (4xx), starting
  // with " (" when there is something to say; "" else.
  virtual std::string FirstWriteHint(const client::Result& first) const = 0;

  // A tag that no value of the store has, in the form its If-Match is
  // checked with.
  virtual std::string WrongTag() const = 0;
  // Whether an If-Match with the store's own quoted ETag that is refused
  // is tried again without the quotes (S3 stores: RGW compares the bare
  // tag), the probe saying which form the store compares.
  virtual bool TriesTagWithoutQuotes() const = 0;
};

// 16 random hex digits.
std::string RandomHex();

// The store of `url` (http://, https://) with the common flags; throws
// UsageError for a bad URL or flag.
std::unique_ptr<ProbeStore> MakeHttpProbeStore(const Flags& flags,
                                               const std::string& url);
// The bucket of `url` (s3://BUCKET[/PREFIX]) with the --s3-* flags and the
// credentials they name; throws UsageError for a bad URL or flag and for
// credentials that are missing or unreadable.
std::unique_ptr<ProbeStore> MakeS3ProbeStore(const Flags& flags,
                                             const std::string& url);

}  // namespace fencepost::cli
