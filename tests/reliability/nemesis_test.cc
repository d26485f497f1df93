// The nemesis of the stores that keep values elsewhere (fs:, http:// on a
// real nginx WebDAV store, s3:// on the real Ceph RGW, and http:// with the
// fences in a real etcd): leaders write with rising tokens while, at moments
// a seeded RNG picks, the store is paused and resumed, fencepost is stopped
// (SIGTERM or SIGKILL, also while the store is paused) and started again,
// fencepost or etcd is frozen for a moment, and leaders are paused past
// their term and then write with their old token. Every write (with its
// answer, or none) and every value read along the way goes to the history
// checker (history.h), and at the end every key is read back, through
// fencepost and straight from the store: no acknowledged write lost, no
// value from a lower token after a higher one was acknowledged.
//
// Leaders: the tokens come from an election outside fencepost (as from a
// lock service): one term per domain at a time, each term a fresh token
// from one rising counter. A new leader bumps its domain's fence (one
// --fence-scope per domain) and then writes the domain's keys until its
// term ends. One term in four the leader pauses (a GC pause, a stall) until
// well past its term, while the next leader takes over, and then sends one
// more write with its old token.
//
// The store's pauses last at most kLongestPause, less than
// --upstream-timeout + --upstream-settle: a write sent into a pause lands
// within the hold that its unknown outcome (or the restart) makes, the
// bound fencepost documents for the store's delays. The same holds for a
// single write the relay in front of the store stalls, also while
// fencepost is stopped and started: the write of a dead process lands
// after the new one started, and the start must hold its fence until then
// (timeout + settle after a crash, what was left of the holds after a
// clean stop); a settle shorter than the longest stall makes a start that
// holds only the settle lose. fs: has no store of its own to pause: its
// faults are fencepost's stops and freezes and the leaders' pauses.
//
// Before the nemesis starts, one scene is forced (the backends with a relay
// in front of the store: http:// and s3://): a write to neg/k is held by the
// relay until fencepost answered 504, a newer write to neg/k is sent, and
// then the old one is let go to the store. With the hold (the gate) the
// newer write is held until the old one has landed and ends up last;
// without it (FENCEPOST_TEST_DISABLE_UPSTREAM_GATE=1, NemesisNegativeTest,
// the negative control) the old write lands over an acknowledged newer one
// and the checker says so. fs: has no such scene and no negative control:
// a file write's outcome is always known, so its gate never holds, and the
// test build has no switch to turn its ordering off.
//
// Each run prints its seed, its operations (accepted, rejected, unknown,
// held, errors) and its faults by kind.
//   FENCEPOST_NEMESIS_SECONDS  seconds of faults per run (default 18; the
//                              negative control runs a third of it)
//   FENCEPOST_NEMESIS_SEED     the seed to replay (default: a random one)
// A replay with one seed draws the same faults in the same order; the
// timing of the threads, and so the history, differs from run to run.
// A long run: FENCEPOST_NEMESIS_SECONDS=600 reliability_test
// --gtest_filter='*Nemesis*' (ctest stops a case after 300 s).

#include <gtest/gtest.h>
#include <signal.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <iostream>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "tests/coordination/shell.h"
#include "tests/reliability/history.h"
#include "tests/reliability/load.h"
#include "tests/testing/answer_dropper.h"
#include "tests/testing/freeze.h"
#include "tests/testing/http_client.h"
#include "tests/testing/rgw.h"
#include "tests/testing/server_process.h"
#include "tests/testing/temp_dir.h"
#include "tests/testing/upstreams.h"

namespace fencepost::reliability {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;
using testing::HttpClient;
using testing::HttpResponse;
using testing::ServerProcess;

// A start after a kill holds timeout + settle; one after a 504, settle:
// a stall longer than settle alone catches a start that holds too little.
constexpr char kUpstreamTimeout[] = "2";
constexpr char kUpstreamSettle[] = "2";
constexpr milliseconds kLongestPause{3200};  // < timeout + settle (4 s)

const std::vector<std::string> kDomains = {"a/", "b/"};
constexpr int kKeysPerDomain = 4;
constexpr int kLeadersPerDomain = 2;
constexpr char kForcedKey[] = "neg/k";

std::vector<std::string> Keys() {
  std::vector<std::string> keys;
  for (const std::string& d : kDomains) {
    for (int k = 0; k < kKeysPerDomain; ++k) {
      keys.push_back(d + "k" + std::to_string(k));
    }
  }
  keys.push_back(kForcedKey);
  return keys;
}

int Seconds() {
  const char* text = std::getenv("FENCEPOST_NEMESIS_SECONDS");
  return text ? std::max(1, std::atoi(text)) : 18;
}

std::uint32_t Seed() {
  const char* text = std::getenv("FENCEPOST_NEMESIS_SEED");
  return text ? static_cast<std::uint32_t>(std::stoul(text))
              : std::random_device{}();
}

std::int64_t Now() { return SteadyNs(Clock::now()); }

enum class Backend { kFs, kHttp, kS3, kHttpEtcd, kS3Etcd };

enum Fault {
  kStorePause,
  kStorePauseKill,
  kStorePauseTerm,
  kKill,
  kTerm,
  kStalledWrite,  // one write held by the relay, then let go to the store
  kStalledWriteKill,
  kStalledWriteTerm,
  kFreeze,       // fencepost SIGSTOPped, then SIGCONT
  kEtcdPause,    // the fence store SIGSTOPped, then SIGCONT
  kLeaderPause,  // a leader paused past its term (counted by the leaders)
  kFaults,
};
constexpr const char* kFaultNames[kFaults] = {"store paused",
                                              "store paused + SIGKILL",
                                              "store paused + SIGTERM",
                                              "SIGKILL",
                                              "SIGTERM",
                                              "write stalled",
                                              "write stalled + SIGKILL",
                                              "write stalled + SIGTERM",
                                              "fencepost frozen",
                                              "etcd paused",
                                              "leader paused past its term"};

// The ports of the server that runs now; none while it is down.
class Current {
 public:
  void Set(std::uint16_t data, std::uint16_t admin) {
    std::lock_guard lock(mu_);
    data_ = data;
    admin_ = admin;
  }
  std::pair<std::uint16_t, std::uint16_t> Get() const {
    std::lock_guard lock(mu_);
    return {data_, admin_};
  }

 private:
  mutable std::mutex mu_;
  std::uint16_t data_ = 0;
  std::uint16_t admin_ = 0;
};

// The writes and reads as the clients saw them.
class History {
 public:
  std::size_t Begin(const Op& op) {
    std::lock_guard lock(mu_);
    ops_.push_back(op);  // kUnknown until answered
    return ops_.size() - 1;
  }
  // Records the answer to ops_[at]; returns its outcome.
  Op::Outcome End(std::size_t at, const HttpResponse& r) {
    std::lock_guard lock(mu_);
    Op& op = ops_[at];
    op.acked_ns = Now();
    if (r.status / 100 == 2) {
      op.outcome = Op::Outcome::kAccepted;
    } else if (r.status == 409) {
      op.outcome = Op::Outcome::kRejected;
      const auto field = r.body.find("\"current_token\":");
      if (field != std::string::npos) {
        op.current_token = std::stoull(r.body.substr(field + 16));
      }
    } else if (r.status == 503 &&
               r.body.find("fence-held") != std::string::npos) {
      op.outcome = Op::Outcome::kRefused;  // held: refused before any change
    } else if (r.status == 502 || r.status == 503 || r.status == 504) {
      // The fence may have been raised and the value sent: it may land.
      op.outcome = Op::Outcome::kUnknown;
      ++unknown_answers_;
    } else {
      op.outcome = Op::Outcome::kError;
      op.status = r.status;
    }
    return op.outcome;
  }
  void AddRead(Read read) {
    std::lock_guard lock(mu_);
    reads_.push_back(std::move(read));
  }
  void ReadFailed() { ++failed_reads_; }

  // Once every client has stopped.
  const std::vector<Op>& ops() const { return ops_; }
  const std::vector<Read>& reads() const { return reads_; }
  std::size_t unknown_answers() const { return unknown_answers_; }
  std::size_t failed_reads() const { return failed_reads_; }

 private:
  std::mutex mu_;
  std::vector<Op> ops_;
  std::vector<Read> reads_;
  std::size_t unknown_answers_ = 0;  // 502, 503 (not held), 504
  std::atomic<std::size_t> failed_reads_ = 0;
};

// One term at a time per domain; every term a fresh token of one rising
// counter, given once the previous term of its domain has ended.
class Elections {
 public:
  struct Term {
    std::uint64_t token = 0;
    Clock::time_point end;
  };
  // Waits for the domain's term to end (false when `stop` comes first).
  bool Acquire(std::size_t domain, milliseconds length,
               const std::atomic<bool>& stop, Term* term) {
    std::unique_lock lock(mu_);
    while (!stop && Clock::now() < ends_[domain]) {
      lock.unlock();
      std::this_thread::sleep_for(milliseconds(5));
      lock.lock();
    }
    if (stop) return false;
    term->token = ++counter_;
    term->end = Clock::now() + length;
    ends_[domain] = term->end;
    return true;
  }

 private:
  std::mutex mu_;
  std::uint64_t counter_ = 100;
  std::map<std::size_t, Clock::time_point> ends_;
};

// The test's clients: they write and read through whichever server runs.
class Clients {
 public:
  Clients(const Current& current, bool tokens_in_bodies)
      : current_(current), tokens_in_bodies_(tokens_in_bodies) {}
  ~Clients() { Stop(); }

  // Sends `op` once a server runs (or gives up when stopped): its outcome,
  // kUnknown when the connection failed after it was sent.
  Op::Outcome Send(Op op) {
    while (!stop_) {
      const auto [data, admin] = current_.Get();
      if (data == 0) {
        std::this_thread::sleep_for(milliseconds(20));
        continue;
      }
      std::optional<HttpClient> client;
      try {
        client.emplace(op.kind == Op::Kind::kBump ? admin : data, 10);
      } catch (const std::exception&) {
        std::this_thread::sleep_for(milliseconds(20));  // not sent
        continue;
      }
      op.sent_ns = Now();
      const std::size_t at = history_.Begin(op);
      const testing::Headers token = {
          {"Fencing-Token", std::to_string(op.token)}};
      try {
        const HttpResponse r =
            op.kind == Op::Kind::kBump
                ? client->Request("PUT", "/v1/fences/" + op.key, token)
                : client->Request("PUT", "/" + op.key, token, op.body);
        return history_.End(at, r);
      } catch (const std::exception&) {
        return Op::Outcome::kUnknown;  // the server went, or closed on it
      }
    }
    return Op::Outcome::kUnknown;
  }

  void StartLeaders(Elections& elections, std::uint32_t seed) {
    for (std::size_t d = 0; d < kDomains.size(); ++d) {
      for (int l = 0; l < kLeadersPerDomain; ++l) {
        const std::uint32_t own =
            seed + static_cast<std::uint32_t>(d * kLeadersPerDomain + l + 1);
        threads_.emplace_back([this, &elections, d, l, own] {
          Lead(elections, d, "L" + std::to_string(d) + std::to_string(l), own);
        });
      }
    }
    threads_.emplace_back([this, seed] { ReadAlong(seed); });
  }

  void Stop() {
    stop_ = true;
    for (auto& t : threads_) t.join();
    threads_.clear();
  }

  History& history() { return history_; }
  std::size_t leader_pauses() const { return leader_pauses_; }

 private:
  // Sleeps until `until` or until stopped.
  void SleepUntil(Clock::time_point until) const {
    while (!stop_ && Clock::now() < until) {
      std::this_thread::sleep_for(milliseconds(10));
    }
  }

  void Lead(Elections& elections, std::size_t domain, const std::string& name,
            std::uint32_t seed) {
    std::mt19937 rng(seed);
    const std::string& prefix = kDomains[domain];
    int n = 0;
    Elections::Term term;
    while (elections.Acquire(domain, milliseconds(300 + rng() % 500), stop_,
                             &term)) {
      auto put = [&] {
        Op op;
        op.key = prefix + "k" + std::to_string(rng() % kKeysPerDomain);
        op.token = term.token;
        op.body = "value " + std::to_string(term.token) + " from " + name +
                  " #" + std::to_string(n++);
        return Send(op);
      };
      Op bump;
      bump.kind = Op::Kind::kBump;
      bump.key = prefix + "leader";
      bump.token = term.token;
      Send(bump);
      const bool will_pause = rng() % 4 == 0;
      while (!stop_ && Clock::now() < term.end) {
        if (put() == Op::Outcome::kRefused) {
          std::this_thread::sleep_for(milliseconds(50));  // held: back off
        }
        if (will_pause && rng() % 3 == 0) {
          // Past its term: the next leader has its token meanwhile.
          ++leader_pauses_;
          SleepUntil(term.end + milliseconds(300 + rng() % 1500));
          if (!stop_) put();
          break;
        }
        std::this_thread::sleep_for(milliseconds(rng() % 20));
      }
    }
  }

  void ReadAlong(std::uint32_t seed) {
    std::mt19937 rng(seed);
    const std::vector<std::string> keys = Keys();
    while (!stop_) {
      const std::uint16_t data = current_.Get().first;
      if (data == 0) {
        std::this_thread::sleep_for(milliseconds(20));
        continue;
      }
      Read read;
      read.key = keys[rng() % keys.size()];
      try {
        HttpClient client(data, 10);
        read.sent_ns = Now();
        const HttpResponse r = client.Request("GET", "/" + read.key);
        read.answered_ns = Now();
        read.status = r.status;
        if (r.status == 200) {
          read.body = r.body;
          if (tokens_in_bodies_) {
            read.token = TokenOfBody(r.body);
          } else if (r.has("fencing-token")) {
            read.token = std::stoull(r.header("fencing-token"));
          }
        }
      } catch (const std::exception&) {
        history_.ReadFailed();  // the server went: nothing to judge
        continue;
      }
      // A read the store could not answer (paused: 504) shows nothing.
      if (read.status == 200 || read.status == 404) {
        history_.AddRead(std::move(read));
      } else {
        history_.ReadFailed();
      }
      std::this_thread::sleep_for(milliseconds(rng() % 10));
    }
  }

  const Current& current_;
  const bool tokens_in_bodies_;
  std::atomic<bool> stop_ = false;
  std::atomic<std::size_t> leader_pauses_ = 0;
  History history_;
  std::vector<std::thread> threads_;
};

// Waits (at most `timeout`) until `done` holds.
bool Await(const std::function<bool()>& done,
           milliseconds timeout = milliseconds(10000)) {
  const auto deadline = Clock::now() + timeout;
  while (!done() && Clock::now() < deadline) {
    std::this_thread::sleep_for(milliseconds(5));
  }
  return done();
}

std::string Describe(Backend backend) {
  switch (backend) {
    case Backend::kFs:
      return "fs:DIR";
    case Backend::kHttp:
      return "http:// (nginx)";
    case Backend::kS3:
      return "s3:// (RGW)";
    case Backend::kHttpEtcd:
      return "http:// (nginx), fences in etcd";
    case Backend::kS3Etcd:
      return "s3:// (RGW), fences in etcd";
  }
  return "";
}

// One backend's stores, fencepost in front of them, and the faults.
class Nemesis {
 public:
  Nemesis(Backend backend, bool gate) : backend_(backend), gate_(gate) {}
  ~Nemesis() {
    if (!etcd_url_.empty()) {
      testing::Shell(std::string(FENCEPOST_ETCD_SH) + " stop " +
                     (dir_ / "etcd"));
    }
  }

  void Run(int seconds, std::uint32_t seed) {
    std::cout << "nemesis " << Describe(backend_) << ": seed " << seed
              << " (FENCEPOST_NEMESIS_SEED replays its faults)" << std::endl;
    SetUpStores();
    if (::testing::Test::HasFatalFailure()) return;
    Start();
    Clients clients(current_, InBodies());
    const auto began = Clock::now();
    if (relay_) ForceALateWrite(clients);
    Elections elections;
    clients.StartLeaders(elections, seed);
    std::mt19937 rng(seed);
    std::vector<Fault> kinds = {kKill, kTerm, kFreeze};
    if (backend_ != Backend::kFs) {
      kinds.insert(kinds.end(),
                   {kStorePause, kStorePause, kStorePauseKill, kStorePauseTerm,
                    kStalledWrite, kStalledWriteKill, kStalledWriteTerm});
    }
    if (InEtcd()) kinds.push_back(kEtcdPause);
    const auto deadline = Clock::now() + std::chrono::seconds(seconds);
    while (Clock::now() < deadline && !::testing::Test::HasFatalFailure()) {
      std::this_thread::sleep_for(milliseconds(300 + rng() % 900));
      const Fault fault = kinds[rng() % kinds.size()];
      if (Inject(fault, rng)) ++faults_[fault];
    }
    clients.Stop();
    faults_[kLeaderPause] = clients.leader_pauses();
    // What a pause left on the wire has landed by now.
    std::this_thread::sleep_for(milliseconds(1000));
    Judge(clients.history(), Clock::now() - began, seed);
  }

  const std::vector<std::string>& violations() const { return violations_; }

 private:
  // Values in the stored object's metadata (s3://), or in the body.
  bool S3() const {
    return backend_ == Backend::kS3 || backend_ == Backend::kS3Etcd;
  }
  bool InEtcd() const {
    return backend_ == Backend::kHttpEtcd || backend_ == Backend::kS3Etcd;
  }
  bool InBodies() const {
    return backend_ == Backend::kHttp || backend_ == Backend::kHttpEtcd;
  }

  void SetUpStores() {
    if (InEtcd()) {
      etcd_url_ = testing::ShellLine(std::string(FENCEPOST_ETCD_SH) +
                                     " start " + (dir_ / "etcd"));
      ASSERT_FALSE(etcd_url_.empty()) << "etcd did not start";
      args_ = {"--fence-store", etcd_url_ + "/nemesis"};
    }
    switch (backend_) {
      case Backend::kFs:
        args_ = {"--backend", "fs:" + (dir_ / "store")};
        break;
      case Backend::kHttpEtcd:
      case Backend::kHttp:
        nginx_.emplace(dir_ / "root", dir_ / "nginx");
        relay_ = std::make_unique<testing::AnswerDropper>("127.0.0.1",
                                                          nginx_->port());
        args_.insert(args_.end(), {"--backend", relay_->endpoint()});
        break;
      case Backend::kS3:
      case Backend::kS3Etcd: {
        testing::Rgw& rgw = testing::Rgw::Shared();
        prefix_ = rgw.UniquePrefix(gate_ ? "nemesis" : "nemesisnogate");
        relay_ =
            std::make_unique<testing::AnswerDropper>("127.0.0.1", rgw.port());
        args_.insert(args_.end(), {"--backend",
                                   "s3://" + rgw.bucket() + "/" +
                                       prefix_.substr(0, prefix_.size() - 1),
                                   "--s3-endpoint", relay_->endpoint()});
        env_ = rgw.Env();
        break;
      }
    }
    args_.insert(args_.end(), {"--upstream-timeout", kUpstreamTimeout,
                               "--upstream-settle", kUpstreamSettle});
    for (const std::string& d : kDomains) {
      args_.insert(args_.end(), {"--fence-scope", d});
    }
    if (!gate_) env_.push_back("FENCEPOST_TEST_DISABLE_UPSTREAM_GATE=1");
    // Fences in etcd: no data directory (the turns in etcd hold instead).
    if (!InEtcd()) data_dir_ = dir_ / "data";
  }

  void Start() {
    server_ = std::make_unique<ServerProcess>(data_dir_, args_, env_);
    current_.Set(server_->data_port(), server_->admin_port());
  }

  // Stops the server, with SIGKILL or SIGTERM (a clean stop: exit 0).
  void Stop(bool kill) {
    current_.Set(0, 0);
    if (kill) {
      server_->Kill();  // fails the test if it had exited by itself
    } else {
      server_->Signal(SIGTERM);
      EXPECT_EQ(server_->Wait(15), 0) << "a clean stop exits 0";
    }
    server_.reset();
  }

  void PauseStore() {
    if (S3()) {
      testing::Rgw::Shared().PauseGateway();
    } else {
      relay_->Pause();
    }
  }
  void ResumeStore() {
    if (S3()) {
      testing::Rgw::Shared().ResumeGateway();
    } else {
      relay_->Resume();
    }
  }

  // Injects `fault`; false when there was nothing to inject it on.
  bool Inject(Fault fault, std::mt19937& rng) {
    const milliseconds pause(300 + rng() % (kLongestPause.count() - 300));
    const milliseconds before(100 + rng() % 400);  // < pause
    switch (fault) {
      case kStorePause:
        PauseStore();
        std::this_thread::sleep_for(pause);
        ResumeStore();
        break;
      case kStorePauseKill:
      case kStorePauseTerm: {
        // The store comes back on its own time, whether or not the new
        // process has started by then (a start may wait for the store).
        PauseStore();
        std::thread resume([this, pause] {
          std::this_thread::sleep_for(pause);
          ResumeStore();
        });
        struct Joined {
          std::thread& thread;
          ~Joined() { thread.join(); }
        } joined{resume};
        std::this_thread::sleep_for(before);
        Stop(fault == kStorePauseKill);
        Start();
        break;
      }
      case kKill:
      case kTerm:
        Stop(fault == kKill);
        Start();
        break;
      case kStalledWrite:
      case kStalledWriteKill:
      case kStalledWriteTerm:
        if (!StallAWrite(kDomains[rng() % kDomains.size()], pause, before,
                         fault)) {
          return false;  // no write came: nothing injected
        }
        break;
      case kFreeze:
        server_->Signal(SIGSTOP);
        std::this_thread::sleep_for(pause / 2);
        server_->Signal(SIGCONT);
        break;
      case kEtcdPause: {
        const pid_t etcd = std::stoi(testing::ReadFile(dir_ / "etcd/pid"));
        EXPECT_TRUE(testing::Freeze(etcd)) << "etcd did not stop";
        std::this_thread::sleep_for(pause / 2);
        ::kill(etcd, SIGCONT);
        break;
      }
      default:
        break;
    }
    return true;
  }

  // The next write to a key of `domain`, if one comes within a second, is
  // held by the relay, as by a store slow on one request, and let go to the
  // store `pause` after it was caught (the same bound as the store's
  // pauses). With kStalledWriteKill or kStalledWriteTerm, fencepost is
  // stopped `before` after it was caught and started again meanwhile. When
  // no write came, the relay's rule is disarmed with a write of its own to a
  // key outside the test's, and nothing else is done (false).
  bool StallAWrite(const std::string& domain, milliseconds pause,
                   milliseconds before, Fault fault) {
    const std::string path = "/" + domain + "k";
    relay_->HoldRequestsTo("PUT", path, 1);
    if (Await([&] { return relay_->held() > 0; }, milliseconds(1000))) {
      const auto caught = Clock::now();
      // Let go on time, whether or not the new process has started.
      std::thread release([this, caught, pause] {
        std::this_thread::sleep_until(caught + pause);
        relay_->ReleaseHeld();
      });
      struct Joined {
        std::thread& thread;
        ~Joined() { thread.join(); }
      } joined{release};
      if (fault != kStalledWrite) {
        std::this_thread::sleep_until(caught + before);
        Stop(fault == kStalledWriteKill);
        Start();
      }
      return true;
    }
    std::atomic<bool> done = false;
    std::thread disarm([&] {
      try {
        HttpClient client(relay_->port(), 10);
        const std::string base =
            S3() ? "/" + testing::Rgw::Shared().bucket() + "/" + prefix_ : "/";
        client.Request("PUT", base + "disarm" + path, {}, "x");
      } catch (const std::exception&) {
      }
      done = true;
    });
    Await([&] { return done || relay_->held() > 0; });
    relay_->ReleaseHeld();
    disarm.join();
    return false;
  }

  // The forced scene (see the top): an old write to kForcedKey held by the
  // relay past fencepost's 504, a newer one sent, then the old one let go.
  void ForceALateWrite(Clients& clients) {
    auto put = [&](std::uint64_t token, const std::string& who) {
      Op op;
      op.key = kForcedKey;
      op.token = token;
      op.body = "value " + std::to_string(token) + " from " + who;
      return clients.Send(op);
    };
    ASSERT_EQ(put(1, "first"), Op::Outcome::kAccepted);
    relay_->HoldRequestsTo("PUT", std::string("/") + kForcedKey, 1);
    // The old write, sent again (same token, same body) while it is
    // answered before it reaches the store: a store or fence store slow to
    // start may refuse it (503) or fail it (502) first.
    std::atomic<Op::Outcome> old_outcome = Op::Outcome::kError;
    std::atomic<bool> answered = false;
    std::thread old;
    struct Joined {
      std::thread& thread;
      ~Joined() {
        if (thread.joinable()) thread.join();
      }
    } joined{old};
    for (int attempt = 0; attempt < 5 && relay_->held() == 0; ++attempt) {
      if (old.joinable()) old.join();
      answered = false;
      old = std::thread([&] {
        old_outcome = put(2, "old");
        answered = true;
      });
      Await([&] { return relay_->held() == 1 || answered; });
      if (relay_->held() == 0 && answered) {
        std::cout << "the old write was answered (outcome "
                  << static_cast<int>(old_outcome.load())
                  << ") before it reached the store; sent again" << std::endl;
      }
    }
    ASSERT_TRUE(Await([&] { return relay_->held() == 1; }))
        << "the old write reached the relay";
    old.join();  // 504 after --upstream-timeout
    EXPECT_EQ(old_outcome, Op::Outcome::kUnknown);
    Op::Outcome newer = put(3, "new");
    forced_held_ = newer == Op::Outcome::kRefused;
    if (gate_) {
      EXPECT_TRUE(forced_held_) << "a write after a 504 is held (503)";
    }
    relay_->ReleaseHeld();
    ASSERT_TRUE(Await([&] { return relay_->held() == 0; }));
    for (int i = 0; i < 100 && newer != Op::Outcome::kAccepted; ++i) {
      std::this_thread::sleep_for(milliseconds(100));
      newer = put(3, "new");
    }
    EXPECT_EQ(newer, Op::Outcome::kAccepted) << "the newer write lands";
  }

  // What the store holds for `key`, read straight from it: the token (from
  // the object's metadata, or the body) and the body.
  std::optional<std::pair<std::uint64_t, std::string>> Direct(
      const std::string& key) const {
    std::string body;
    if (S3()) {
      const testing::S3Object object =
          testing::Rgw::Shared().Get(prefix_ + key);
      if (object.status != 200) return std::nullopt;
      const auto token = object.metadata.find("fencing-token");
      return std::pair(
          token == object.metadata.end() ? 0 : std::stoull(token->second),
          object.body);
    }
    const std::string path =
        (backend_ == Backend::kFs ? dir_ / "store" : dir_ / "root") + "/" + key;
    if (!std::ifstream(path).good()) return std::nullopt;
    body = testing::ReadFile(path);
    return std::pair(TokenOfBody(body).value_or(0), body);
  }

  void Judge(const History& history, Clock::duration took, std::uint32_t seed) {
    Checker checker;
    for (const std::string& d : kDomains) checker.Scope(d);
    // A replica refuses from its cache of the fences in etcd (history.h).
    if (InEtcd()) checker.Rejecting(Rejections::kMayLag);
    checker.Add(history.ops(), history.reads());
    const std::vector<std::string> keys = Keys();
    const bool in_bodies = InBodies();
    const auto through =
        ReadState(server_->data_port(), server_->admin_port(), keys, in_bodies);
    violations_ = checker.Check(through);
    std::map<std::string, KeyState> stored = through;
    for (const std::string& key : keys) {
      KeyState& s = stored[key];
      s.value.reset();
      s.body.clear();
      if (auto found = Direct(key)) {
        s.value = found->first;
        s.body = found->second;
      }
    }
    for (std::string& v : checker.Check(stored)) {
      violations_.push_back("read from the store: " + v);
    }

    std::map<Op::Outcome, std::size_t> outcomes;
    std::size_t bumps = 0;
    for (const Op& op : history.ops()) {
      ++outcomes[op.outcome];
      bumps += op.kind == Op::Kind::kBump;
    }
    std::cout << "nemesis " << Describe(backend_)
              << (gate_ ? "" : " WITHOUT THE GATE") << ": seed " << seed << ", "
              << std::chrono::duration_cast<milliseconds>(took).count() / 1000.0
              << " s, " << history.ops().size() << " writes (" << bumps
              << " fence bumps): " << outcomes[Op::Outcome::kAccepted]
              << " accepted, " << outcomes[Op::Outcome::kRejected]
              << " rejected, " << outcomes[Op::Outcome::kUnknown]
              << " unknown (" << history.unknown_answers()
              << " answered 502/503/504), " << outcomes[Op::Outcome::kRefused]
              << " held, " << outcomes[Op::Outcome::kError] << " errors; "
              << history.reads().size() << " reads judged ("
              << history.failed_reads() << " unanswered or 5xx); faults:";
    for (int f = 0; f < kFaults; ++f) {
      if (faults_[f] > 0)
        std::cout << " " << kFaultNames[f] << " " << faults_[f] << ",";
    }
    if (relay_) {
      std::cout << " forced late write " << (forced_held_ ? "held" : "not held")
                << ",";
    }
    const auto forced = std::count_if(
        violations_.begin(), violations_.end(), [](const std::string& v) {
          return v.find(std::string(kForcedKey) + ":") != std::string::npos;
        });
    std::cout << " " << violations_.size() << " violations (" << forced
              << " of them on " << kForcedKey << ")\n";
    for (std::size_t i = 0; i < violations_.size() && i < 10; ++i) {
      std::cout << "  " << violations_[i] << "\n";
    }
    EXPECT_GT(outcomes[Op::Outcome::kAccepted], 10u) << "the leaders wrote";
  }

  const Backend backend_;
  const bool gate_;
  testing::TempDir dir_;
  std::string data_dir_;
  std::vector<std::string> args_;
  std::vector<std::string> env_;
  std::string etcd_url_;
  std::string prefix_;  // s3://
  std::optional<testing::NginxProcess> nginx_;
  std::unique_ptr<testing::AnswerDropper> relay_;
  std::unique_ptr<ServerProcess> server_;
  Current current_;
  std::size_t faults_[kFaults] = {};
  bool forced_held_ = false;
  std::vector<std::string> violations_;
};

struct NemesisCase {
  const char* name;
  Backend backend;
};
// The case as gtest (and so ctest's name of it) shows it.
void PrintTo(const NemesisCase& c, std::ostream* os) { *os << c.name; }

class NemesisTest : public ::testing::TestWithParam<NemesisCase> {};

TEST_P(NemesisTest, NoAcknowledgedWriteIsLostOrOverwrittenByAnOlderOne) {
  Nemesis nemesis(GetParam().backend, true);
  nemesis.Run(Seconds(), Seed());
  for (const std::string& v : nemesis.violations()) ADD_FAILURE() << v;
}

INSTANTIATE_TEST_SUITE_P(
    Backends, NemesisTest,
    ::testing::Values(NemesisCase{"Fs", Backend::kFs},
                      NemesisCase{"Http", Backend::kHttp},
                      NemesisCase{"S3", Backend::kS3},
                      NemesisCase{"HttpWithFencesInEtcd", Backend::kHttpEtcd},
                      NemesisCase{"S3WithFencesInEtcd", Backend::kS3Etcd}),
    [](const ::testing::TestParamInfo<NemesisCase>& info) {
      return std::string(info.param.name);
    });

// The negative control: the same nemesis with the test build's hold turned
// off. The forced scene's old write lands over the acknowledged newer one,
// and the checker must say so (the random faults may add more).
class NemesisNegativeTest : public ::testing::TestWithParam<NemesisCase> {};

TEST_P(NemesisNegativeTest, WithoutTheGateTheCheckerFindsALateWrite) {
  Nemesis nemesis(GetParam().backend, false);
  nemesis.Run(std::max(3, Seconds() / 3), Seed());
  bool forced = false;
  for (const std::string& v : nemesis.violations()) {
    forced |=
        v.rfind(std::string(kForcedKey) + ": stored value's token 2 ", 0) == 0;
  }
  EXPECT_TRUE(forced) << "negative control: without the gate the old write to "
                      << kForcedKey
                      << " lands over token 3, and the checker sees it";
}

INSTANTIATE_TEST_SUITE_P(Backends, NemesisNegativeTest,
                         ::testing::Values(NemesisCase{"Http", Backend::kHttp},
                                           NemesisCase{"S3", Backend::kS3}),
                         [](const ::testing::TestParamInfo<NemesisCase>& info) {
                           return std::string(info.param.name);
                         });

}  // namespace
}  // namespace fencepost::reliability
