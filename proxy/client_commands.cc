#include "proxy/client_commands.h"

#include <poll.h>
#include <signal.h>
#include <sys/eventfd.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iostream>
#include <memory>
#include <optional>
#include <random>
#include <set>
#include <stdexcept>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "client/client.h"
#include "client/documents.h"
#include "client/duration.h"
#include "client/etcd_leases.h"
#include "client/fencepost_leases.h"
#include "client/leader_elector.h"
#include "client/lease_keeper.h"
#include "client/postgres_leases.h"
#include "client/zookeeper_leases.h"

extern char** environ;

namespace fencepost::proxy {
namespace {

using client::Client;
using client::Result;
using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

constexpr int kSuccess = 0;
constexpr int kRefused = 1;
constexpr int kUsage = 2;
constexpr int kUnavailable = 3;
constexpr int kLeaseLost = 75;
constexpr int kCannotExecute = 126;
constexpr int kNotFound = 127;

// SPEC "Leases": ttl_ms is 100 to 3600000.
constexpr milliseconds kMinTtl{100};
constexpr milliseconds kMaxTtl{3600000};
constexpr milliseconds kDefaultGrace{5000};

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

Flags of every command:
  --admin URL             the admin port (env FENCEPOST_ADMIN,
                          default http://127.0.0.1:7401)
  --data URL              the data port (env FENCEPOST_DATA,
                          default http://127.0.0.1:7400)
  --auth-token-file FILE  send the file's first token as a bearer token
  --tls-ca FILE           the CAs to trust for an https:// URL

A holder ID defaults to <hostname>-<pid>-<random>. Durations are a number
and a unit: 500ms, 10s, 2m. `lease run` runs CMD with FENCING_TOKEN,
FENCEPOST_LEASE and FENCEPOST_HOLDER set while it holds the lease, renewing
it every third of the TTL. CMD runs in a process group of its own: when the
lease is lost, the group (CMD and what it started) gets SIGTERM, then
SIGKILL after --grace (default 5s); SIGTERM, SIGINT, SIGHUP and SIGQUIT
sent to lease run are passed on to the group.

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

Exit status: 0 done, 1 refused (lease held, stale token, not held, not
found), 2 usage error or a request fencepost calls bad (400; 405 for a batch
on a backend without batches; 413 for one over --max-body), 3 fencepost
unreachable or failing (5xx); `lease run` exits with CMD's status (128 +
signal when a signal ended it), 75 when the lease was lost, 126 when CMD
cannot be executed and 127 when it is not found (both before the lease is
taken).
)";

class UsageError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct Flags {
  std::string admin;
  std::string data;
  std::string auth_token_file;
  std::string tls_ca;
  std::string holder;
  std::optional<milliseconds> ttl;
  std::optional<milliseconds> wait;
  std::optional<milliseconds> grace;
  std::string via;
  std::vector<std::string> fences;  // lease run --fence, repeatable
  std::optional<std::uint64_t> token;
  std::vector<std::string> positional;
  std::vector<std::string> command;  // lease run: what follows "--"
};

// What one command takes besides the flags of every command.
struct CommandSpec {
  std::string_view group;    // "lease", "fence" or "batch"
  std::string_view name;     // "" for a command of one word ("batch")
  std::string_view operand;  // "NAME", "KEY" or "FILE"
  std::set<std::string_view> flags;
  bool takes_command = false;
  bool operand_optional = false;

  // "fencepost lease acquire", "fencepost batch".
  std::string Title() const {
    return "fencepost " + std::string(group) +
           (name.empty() ? "" : " " + std::string(name));
  }
};

const std::vector<CommandSpec>& Commands() {
  static const std::vector<CommandSpec> kCommands = {
      {"lease", "acquire", "NAME", {"holder", "ttl", "wait"}},
      {"lease", "release", "NAME", {"holder", "token"}},
      {"lease", "get", "NAME", {}},
      {"lease",
       "run",
       "NAME",
       {"holder", "ttl", "grace", "via", "fence"},
       true},
      {"fence", "get", "KEY", {}},
      {"fence", "bump", "KEY", {"token"}},
      {"batch", "", "FILE", {"token"}, false, true},
  };
  return kCommands;
}

std::uint64_t ParseToken(const std::string& v) {
  std::uint64_t out = 0;
  const auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), out);
  if (v.empty() || v.size() > 20 || ec != std::errc() ||
      end != v.data() + v.size()) {
    throw UsageError("--token: '" + v + "' is not a decimal uint64");
  }
  return out;
}

milliseconds ParseDurationFlag(const std::string& flag, const std::string& v) {
  const std::optional<milliseconds> d = client::ParseDuration(v);
  if (!d) {
    throw UsageError("--" + flag + ": '" + v +
                     "' is not a duration such as 500ms, 10s or 2m");
  }
  return *d;
}

std::string EnvOr(const char* name, std::string fallback) {
  const char* value = std::getenv(name);
  return value != nullptr && *value != '\0' ? value : fallback;
}

Flags ParseFlags(const CommandSpec& spec,
                 const std::vector<std::string>& args) {
  static const std::set<std::string_view> kCommon = {
      "admin", "data", "auth-token-file", "tls-ca"};
  Flags flags;
  for (std::size_t i = 0; i < args.size(); ++i) {
    const std::string& arg = args[i];
    if (arg == "--") {
      if (!spec.takes_command) throw UsageError("unexpected '--'");
      flags.command.assign(args.begin() + static_cast<long>(i) + 1, args.end());
      break;
    }
    if (arg.rfind("--", 0) != 0) {
      flags.positional.push_back(arg);
      continue;
    }
    std::string name = arg.substr(2);
    std::string value;
    if (const auto eq = name.find('='); eq != std::string::npos) {
      value = name.substr(eq + 1);
      name.resize(eq);
    } else if (i + 1 < args.size()) {
      value = args[++i];
    } else {
      throw UsageError("--" + name + " needs a value");
    }
    if (kCommon.count(name) == 0 && spec.flags.count(name) == 0) {
      throw UsageError("unknown flag --" + name + " for '" + spec.Title() +
                       "'");
    }
    if (name == "admin") flags.admin = value;
    if (name == "data") flags.data = value;
    if (name == "auth-token-file") flags.auth_token_file = value;
    if (name == "tls-ca") flags.tls_ca = value;
    if (name == "holder") flags.holder = value;
    if (name == "token") flags.token = ParseToken(value);
    if (name == "ttl") flags.ttl = ParseDurationFlag(name, value);
    if (name == "wait") flags.wait = ParseDurationFlag(name, value);
    if (name == "grace") flags.grace = ParseDurationFlag(name, value);
    if (name == "via") flags.via = value;
    if (name == "fence") {
      if (value.empty()) throw UsageError("--fence needs a key");
      flags.fences.push_back(value);
    }
  }
  if (flags.positional.size() > 1 && spec.takes_command) {
    std::string rest;
    for (std::size_t i = 1; i < flags.positional.size(); ++i) {
      rest += " " + flags.positional[i];
    }
    throw UsageError("'" + spec.Title() + "' takes one " +
                     std::string(spec.operand) +
                     "; the command goes after '--': " + spec.Title() + " " +
                     flags.positional[0] + " [FLAGS] --" + rest);
  }
  if (flags.positional.size() > 1 ||
      (flags.positional.empty() && !spec.operand_optional)) {
    throw UsageError("'" + spec.Title() + "' takes " +
                     (spec.operand_optional ? "at most " : "") + "one " +
                     std::string(spec.operand));
  }
  if (!flags.positional.empty() && flags.positional[0].empty()) {
    throw UsageError(std::string(spec.operand) + " is empty");
  }
  if (spec.takes_command && flags.command.empty()) {
    throw UsageError("no command after '--'");
  }
  if (flags.admin.empty()) {
    flags.admin = EnvOr("FENCEPOST_ADMIN", "http://127.0.0.1:7401");
  }
  if (flags.data.empty()) {
    flags.data = EnvOr("FENCEPOST_DATA", "http://127.0.0.1:7400");
  }
  if (flags.via.empty() && spec.flags.count("via") != 0) {
    flags.via = EnvOr("FENCEPOST_VIA", "");
  }
  return flags;
}

void Require(bool present, std::string_view flag) {
  if (!present) throw UsageError("--" + std::string(flag) + " is required");
}

milliseconds RequireTtl(const Flags& flags) {
  Require(flags.ttl.has_value(), "ttl");
  if (*flags.ttl < kMinTtl || *flags.ttl > kMaxTtl) {
    throw UsageError("--ttl must be from 100ms to 1h");
  }
  return *flags.ttl;
}

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

void PrintBody(const std::string& body) {
  std::cout << body;
  if (!body.empty() && body.back() != '\n') std::cout << '\n';
  std::cout.flush();
}

// What a refusal says, for people: the problem's detail, else the body.
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

// 50 to 250 ms.
milliseconds Jitter() {
  thread_local std::mt19937_64 random(std::random_device{}());
  return milliseconds(std::uniform_int_distribution<int>(50, 250)(random));
}

bool Retryable(const Result& result) {
  return !result.ok() || result.response.status == 409 ||
         result.response.status >= 500;
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

// ---- batch ----

// The most batch JSON `batch` reads; a server's --max-body (4 MiB by
// default) may refuse far less.
constexpr std::size_t kMaxBatchBytes = std::size_t{64} << 20;

// The whole of FILE, or of standard input when FILE is absent or "-".
std::string ReadBatchDocument(const Flags& flags) {
  const bool from_stdin =
      flags.positional.empty() || flags.positional[0] == "-";
  const std::string name = from_stdin ? "standard input" : flags.positional[0];
  std::ifstream file;
  if (!from_stdin) {
    file.open(name, std::ios::binary);
    if (!file) throw UsageError("cannot open " + name);
  }
  std::istream& in = from_stdin ? std::cin : file;
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
  std::string body = ReadBatchDocument(flags);
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

// ---- lease run ----

void Log(const std::string& line) {
  std::cerr << "fencepost lease run: " << line << std::endl;
}

// A descriptor closed on scope exit.
struct Fd {
  int fd = -1;
  explicit Fd(int f) : fd(f) {}
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
};

// CMD as execve needs it, or why it cannot run. A name with a '/' is taken
// as it is, any other is looked up on $PATH, as a shell does.
struct Resolved {
  std::string path;     // when found and executable
  int exit_status = 0;  // otherwise: kNotFound or kCannotExecute
  std::string why;      // otherwise: for people
};

// 0 when `path` is a file this process may execute, else the errno-style
// reason it is not.
int Executable(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return errno;
  if (S_ISDIR(st.st_mode)) return EISDIR;
  if (!S_ISREG(st.st_mode) || ::access(path.c_str(), X_OK) != 0) return EACCES;
  return 0;
}

Resolved Resolve(const std::string& name) {
  const auto refused = [&name](int error) {
    const bool missing = error == ENOENT || error == ENOTDIR;
    return Resolved{"", missing ? kNotFound : kCannotExecute,
                    name + ": " + std::strerror(error)};
  };
  if (name.find('/') != std::string::npos) {
    const int error = Executable(name);
    return error == 0 ? Resolved{name, 0, ""} : refused(error);
  }
  const char* path = std::getenv("PATH");
  const std::string dirs =
      path != nullptr && *path != '\0' ? path : "/usr/local/bin:/usr/bin:/bin";
  // A file found but not executable is reported when no later directory
  // has an executable one (126, as shells do), else "not found" (127).
  std::optional<Resolved> found_unusable;
  std::size_t start = 0;
  while (start <= dirs.size()) {
    std::size_t end = dirs.find(':', start);
    if (end == std::string::npos) end = dirs.size();
    const std::string dir = dirs.substr(start, end - start);
    const std::string candidate = (dir.empty() ? "." : dir) + "/" + name;
    const int error = Executable(candidate);
    if (error == 0) return Resolved{candidate, 0, ""};
    if (error == EACCES && !found_unusable) {
      found_unusable = refused(error);
      found_unusable->why = candidate + ": " + std::strerror(error);
    }
    start = end + 1;
  }
  if (found_unusable) return *found_unusable;
  return Resolved{"", kNotFound, name + ": command not found"};
}

// The environment of CMD: ours, with the lease's three variables set.
std::vector<std::string> ChildEnvironment(const std::string& name,
                                          const std::string& holder,
                                          std::uint64_t token) {
  std::vector<std::string> env;
  for (char** e = environ; *e != nullptr; ++e) {
    const std::string_view entry(*e);
    if (entry.rfind("FENCING_TOKEN=", 0) == 0 ||
        entry.rfind("FENCEPOST_LEASE=", 0) == 0 ||
        entry.rfind("FENCEPOST_HOLDER=", 0) == 0) {
      continue;
    }
    env.emplace_back(entry);
  }
  env.push_back("FENCING_TOKEN=" + std::to_string(token));
  env.push_back("FENCEPOST_LEASE=" + name);
  env.push_back("FENCEPOST_HOLDER=" + holder);
  return env;
}

std::vector<char*> Pointers(std::vector<std::string>& strings) {
  std::vector<char*> out;
  for (std::string& s : strings) out.push_back(s.data());
  out.push_back(nullptr);
  return out;
}

// Forks and execs CMD, in a process group of its own (its pid), with the
// signal mask `mask`. The group is what `lease run` signals, so that what
// CMD forks is stopped with it when the lease is lost. Only
// async-signal-safe calls happen in the child, because the keeper's thread
// runs meanwhile.
pid_t StartChild(const std::string& path, std::vector<std::string> argv,
                 std::vector<std::string> env, const sigset_t& mask) {
  std::vector<char*> argv_ptrs = Pointers(argv);
  std::vector<char*> env_ptrs = Pointers(env);
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::setpgid(0, 0);
    ::sigprocmask(SIG_SETMASK, &mask, nullptr);
    ::execve(path.c_str(), argv_ptrs.data(), env_ptrs.data());
    const int error = errno;
    static constexpr char kFailed[] =
        "fencepost lease run: cannot execute the command\n";
    [[maybe_unused]] const auto n = ::write(2, kFailed, sizeof kFailed - 1);
    ::_exit(error == ENOENT ? kNotFound : kCannotExecute);
  }
  // Both sides set the group, so that it exists before the parent signals
  // it, whichever runs first.
  if (pid > 0) ::setpgid(pid, pid);
  return pid;
}

// The signals `lease run` takes for itself (from a signalfd) and passes on
// to CMD's process group: it no longer shares lease run's group, so a
// terminal's Ctrl-C, Ctrl-\ or hangup reaches lease run alone.
constexpr int kForwarded[] = {SIGTERM, SIGINT, SIGHUP, SIGQUIT};

bool Forwarded(std::uint32_t signal) {
  return std::find(std::begin(kForwarded), std::end(kForwarded),
                   static_cast<int>(signal)) != std::end(kForwarded);
}

// Waits for a received forwarded signal for up to `timeout`; returns it,
// or 0.
int WaitForSignal(int signal_fd, milliseconds timeout) {
  pollfd p{signal_fd, POLLIN, 0};
  if (::poll(&p, 1, static_cast<int>(timeout.count())) <= 0) return 0;
  signalfd_siginfo info{};
  int got = 0;
  while (::read(signal_fd, &info, sizeof info) == sizeof info) {
    if (Forwarded(info.ssi_signo)) got = static_cast<int>(info.ssi_signo);
  }
  return got;
}

// Acquires the lease, retrying with jitter for as long as it takes. nullopt
// with `*exit_status` set when a signal or a failure that retrying cannot
// cure ends the wait.
std::optional<client::LeaseAttempt> AcquireForRun(client::LeaseBackend& leases,
                                                  milliseconds timeout,
                                                  int signal_fd,
                                                  int* exit_status) {
  const std::string& name = leases.spec().name;
  std::string state;  // the last logged waiting state
  while (true) {
    client::LeaseAttempt attempt = leases.Acquire(timeout);
    std::string now_state;
    switch (attempt.outcome) {
      case client::LeaseAttempt::Outcome::kHeld:
        return attempt;
      case client::LeaseAttempt::Outcome::kRefused:
        now_state =
            "waiting for " + name + ", held by " +
            (attempt.holder.empty() ? "another holder" : attempt.holder);
        break;
      case client::LeaseAttempt::Outcome::kFailed:
        if (!attempt.retryable) {
          Log("lease run " + name + ": " + attempt.detail);
          *exit_status = kRefused;
          return std::nullopt;
        }
        now_state = "cannot acquire " + name + " from " + leases.Describe() +
                    ": " + attempt.detail + "; retrying";
        break;
    }
    if (now_state != state) Log(now_state);
    state = now_state;
    if (const int signal = WaitForSignal(signal_fd, Jitter())) {
      Log("received signal " + std::to_string(signal) +
          " before acquiring; exiting");
      *exit_status = 128 + signal;
      return std::nullopt;
    }
  }
}

// The leases `lease run` campaigns on: fencepost's (the admin port), or
// those of the system --via names.
std::unique_ptr<client::LeaseBackend> MakeLeases(const Flags& flags,
                                                 client::LeaseSpec spec) {
  const std::string& via = flags.via;
  try {
    if (via.empty()) {
      return std::make_unique<client::FencepostLeases>(AdminOptions(flags),
                                                       std::move(spec));
    }
    if (via.rfind("etcd://", 0) == 0 || via.rfind("etcds://", 0) == 0) {
      return std::make_unique<client::EtcdLeases>(via, std::move(spec),
                                                  flags.tls_ca);
    }
    if (via.rfind("zk://", 0) == 0) {
      return std::make_unique<client::ZooKeeperLeases>(via, std::move(spec));
    }
    if (via.rfind("postgres://", 0) == 0 ||
        via.rfind("postgresql://", 0) == 0) {
      return std::make_unique<client::PostgresLeases>(via, std::move(spec));
    }
  } catch (const std::invalid_argument& e) {
    throw UsageError((via.empty() ? "" : "--via: ") + std::string(e.what()));
  }
  throw UsageError("--via: '" + via +
                   "' is not an etcd://, zk:// or postgres:// URL");
}

// lease run --fence: raises each KEY's fence to `token` before the job
// runs. kSuccess, or the exit status of the first bump that failed.
int BumpFences(const Flags& flags, std::uint64_t token) {
  if (flags.fences.empty()) return kSuccess;
  Client client = MakeClient(AdminOptions(flags));
  for (const std::string& key : flags.fences) {
    const Result result = client.Bump(key, token);
    if (!result.ok() || result.response.status / 100 != 2) {
      std::cerr << "fencepost: lease run: cannot raise the fence of " << key
                << " to " << token << ": " << Explain(result) << "\n";
      return !result.ok() || result.response.status >= 500 ? kUnavailable
                                                           : kRefused;
    }
    Log("raised the fence of " + key + " to " + std::to_string(token));
  }
  return kSuccess;
}

int ExitStatusOf(int status) {
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return kUnavailable;
}

// Whether any process of group `group` is left (zombies count: they are
// gone once their new parent reaps them).
bool GroupAlive(pid_t group) {
  return ::kill(-group, 0) == 0 || errno == EPERM;
}

// What Supervise does and has done with CMD's process group.
struct Supervision {
  pid_t pid = -1;             // CMD, leader of its process group
  std::optional<int> status;  // CMD's wait status, once it exited
  // SIGKILL is due at kill_at (a plain time and a flag: g++ 12 warns of
  // an optional<time_point> as maybe uninitialized).
  bool kill_pending = false;
  Clock::time_point kill_at;
  bool lost = false;
};

// Called when the keeper reports the lease lost: the whole group gets
// SIGTERM, and SIGKILL once --grace has passed.
void StopGroup(Supervision& s, const client::LeaseKeeper& keeper,
               milliseconds grace) {
  if (s.lost) return;
  s.lost = true;
  Log("lease lost: " + keeper.reason() +
      "; sending SIGTERM to the command's process group");
  ::kill(-s.pid, SIGTERM);
  s.kill_pending = true;
  s.kill_at = Clock::now() + grace;
}

void ForwardSignals(int signal_fd, pid_t group) {
  signalfd_siginfo info{};
  while (::read(signal_fd, &info, sizeof info) == sizeof info) {
    if (!Forwarded(info.ssi_signo)) continue;
    Log("forwarding signal " + std::to_string(info.ssi_signo) +
        " to the command's process group");
    ::kill(-group, static_cast<int>(info.ssi_signo));
  }
}

// The poll timeout: until SIGKILL is due; after CMD exited with its group
// still alive, short steps, since the group's other members send no
// SIGCHLD here.
int PollTimeout(const Supervision& s) {
  if (!s.kill_pending) return -1;
  const auto left = std::max<long long>(
      0, std::chrono::ceil<milliseconds>(s.kill_at - Clock::now()).count());
  return static_cast<int>(s.status ? std::min<long long>(left, 10) : left);
}

// Called when CMD exited with the lease held but left processes in its
// group: they would run on, fenced by nothing, once the lease is released;
// they get SIGTERM, and SIGKILL once --grace has passed.
void StopLeftovers(Supervision& s, milliseconds grace) {
  if (s.lost || s.kill_pending || !GroupAlive(s.pid)) return;
  Log("the command exited but left processes in its group; sending them "
      "SIGTERM before the lease is released");
  ::kill(-s.pid, SIGTERM);
  s.kill_pending = true;
  s.kill_at = Clock::now() + grace;
}

// Runs CMD while the keeper holds the lease; returns CMD's wait status and
// whether the lease was lost while it ran. Once the lease is lost, or CMD
// exited leaving processes in its group, it also waits, up to the grace
// period, for what CMD forked, and kills what is left of the group then.
int Supervise(pid_t pid, int signal_fd, int lost_fd,
              const client::LeaseKeeper& keeper, milliseconds grace,
              bool* lost) {
  Supervision s;
  s.pid = pid;
  while (true) {
    pollfd fds[2] = {{signal_fd, POLLIN, 0}, {lost_fd, POLLIN, 0}};
    ::poll(fds, 2, PollTimeout(s));
    if ((fds[1].revents & POLLIN) != 0) {
      std::uint64_t value = 0;
      [[maybe_unused]] const auto n = ::read(lost_fd, &value, sizeof value);
      if (!s.status) StopGroup(s, keeper, grace);
    }
    if ((fds[0].revents & POLLIN) != 0) ForwardSignals(signal_fd, pid);
    int status = 0;
    if (!s.status && ::waitpid(pid, &status, WNOHANG) == pid) {
      s.status = status;
      StopLeftovers(s, grace);
    }
    if (s.kill_pending && Clock::now() >= s.kill_at) {
      Log("the command's process group outlived the grace period; sending "
          "SIGKILL");
      ::kill(-pid, SIGKILL);
      s.kill_pending = false;
    }
    if (s.status && (!s.kill_pending || !GroupAlive(pid))) break;
  }
  *lost = s.lost;
  return *s.status;
}

int LeaseRun(const Flags& flags) {
  const std::string& name = flags.positional[0];
  const milliseconds ttl = RequireTtl(flags);
  const milliseconds grace = flags.grace.value_or(kDefaultGrace);
  const std::string holder =
      flags.holder.empty() ? client::DefaultHolderId() : flags.holder;
  const Client::Options options = AdminOptions(flags);

  // Signals are read from a signalfd; blocked before any thread starts, so
  // every thread inherits the mask and none takes them.
  sigset_t handled, previous;
  sigemptyset(&handled);
  for (const int signal : kForwarded) sigaddset(&handled, signal);
  sigaddset(&handled, SIGCHLD);
  ::pthread_sigmask(SIG_BLOCK, &handled, &previous);
  struct RestoreMask {
    const sigset_t& mask;
    ~RestoreMask() { ::pthread_sigmask(SIG_SETMASK, &mask, nullptr); }
  } restore{previous};
  const Fd signal_fd(::signalfd(-1, &handled, SFD_NONBLOCK | SFD_CLOEXEC));
  const Fd lost_fd(::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC));
  if (signal_fd.fd < 0 || lost_fd.fd < 0) {
    Log(std::string("cannot set up: ") + std::strerror(errno));
    return kUnavailable;
  }

  // Before the lease is taken: a command that cannot run must not hold it.
  const Resolved command = Resolve(flags.command[0]);
  if (command.path.empty()) {
    std::cerr << "fencepost: lease run: " << command.why << "\n";
    return command.exit_status;
  }

  const std::unique_ptr<client::LeaseBackend> leases =
      MakeLeases(flags, client::LeaseSpec{name, holder, ttl});
  const milliseconds timeout = options.timeout;
  int exit_status = 0;
  const std::optional<client::LeaseAttempt> held =
      AcquireForRun(*leases, timeout, signal_fd.fd, &exit_status);
  if (!held) return exit_status;
  Log("acquired " + name + " token " + std::to_string(held->token) +
      (flags.via.empty() ? "" : " from " + leases->Describe()));
  if (const int status = BumpFences(flags, held->token); status != kSuccess) {
    if (const std::string why = leases->Release(held->token, timeout);
        !why.empty()) {
      Log("could not release " + name + ": " + why);
    }
    return status;
  }

  client::LeaseKeeper::Options keeper_options;
  keeper_options.timeout = timeout;
  const int notify = lost_fd.fd;
  client::LeaseKeeper keeper(
      *leases, *held, keeper_options, [notify](const std::string&) {
        const std::uint64_t one = 1;
        [[maybe_unused]] const auto n = ::write(notify, &one, sizeof one);
      });

  const pid_t pid =
      StartChild(command.path, flags.command,
                 ChildEnvironment(name, holder, held->token), previous);
  if (pid < 0) {
    Log(std::string("cannot start the command: ") + std::strerror(errno));
    keeper.Release();
    return kUnavailable;
  }
  bool lost = false;
  const int status =
      Supervise(pid, signal_fd.fd, lost_fd.fd, keeper, grace, &lost);
  Log("the command exited with status " + std::to_string(ExitStatusOf(status)));
  if (const std::optional<std::string> released = keeper.Release()) {
    if (released->empty()) {
      Log("released " + name);
    } else {
      Log("could not release " + name + ": " + *released);
    }
  }
  return lost ? kLeaseLost : ExitStatusOf(status);
}

int Dispatch(const CommandSpec& spec, const Flags& flags) {
  if (spec.group == "batch") return Batch(flags);
  if (spec.group == "fence") {
    return spec.name == "get" ? Get(flags, false) : FenceBump(flags);
  }
  if (spec.name == "acquire") return LeaseAcquire(flags);
  if (spec.name == "release") return LeaseRelease(flags);
  if (spec.name == "get") return Get(flags, true);
  return LeaseRun(flags);
}

}  // namespace

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

}  // namespace fencepost::proxy
