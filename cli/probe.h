#pragma once

#include "cli/flags.h"

namespace fencepost::cli {

// `fencepost probe URL [--token N]`: whether the HTTP store at URL
// (http:// or https://, with an optional base path) honours If-Match and
// If-None-Match (SPEC "Conditional writes"): it must refuse, with 412 and
// nothing changed, every write whose precondition fails, and apply every
// write whose precondition holds. Under a scratch key fencepost-probe-<16
// hex> below URL it writes a value and reads it back, then sends
//  - a PUT with a wrong If-Match, a PUT with If-None-Match: * over the
//    value and a DELETE with a wrong If-Match: each holds when it is
//    answered 412 (not another 4xx) and a GET after it finds the value as
//    it was (it is written again for the next check when it was not);
//  - a PUT, then a DELETE, each with If-Match carrying the ETag a GET just
//    answered: each holds when it is answered 2xx and the GET after it
//    finds the value written, or gone (a store that answers no ETag on GET
//    fails both: a client has no tag to send);
//  - a PUT with If-None-Match: * to a second, new scratch key: holds when
//    it is answered 2xx and the value reads back.
// It removes the scratch keys and prints a verdict per check, the checks
// that failed, then a verdict for the store. With --token N every write
// carries Fencing-Token N; --auth-token-file and --tls-ca are used as by
// the other commands. Every request ends within 10 s and its answer is
// read up to 1 MiB.
//
// `fencepost probe s3://BUCKET[/PREFIX]` runs the same checks against the
// bucket, keys under PREFIX, every request signed with SigV4 (the --s3-*
// flags and credentials of SPEC "S3 backend"; none found: UsageError). An
// If-Match with the store's quoted ETag refused with 412 is sent again
// without the quotes, and the line says which form held; the wrong tag is
// sent bare. Answers are told with their S3 code and request id.
//
// Exit 0 when every check holds; 1 when one does not, the first write is
// refused (4xx) or the value does not read back; 3 when the store is
// unreachable, times out or answers 5xx; UsageError (2) for a bad URL or
// flag, or (s3://) no credentials.
int Probe(const Flags& flags);

}  // namespace fencepost::cli
