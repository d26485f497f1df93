#pragma once

#include <chrono>
#include <string>

#include "cli/flags.h"
#include "client/client.h"

// The commands of one request (`lease acquire|release|get`, `fence
// get|bump`, `batch`, `effect`) and what `lease run` shares with them: the
// client of a port, and how an answer is printed or refused.
namespace fencepost::cli {

// The client options for `url` under the common flags (--tls-ca,
// --auth-token-file).
client::Client::Options PortOptions(const Flags& flags, const std::string& url);
client::Client::Options AdminOptions(const Flags& flags);
// Throws UsageError when `options` are not usable (a bad URL).
client::Client MakeClient(const client::Client::Options& options);

// What a refusal says, for people: the problem's detail, else the body.
std::string Explain(const client::Result& result);
// 50 to 250 ms.
std::chrono::milliseconds Jitter();

int LeaseAcquire(const Flags& flags);
int LeaseRelease(const Flags& flags);
// `lease get` when `lease`, else `fence get`.
int Get(const Flags& flags, bool lease);
int FenceBump(const Flags& flags);
int Batch(const Flags& flags);
// `effect NAME[/REST][?QUERY] [FILE|-]` (SPEC "Fenced side effects"): the
// target's body on stdout, its status deciding the exit (0 for 2xx, 1 for
// another, 3 for 5xx); fencepost's refusals as Refusal's, 422 being 1.
int Effect(const Flags& flags);

}  // namespace fencepost::cli
