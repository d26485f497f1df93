#include "cli/lease_run.h"

#include <poll.h>
#include <signal.h>
#include <sys/eventfd.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "cli/requests.h"
#include "client/client.h"
#include "client/etcd_leases.h"
#include "client/fencepost_leases.h"
#include "client/leader_elector.h"
#include "client/lease_keeper.h"
#include "client/postgres_leases.h"
#include "client/zookeeper_leases.h"

extern char** environ;

namespace fencepost::cli {
namespace {

using client::Client;
using client::Result;
using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

constexpr milliseconds kDefaultGrace{5000};

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

// The environment of CMD: ours, with the lease's variables set: its token,
// name and holder, the key whose fence guards it (the lease's name, which
// `effect` sends as Fence-Key), and FENCEPOST_DATA when `data` is given.
std::vector<std::string> ChildEnvironment(const std::string& name,
                                          const std::string& holder,
                                          std::uint64_t token,
                                          const std::string& data) {
  std::vector<std::string> env;
  for (char** e = environ; *e != nullptr; ++e) {
    const std::string_view entry(*e);
    if (entry.rfind("FENCING_TOKEN=", 0) == 0 ||
        entry.rfind("FENCEPOST_LEASE=", 0) == 0 ||
        entry.rfind("FENCEPOST_HOLDER=", 0) == 0 ||
        entry.rfind("FENCEPOST_FENCE=", 0) == 0 ||
        (!data.empty() && entry.rfind("FENCEPOST_DATA=", 0) == 0)) {
      continue;
    }
    env.emplace_back(entry);
  }
  env.push_back("FENCING_TOKEN=" + std::to_string(token));
  env.push_back("FENCEPOST_LEASE=" + name);
  env.push_back("FENCEPOST_HOLDER=" + holder);
  env.push_back("FENCEPOST_FENCE=" + name);
  if (!data.empty()) env.push_back("FENCEPOST_DATA=" + data);
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

}  // namespace

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
                 ChildEnvironment(name, holder, held->token,
                                  flags.data_given ? flags.data : ""),
                 previous);
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

}  // namespace fencepost::cli
