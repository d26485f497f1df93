#include "cli/commands.h"

#include <iostream>
#include <string>
#include <string_view>
#include <vector>

#include "cli/flags.h"
#include "cli/lease_run.h"
#include "cli/probe.h"
#include "cli/requests.h"
#include "cli/watch.h"

namespace fencepost::cli {
namespace {

constexpr std::string_view kUsageText =
    R"(Usage:
  fencepost lease acquire NAME [--holder ID] --ttl DURATION [--wait DURATION]
  fencepost lease release NAME --holder ID --token N
  fencepost lease get NAME
  fencepost lease run NAME [--holder ID] --ttl DURATION [--grace DURATION]
                           [--via URL] [--fence KEY]... -- CMD [ARG...]
  fencepost fence get KEY
  fencepost fence bump KEY --token N
  fencepost batch --token N [FILE]
  fencepost effect NAME[/REST][?QUERY] --token N --fence-key KEY
                   --idempotency-key ID [--method POST|PUT|PATCH|DELETE]
                   [--content-type TYPE] [FILE|-]
  fencepost probe URL [--token N]
  fencepost probe s3://BUCKET[/PREFIX] [--s3-endpoint URL] [--s3-region REGION]
                  [--s3-addressing path|virtual]
                  [--s3-credentials-file FILE] [--s3-profile NAME]
  fencepost watch [PREFIX]

Flags of every command:
  --admin URL             the admin port (env FENCEPOST_ADMIN,
                          default http://127.0.0.1:7401)
  --data URL              the data port (env FENCEPOST_DATA,
                          default http://127.0.0.1:7400)
  --auth-token-file FILE  send the file's first token as a bearer token
  --tls-ca FILE           the CAs to trust for an https:// URL

A holder ID defaults to <hostname>-<pid>-<random>. Durations are a number
and a unit: 500ms, 10s, 2m. `lease run` runs CMD with FENCING_TOKEN,
FENCEPOST_LEASE, FENCEPOST_HOLDER, FENCEPOST_FENCE (the lease's name: the
key of `effect --fence-key`) and, with --data, FENCEPOST_DATA set while it
holds the lease, renewing it every third of the TTL. CMD runs in a process
group of its own: when the lease is lost, the group (CMD and what it
started) gets SIGTERM, then SIGKILL after --grace (default 5s); SIGTERM,
SIGINT, SIGHUP and SIGQUIT sent to lease run are passed on to the group.

`lease run --via URL` (env FENCEPOST_VIA) elects through another system
instead of fencepost's leases, with its token as FENCING_TOKEN:
  etcd://HOST:PORT[,HOST:PORT...][/PREFIX]   the election key's create
                          revision (etcds:// for TLS, with --tls-ca)
  zk://HOST:PORT[,HOST:PORT...][/PATH]       the leader znode's czxid
  postgres://USER@HOST:PORT/DB               the lease row's token column
`lease run --fence KEY` (repeatable) bumps KEY's fence on fencepost (the
admin port) to the token before CMD starts, so every earlier holder's write
to it is refused from then on, not only after the new leader's first write;
a 409 there means a later holder got further: the lease is given up and
lease run exits 1.

`batch` sends the batch JSON in FILE (standard input when FILE is absent or
"-"), at most 64 MiB, as it is: {"ops": [{"op": "put", "key": K, "value":
BASE64} | {"op": "delete", "key": K}, ...]} as POST / to the data port with
Fencing-Token N. Every op is applied or none is (lmdb or etcd backend); the
results document, or a 409's problem, goes to standard output.

`effect` asks fencepost's data port to make a fenced side effect: POST (or
--method) /v1/effects/NAME[/REST][?QUERY] with Fencing-Token N, Fence-Key KEY
(the key whose fence guards the call, e.g. the lease's name) and
Idempotency-Key ID, the body from FILE (standard input for "-"; none
without FILE) with --content-type. fencepost sends it once to its
--effect-target NAME=URL, at URL/REST?QUERY, while N is not below KEY's
fence; the same ID again gets the recorded answer, and the target sees
nothing. --token, --fence-key and --data default to FENCING_TOKEN,
FENCEPOST_FENCE and FENCEPOST_DATA, which `lease run` gives its command.
The target's body goes to standard output as it is ("Effect-Replayed: true"
on standard error for a recorded answer). Exit 0 when the target answered
2xx, 1 when it answered otherwise (but 5xx: 3) or fencepost refused (409:
stale token, in progress, outcome unknown; 422: the ID was used for another
request; 404: no such NAME; the problem on standard output), 2 for a usage
error or a request fencepost calls bad, 3 when fencepost is unreachable or
the target could not be reached (502) or did not answer (504).

`probe` tells whether the HTTP store at URL (http://HOST[:PORT][/BASE] or
https://...) honours If-Match and If-None-Match: under a scratch
key fencepost-probe-<random> below URL it writes a value and reads it back,
then sends a PUT with a wrong If-Match, a PUT with If-None-Match: * over
the value and a DELETE with a wrong If-Match; each must be 412 and leave
the value as it was (a GET after each one checks). Then a PUT and a DELETE
with If-Match carrying the ETag a GET answered, and a PUT with
If-None-Match: * to a new key: each must be 2xx and apply. It removes the
scratch keys and prints a verdict per check and one for the store; with --token N
every write carries Fencing-Token N (to probe through a fencepost data
port). Exit 0 when every check holds, 1 when one does not (or the store
refuses the first write, or does not read back what it stores), 3 when the
store is unreachable, times out (10s a request) or answers 5xx.

`probe s3://BUCKET[/PREFIX]` runs the same checks against the bucket
itself, its scratch keys under PREFIX (percent-decoded once), every request
signed with AWS Signature Version 4: --s3-endpoint (default
https://s3.REGION.amazonaws.com), --s3-region (default us-east-1),
--s3-addressing (virtual on AWS's endpoint, else path), and the credentials
of --s3-credentials-file (profile --s3-profile, default "default") or else
of AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY and AWS_SESSION_TOKEN (or
~/.aws/credentials); none found is exit 2, and no secret is ever shown. S3
answers ETags quoted; when If-Match with the quoted tag is refused with 412
it is sent again without the quotes, and the probe says which form the
store compares. S3 error answers are shown with their code and request id.
--tls-ca is the CAs for an https:// endpoint.

`watch` follows the admin port's event stream (GET /v1/watch) under PREFIX
(everything when absent) and prints one JSON object per event and line:
the event's data with "event" (fence, lease, rejection or reset) and "id"
first. When the stream ends, breaks or stays silent for 25s it is opened
again (backoff 100ms to 5s) with the last id printed as Last-Event-ID, so
nothing is missed while the server still holds it, else a reset comes
first. It runs until SIGINT or SIGTERM (exit 0); if the first connection
fails it exits 3 (unreachable, 5xx), 2 (400) or 1 (another refusal).

Exit status: 0 done, 1 refused (lease held, stale token, not held, not
found), 2 usage error or a request fencepost calls bad (400; 405 for a batch
on a backend without batches; 413 for one over --max-body), 3 fencepost
unreachable or failing (5xx); `lease run` exits with CMD's status (128 +
signal when a signal ended it), 75 when the lease was lost, 126 when CMD
cannot be executed and 127 when it is not found (both before the lease is
taken).
)";

int Dispatch(const CommandSpec& spec, const Flags& flags) {
  if (spec.group == "batch") return Batch(flags);
  if (spec.group == "probe") return Probe(flags);
  if (spec.group == "watch") return Watch(flags);
  if (spec.group == "effect") return Effect(flags);
  if (spec.group == "fence") {
    return spec.name == "get" ? Get(flags, false) : FenceBump(flags);
  }
  if (spec.name == "acquire") return LeaseAcquire(flags);
  if (spec.name == "release") return LeaseRelease(flags);
  if (spec.name == "get") return Get(flags, true);
  return LeaseRun(flags);
}

}  // namespace

bool IsClientCommand(int argc, char** argv) {
  return argc > 1 && (std::string_view(argv[1]) == "lease" ||
                      std::string_view(argv[1]) == "fence" ||
                      std::string_view(argv[1]) == "batch" ||
                      std::string_view(argv[1]) == "probe" ||
                      std::string_view(argv[1]) == "watch" ||
                      std::string_view(argv[1]) == "effect");
}

int RunClientCommand(int argc, char** argv) {
  const std::vector<std::string> args(argv + 1, argv + argc);
  if (args.empty()) return kUsage;
  if (args.size() >= 2 && (args[1] == "--help" || args[1] == "-h")) {
    std::cout << kUsageText;
    return kSuccess;
  }
  const CommandSpec* spec = nullptr;
  for (const CommandSpec& candidate : Commands()) {
    if (args[0] == candidate.group &&
        (candidate.name.empty() ||
         (args.size() >= 2 && args[1] == candidate.name))) {
      spec = &candidate;
    }
  }
  try {
    if (spec == nullptr) {
      throw UsageError(args.size() < 2
                           ? "'fencepost " + args[0] + "' needs a command"
                           : "unknown command 'fencepost " + args[0] + " " +
                                 args[1] + "'");
    }
    // "--help" after the command, but not in CMD's arguments.
    for (const std::string& arg : args) {
      if (arg == "--") break;
      if (arg == "--help") {
        std::cout << kUsageText;
        return kSuccess;
      }
    }
    const Flags flags = ParseFlags(
        *spec, std::vector<std::string>(
                   args.begin() + (spec->name.empty() ? 1 : 2), args.end()));
    return Dispatch(*spec, flags);
  } catch (const UsageError& e) {
    std::cerr << "fencepost: " << e.what() << "\nRun 'fencepost "
              << (args.empty() ? "lease" : args[0]) << " --help' for usage.\n";
    return kUsage;
  }
}

}  // namespace fencepost::cli
