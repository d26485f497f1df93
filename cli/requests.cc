#include "cli/requests.h"

#include <algorithm>
#include <fstream>
#include <iostream>
#include <random>
#include <thread>

#include "client/documents.h"
#include "client/leader_elector.h"

namespace fencepost::cli {

using client::Client;
using client::Result;
using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

namespace {

// The first line that is not blank and does not start with '#', trimmed.
std::string ReadTokenFile(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw UsageError("--auth-token-file: cannot read " + path);
  for (std::string line; std::getline(in, line);) {
    const auto first = line.find_first_not_of(" \t\r");
    if (first == std::string::npos || line[first] == '#') continue;
    const auto last = line.find_last_not_of(" \t\r");
    return line.substr(first, last - first + 1);
  }
  throw UsageError("--auth-token-file: " + path + " holds no token");
}

void PrintBody(const std::string& body) {
  std::cout << body;
  if (!body.empty() && body.back() != '\n') std::cout << '\n';
  std::cout.flush();
}

// A hint when the answer came from the other port than the command's: the
// data port reads an admin path such as /v1/leases/NAME as a key, and the
// admin port has no POST /.
std::string WrongPortHint(const Result& result) {
  if (!result.ok() || result.response.status != 404) return "";
  const auto problem = client::ParseProblem(result.response.body);
  if (!problem || problem->slug() != "not-found") return "";
  if (problem->key && problem->key->rfind("v1/", 0) == 0) {
    return " (the URL looks like fencepost's data port, which took the path "
           "for a key; these commands need the admin port: --admin or "
           "FENCEPOST_ADMIN, port 7401 by default)";
  }
  if (problem->detail == "no such admin endpoint") {
    return " (the URL looks like fencepost's admin port; batch needs the "
           "data port: --data or FENCEPOST_DATA, port 7400 by default)";
  }
  return "";
}

// Reports a request that did not get the answer it wanted; returns the
// exit status. A 409 body also goes to stdout, so a racer learns who holds
// the lease or which token stands.
int Refusal(const Result& result, const std::string& what) {
  std::cerr << "fencepost: " << what << ": " << Explain(result)
            << WrongPortHint(result) << "\n";
  if (!result.ok()) return kUnavailable;
  const int status = result.response.status;
  if (status == 409) {
    PrintBody(result.response.body);
    return kRefused;
  }
  if (status >= 500) return kUnavailable;
  if (status == 401 || status == 403 || status == 404) return kRefused;
  return kUsage;
}

bool Retryable(const Result& result) {
  return !result.ok() || result.response.status == 409 ||
         result.response.status >= 500;
}

}  // namespace

Client::Options PortOptions(const Flags& flags, const std::string& url) {
  Client::Options options;
  options.url = url;
  options.ca_file = flags.tls_ca;
  if (!flags.auth_token_file.empty()) {
    options.bearer_token = ReadTokenFile(flags.auth_token_file);
  }
  return options;
}

Client::Options AdminOptions(const Flags& flags) {
  return PortOptions(flags, flags.admin);
}

Client MakeClient(const Client::Options& options) {
  try {
    return Client(options);
  } catch (const std::exception& e) {
    throw UsageError(e.what());
  }
}

std::string Explain(const Result& result) {
  if (!result.ok()) return result.detail;
  const int status = result.response.status;
  std::string out = "HTTP " + std::to_string(status);
  const auto problem = client::ParseProblem(result.response.body);
  if (problem && !problem->detail.empty()) return out + ": " + problem->detail;
  if (problem && !problem->title.empty()) return out + ": " + problem->title;
  std::string body = result.response.body.substr(0, 200);
  while (!body.empty() && (body.back() == '\n' || body.back() == '\r')) {
    body.pop_back();
  }
  return body.empty() ? out : out + ": " + body;
}

milliseconds Jitter() {
  thread_local std::mt19937_64 random(std::random_device{}());
  return milliseconds(std::uniform_int_distribution<int>(50, 250)(random));
}

int LeaseAcquire(const Flags& flags) {
  const std::string& name = flags.positional[0];
  const milliseconds ttl = RequireTtl(flags);
  const std::string holder =
      flags.holder.empty() ? client::DefaultHolderId() : flags.holder;
  Client::Options options = AdminOptions(flags);
  Client client = MakeClient(options);
  const Clock::time_point end =
      Clock::now() + flags.wait.value_or(milliseconds(0));
  while (true) {
    if (flags.wait) {
      // The last tries still get a fair deadline.
      const auto left =
          std::chrono::duration_cast<milliseconds>(end - Clock::now());
      client.set_timeout(std::clamp(left, milliseconds(500), options.timeout));
    }
    const Result result = client.AcquireLease(name, holder, ttl);
    if (result.ok() && result.response.status == 200) {
      PrintBody(result.response.body);
      return kSuccess;
    }
    const auto left = end - Clock::now();
    if (!Retryable(result) || left <= Clock::duration::zero()) {
      return Refusal(result, "lease acquire " + name);
    }
    std::this_thread::sleep_for(std::min<Clock::duration>(Jitter(), left));
  }
}

int LeaseRelease(const Flags& flags) {
  const std::string& name = flags.positional[0];
  Require(!flags.holder.empty(), "holder");
  Require(flags.token.has_value(), "token");
  Client client = MakeClient(AdminOptions(flags));
  const Result result = client.ReleaseLease(name, flags.holder, *flags.token);
  if (result.ok() && result.response.status == 204) return kSuccess;
  return Refusal(result, "lease release " + name);
}

int Get(const Flags& flags, bool lease) {
  const std::string& name = flags.positional[0];
  Client client = MakeClient(AdminOptions(flags));
  const Result result = lease ? client.GetLease(name) : client.GetFence(name);
  if (result.ok() && result.response.status == 200) {
    PrintBody(result.response.body);
    return kSuccess;
  }
  return Refusal(result,
                 std::string(lease ? "lease get " : "fence get ") + name);
}

int FenceBump(const Flags& flags) {
  const std::string& key = flags.positional[0];
  Require(flags.token.has_value(), "token");
  Client client = MakeClient(AdminOptions(flags));
  const Result result = client.Bump(key, *flags.token);
  if (result.ok() && result.response.status / 100 == 2) {
    PrintBody(result.response.body);
    return kSuccess;
  }
  return Refusal(result, "fence bump " + key);
}

// The most `batch` and `effect` read; a server's --max-body (4 MiB by
// default) may refuse far less.
constexpr std::size_t kMaxBatchBytes = std::size_t{64} << 20;

// The whole of FILE, or of standard input when FILE is "-".
std::string ReadInput(const std::string& file) {
  const bool from_stdin = file == "-";
  const std::string name = from_stdin ? "standard input" : file;
  std::ifstream opened;
  if (!from_stdin) {
    opened.open(name, std::ios::binary);
    if (!opened) throw UsageError("cannot open " + name);
  }
  std::istream& in = from_stdin ? std::cin : opened;
  std::string out;
  char buffer[65536];
  while (in.read(buffer, sizeof buffer) || in.gcount() > 0) {
    out.append(buffer, static_cast<std::size_t>(in.gcount()));
    if (out.size() > kMaxBatchBytes) {
      throw UsageError(name + " holds more than 64 MiB");
    }
  }
  if (in.bad()) throw UsageError("cannot read " + name);
  return out;
}

int Batch(const Flags& flags) {
  Require(flags.token.has_value(), "token");
  std::string body =
      ReadInput(flags.positional.empty() ? "-" : flags.positional[0]);
  Client client = MakeClient(PortOptions(flags, flags.data));
  const Result result =
      client.Send("POST", "/",
                  {{"Fencing-Token", std::to_string(*flags.token)},
                   {"Content-Type", "application/json"}},
                  std::move(body));
  if (result.ok() && result.response.status == 200) {
    PrintBody(result.response.body);
    return kSuccess;
  }
  return Refusal(result, "batch");
}

namespace {

// The call of `effect NAME[/REST][?QUERY] [FILE|-]` under `flags`.
client::EffectCall EffectCallOf(const Flags& flags) {
  if (!flags.token) {
    throw UsageError("--token (or FENCING_TOKEN) is required");
  }
  if (flags.fence_key.empty()) {
    throw UsageError("--fence-key (or FENCEPOST_FENCE) is required");
  }
  Require(!flags.idempotency_key.empty(), "idempotency-key");
  client::EffectCall call;
  const std::string& operand = flags.positional[0];
  const std::string path = operand.substr(0, operand.find('?'));
  if (path.size() < operand.size())
    call.query = operand.substr(path.size() + 1);
  call.target = path.substr(0, path.find('/'));
  if (call.target.size() < path.size()) {
    call.path = path.substr(call.target.size() + 1);
  }
  const bool name_ok =
      !call.target.empty() && call.target.size() <= 64 &&
      call.target.find_first_not_of(
          "abcdefghijklmnopqrstuvwxyz"
          "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-") == std::string::npos;
  if (!name_ok) {
    throw UsageError("'" + call.target +
                     "' is not an effect target's NAME (1 to 64 of A-Z a-z "
                     "0-9 . _ -)");
  }
  if (!flags.method.empty()) call.method = flags.method;
  if (call.method != "POST" && call.method != "PUT" && call.method != "PATCH" &&
      call.method != "DELETE") {
    throw UsageError("--method: '" + call.method +
                     "' is not POST, PUT, PATCH or DELETE");
  }
  call.token = *flags.token;
  call.fence_key = flags.fence_key;
  call.idempotency_key = flags.idempotency_key;
  call.content_type = flags.content_type;
  if (flags.positional.size() > 1) call.body = ReadInput(flags.positional[1]);
  return call;
}

// Prints the target's answer, or reports fencepost's refusal; returns the
// exit status.
int ReportEffect(const client::EffectResult& r, const std::string& what) {
  const std::string prefix = "fencepost: effect " + what + ": ";
  if (r.ok() && r.relayed) {
    std::cout << r.body;
    std::cout.flush();
    if (r.replayed) {
      std::cerr << prefix
                << "Effect-Replayed: true (the recorded answer of an earlier "
                   "call; nothing was sent)\n";
    }
    if (r.status / 100 == 2) return kSuccess;
    std::cerr << prefix << "the target answered HTTP " << r.status << "\n";
    return r.status >= 500 ? kUnavailable : kRefused;
  }
  if (r.ok() && r.status < 400) {
    std::cerr << prefix << "HTTP " << r.status
              << " without Effect-Replayed: the server does not serve this "
                 "effect target (--effect-target)\n";
    return kUsage;
  }
  Result as_result{r.error, r.detail, {r.status, {}, r.body}};
  std::cerr << prefix << Explain(as_result) << "\n";
  if (!r.ok() || r.status >= 500) return kUnavailable;
  if (r.status == 409 || r.status == 422) {
    PrintBody(r.body);
    return kRefused;
  }
  if (r.status == 401 || r.status == 403 || r.status == 404) return kRefused;
  return kUsage;
}

}  // namespace

int Effect(const Flags& flags) {
  const client::EffectCall call = EffectCallOf(flags);
  Client client = MakeClient(PortOptions(flags, flags.data));
  return ReportEffect(client.Effect(call), flags.positional[0]);
}

}  // namespace fencepost::cli
