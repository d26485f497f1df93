#include "tests/testing/rgw.h"

#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <memory>
#include <sstream>
#include <stdexcept>
#include <string>
#include <utility>

#include "codec/base64.h"
#include "codec/json.h"
#include "tests/testing/freeze.h"

extern char** environ;

namespace fencepost::testing {
namespace {

const std::string kRgwSh =
    std::string(FENCEPOST_SOURCE_DIR) + "/tests/coordination/rgw.sh";
const std::string kS3ObjectPy =
    std::string(FENCEPOST_SOURCE_DIR) + "/tests/coordination/s3_object.py";
// Debian's Python and its boto3: the PATH may lead to another one first.
constexpr const char* kPython = "/usr/bin/python3";

struct Outcome {
  int exit_status = -1;  // -1: killed at the deadline or by a signal
  std::string out;
  std::string err;
};

void SetCloseOnExecPipe(int fds[2]) {
  if (::pipe2(fds, O_CLOEXEC) != 0) throw std::runtime_error("pipe failed");
}

// Writes to a pipe whose reader may have exited: EPIPE, and not the
// SIGPIPE that would end the test process (blocked meanwhile, and taken
// back if it was raised).
ssize_t WriteToPipe(int fd, const char* data, std::size_t size) {
  sigset_t pipe_signal, old;
  sigemptyset(&pipe_signal);
  sigaddset(&pipe_signal, SIGPIPE);
  pthread_sigmask(SIG_BLOCK, &pipe_signal, &old);
  const ssize_t n = ::write(fd, data, size);
  const int saved = errno;
  if (n < 0 && errno == EPIPE) {
    const timespec zero = {0, 0};
    sigtimedwait(&pipe_signal, nullptr, &zero);
  }
  pthread_sigmask(SIG_SETMASK, &old, nullptr);
  errno = saved;
  return n;
}

// Runs `argv` with this process's environment plus `env` (NAME=VALUE,
// replacing a variable of the same name), `input` on its stdin; its output
// and error are collected until it exits. Killed after `timeout`. The pipes
// are close-on-exec so that a child started meanwhile by another thread
// does not hold them open.
Outcome Run(const std::vector<std::string>& argv,
            const std::vector<std::string>& env, std::string_view input,
            std::chrono::seconds timeout) {
  std::vector<std::string> environment;
  for (char** e = environ; *e != nullptr; ++e) {
    const std::string_view var(*e);
    const auto name = var.substr(0, var.find('=') + 1);
    bool replaced = false;
    for (const std::string& add : env) {
      replaced = replaced || add.compare(0, name.size(), name) == 0;
    }
    if (!replaced) environment.emplace_back(var);
  }
  environment.insert(environment.end(), env.begin(), env.end());
  std::vector<char*> args, envp;
  std::vector<std::string> argv_copy = argv;
  for (std::string& a : argv_copy) args.push_back(a.data());
  args.push_back(nullptr);
  for (std::string& e : environment) envp.push_back(e.data());
  envp.push_back(nullptr);

  int in[2], out[2], err[2];
  SetCloseOnExecPipe(in);
  SetCloseOnExecPipe(out);
  SetCloseOnExecPipe(err);
  const pid_t pid = ::fork();
  if (pid < 0) throw std::runtime_error("fork failed");
  if (pid == 0) {
    ::dup2(in[0], 0);
    ::dup2(out[1], 1);
    ::dup2(err[1], 2);
    ::execve(args[0], args.data(), envp.data());
    _exit(127);
  }
  ::close(in[0]);
  ::close(out[1]);
  ::close(err[1]);
  ::fcntl(in[1], F_SETFL, O_NONBLOCK);
  Outcome outcome;
  std::size_t written = 0;
  if (input.empty()) ::close(in[1]);
  int open_outputs = 2;
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (open_outputs > 0) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) break;
    pollfd fds[3] = {{out[0], POLLIN, 0}, {err[0], POLLIN, 0}, {-1, 0, 0}};
    if (written < input.size()) fds[2] = {in[1], POLLOUT, 0};
    if (::poll(fds, 3, static_cast<int>(left.count())) < 0 && errno != EINTR) {
      break;
    }
    for (int i = 0; i < 2; ++i) {
      if (fds[i].fd < 0 || fds[i].revents == 0) continue;
      char buffer[65536];
      const ssize_t n = ::read(fds[i].fd, buffer, sizeof buffer);
      if (n > 0) {
        (i == 0 ? outcome.out : outcome.err).append(buffer, n);
      } else if (n == 0 || errno != EINTR) {
        ::close(fds[i].fd);
        (i == 0 ? out[0] : err[0]) = -1;
        --open_outputs;
      }
    }
    if (fds[2].fd >= 0 && fds[2].revents != 0) {
      const ssize_t n =
          WriteToPipe(in[1], input.data() + written, input.size() - written);
      if (n > 0) written += n;
      if (n < 0 && errno != EAGAIN && errno != EINTR) written = input.size();
      if (written == input.size()) ::close(in[1]);
    }
  }
  if (written < input.size()) ::close(in[1]);
  if (out[0] >= 0) ::close(out[0]);
  if (err[0] >= 0) ::close(err[0]);
  if (open_outputs > 0) ::kill(pid, SIGKILL);
  int status = 0;
  ::waitpid(pid, &status, 0);
  if (open_outputs == 0 && WIFEXITED(status)) {
    outcome.exit_status = WEXITSTATUS(status);
  }
  return outcome;
}

std::string Member(const codec::JsonValue& object, std::string_view name) {
  const codec::JsonValue* value = object.Find(name);
  return value == nullptr ? "" : value->text;
}

// s3_object.py's one line: the object, and the keys of a listing.
S3Object ParseAnswer(const std::string& line, std::vector<std::string>* keys) {
  codec::JsonValue answer;
  codec::JsonLimits limits;
  limits.items = 1 << 20;
  limits.members = 1024;
  limits.values = 1 << 22;
  const std::string problem = codec::ParseJson(line, &answer, limits);
  if (!problem.empty() || answer.kind != codec::JsonValue::Kind::kObject) {
    throw std::runtime_error("s3_object.py answered no JSON object (" +
                             problem + "): " + line);
  }
  S3Object object;
  object.status = std::atoi(Member(answer, "status").c_str());
  object.error = Member(answer, "error");
  object.request_id = Member(answer, "request_id");
  object.etag = Member(answer, "etag");
  object.content_type = Member(answer, "content_type");
  object.content_length = std::atoll(Member(answer, "content_length").c_str());
  if (const auto* metadata = answer.Find("metadata")) {
    for (const codec::JsonMember& m : metadata->members) {
      object.metadata[m.name] = m.value.text;
    }
  }
  if (const auto* body = answer.Find("body_b64")) {
    if (!codec::DecodeBase64(body->text, &object.body)) {
      throw std::runtime_error("s3_object.py sent a body that is no base64");
    }
  }
  const codec::JsonValue* listed = answer.Find("keys");
  if (keys != nullptr && listed != nullptr) {
    for (const codec::JsonValue& key : listed->items) keys->push_back(key.text);
  }
  return object;
}

std::string TempBase() {
  const char* tmp = std::getenv("TMPDIR");
  return tmp != nullptr && *tmp != '\0' ? tmp : "/tmp";
}

}  // namespace

Rgw& Rgw::Shared() {
  static std::mutex mu;
  static std::unique_ptr<Rgw> shared;
  static std::string failure;
  std::lock_guard lock(mu);
  if (!failure.empty()) throw std::runtime_error(failure);
  if (shared == nullptr) {
    try {
      shared = std::make_unique<Rgw>();
    } catch (const std::exception& e) {
      failure = e.what();
      throw;
    }
  }
  return *shared;
}

Rgw::Rgw() {
  std::string pattern = TempBase() + "/fencepost-rgw.XXXXXX";
  if (::mkdtemp(pattern.data()) == nullptr) {
    throw std::runtime_error("mkdtemp failed");
  }
  // rgw.sh stop (or its watcher, when this process dies) removes it.
  dir_ = pattern;
  try {
    Script("start", std::to_string(::getpid()));
  } catch (...) {
    Run({kRgwSh, "stop", dir_}, {}, "", std::chrono::seconds(30));
    throw;
  }
  std::ifstream env(dir_ + "/env");
  std::string line;
  while (std::getline(env, line)) {
    const auto eq = line.find('=');
    const std::string name = line.substr(0, eq), value = line.substr(eq + 1);
    if (name == "S3_ENDPOINT") endpoint_ = value;
    if (name == "S3_REGION") region_ = value;
    if (name == "S3_BUCKET") bucket_ = value;
    if (name == "AWS_ACCESS_KEY_ID") access_key_id_ = value;
    if (name == "AWS_SECRET_ACCESS_KEY") secret_access_key_ = value;
    if (name == "CEPH_CONF") ceph_conf_ = value;
  }
  port_ = static_cast<std::uint16_t>(
      std::atoi(endpoint_.substr(endpoint_.rfind(':') + 1).c_str()));
  gateway_pid_ = std::atoi(Script("gateway-pid").c_str());
  if (gateway_pid_ <= 0) throw std::runtime_error("rgw.sh named no radosgw");
}

Rgw::~Rgw() {
  // SIGKILL to each daemon: a paused gateway needs no SIGCONT first.
  Run({kRgwSh, "stop", dir_}, {}, "", std::chrono::seconds(30));
}

std::vector<std::string> Rgw::Env() const {
  return {"S3_ENDPOINT=" + endpoint_,
          "S3_REGION=" + region_,
          "S3_BUCKET=" + bucket_,
          "AWS_ACCESS_KEY_ID=" + access_key_id_,
          "AWS_SECRET_ACCESS_KEY=" + secret_access_key_,
          "CEPH_CONF=" + ceph_conf_};
}

std::string Rgw::UniquePrefix(std::string_view name) {
  std::lock_guard lock(mu_);
  return std::string(name) + "." + std::to_string(++prefixes_) + "/";
}

std::string Rgw::Script(const std::string& command,
                        const std::string& arg) const {
  std::vector<std::string> argv = {kRgwSh, command, dir_};
  if (!arg.empty()) argv.push_back(arg);
  const Outcome outcome = Run(argv, {}, "", std::chrono::seconds(120));
  if (outcome.exit_status != 0) {
    throw std::runtime_error("rgw.sh " + command + " failed: " + outcome.err);
  }
  return outcome.out;
}

void Rgw::PauseGateway() {
  std::lock_guard lock(mu_);
  // Never kill(-1 or 0, ...): that would stop every process we may signal.
  if (gateway_pid_ <= 0 || ::kill(gateway_pid_, 0) != 0) {
    throw std::runtime_error("radosgw cannot be paused: it does not run");
  }
  // Until every thread is stopped, one still running may answer.
  paused_ = true;
  if (!Freeze(gateway_pid_)) {
    throw std::runtime_error("radosgw did not stop within 5 s of SIGSTOP");
  }
}

void Rgw::ResumeGateway() {
  std::lock_guard lock(mu_);
  if (paused_ && gateway_pid_ > 0) ::kill(gateway_pid_, SIGCONT);
  paused_ = false;
}

void Rgw::StopGateway() {
  std::lock_guard lock(mu_);
  Script("gateway-stop");
  gateway_pid_ = -1;  // its pid may be another process's soon
  paused_ = false;
}

void Rgw::StartGateway() {
  std::lock_guard lock(mu_);
  const Outcome running =
      Run({kRgwSh, "gateway-pid", dir_}, {}, "", std::chrono::seconds(10));
  if (running.exit_status == 0) return;
  Script("gateway-start");
  gateway_pid_ = std::atoi(Script("gateway-pid").c_str());
  if (gateway_pid_ <= 0) throw std::runtime_error("rgw.sh named no radosgw");
}

pid_t Rgw::gateway_pid() const {
  std::lock_guard lock(mu_);
  return gateway_pid_;
}

S3Object Rgw::Client(const std::vector<std::string>& args,
                     std::string_view body,
                     std::vector<std::string>* keys) const {
  std::vector<std::string> argv = {kPython, kS3ObjectPy};
  argv.insert(argv.end(), args.begin(), args.end());
  const Outcome outcome = Run(argv, Env(), body, std::chrono::seconds(90));
  if (outcome.exit_status != 0 && outcome.exit_status != 1) {
    throw std::runtime_error("s3_object.py failed (" +
                             std::to_string(outcome.exit_status) +
                             "): " + outcome.out + outcome.err);
  }
  return ParseAnswer(outcome.out, keys);
}

S3Object Rgw::Get(std::string_view key) const {
  return Client({"--", "get", std::string(key)});
}

S3Object Rgw::Head(std::string_view key) const {
  return Client({"--", "head", std::string(key)});
}

S3Object Rgw::Put(std::string_view key, std::string_view body,
                  const S3Put& options) const {
  std::vector<std::string> args;
  for (const auto& [name, value] : options.metadata) {
    args.insert(args.end(), {"--metadata", name + "=" + value});
  }
  const std::pair<const char*, const std::string*> flags[] = {
      {"--content-type", &options.content_type},
      {"--if-match", &options.if_match},
      {"--if-none-match", &options.if_none_match},
      {"--endpoint", &options.endpoint}};
  for (const auto& [flag, value] : flags) {
    if (!value->empty()) args.insert(args.end(), {flag, *value});
  }
  args.insert(args.end(), {"--", "put", std::string(key)});
  return Client(args, body);
}

S3Object Rgw::Delete(std::string_view key, std::string_view if_match) const {
  std::vector<std::string> args;
  if (!if_match.empty()) args = {"--if-match", std::string(if_match)};
  args.insert(args.end(), {"--", "delete", std::string(key)});
  return Client(args);
}

std::vector<std::string> Rgw::List(std::string_view prefix) const {
  std::vector<std::string> keys;
  const S3Object answer =
      Client({"--", "list", std::string(prefix)}, "", &keys);
  if (answer.status != 200) {
    throw std::runtime_error("listing " + std::string(prefix) + " answered " +
                             std::to_string(answer.status) + " " +
                             answer.error);
  }
  return keys;
}

}  // namespace fencepost::testing
