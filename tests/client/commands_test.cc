// `fencepost lease ...`, `fencepost fence ...` and `fencepost batch`
// (SPEC "Client commands") run as the real binary against a real server.

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "client/client.h"
#include "client/documents.h"
#include "tests/client/helpers.h"
#include "tests/testing/bounds.h"
#include "tests/testing/server_process.h"
#include "tests/testing/temp_dir.h"

namespace fencepost::client {
namespace {

using fencepost::testing::RunFencepost;
using fencepost::testing::ServerProcess;
using fencepost::testing::TempDir;
using std::chrono::milliseconds;
using Clock = std::chrono::steady_clock;

bool Has(const std::string& haystack, const std::string& needle) {
  return haystack.find(needle) != std::string::npos;
}

TEST(CommandsTest, FenceGetAndBump) {
  TempDir dir;
  ServerProcess server(dir / "data");
  const std::string admin = "--admin=" + testing::AdminUrl(server);

  auto run = RunFencepost({"fence", "get", "jobs/a", admin});
  EXPECT_EQ(run.exit_status, 1) << run.output;

  run = RunFencepost(
      {"fence", "bump", "jobs/a", "--token", "18446744073709551615", admin});
  EXPECT_EQ(run.exit_status, 0) << run.output;
  EXPECT_TRUE(Has(run.output, "\"token\":18446744073709551615")) << run.output;

  run = RunFencepost({"fence", "get", "jobs/a", admin});
  EXPECT_EQ(run.exit_status, 0) << run.output;
  EXPECT_TRUE(Has(run.output, "\"fence\":\"jobs/a\"")) << run.output;

  run = RunFencepost({"fence", "bump", "jobs/a", "--token", "3", admin});
  EXPECT_EQ(run.exit_status, 1) << run.output;
  EXPECT_TRUE(Has(run.output, "stale-token")) << run.output;
}

TEST(CommandsTest, TheAdminUrlComesFromTheEnvironmentToo) {
  TempDir dir;
  ServerProcess server(dir / "data");
  auto run = RunFencepost({"fence", "bump", "k", "--token", "2"},
                          {"FENCEPOST_ADMIN=" + testing::AdminUrl(server)});
  EXPECT_EQ(run.exit_status, 0) << run.output;
}

TEST(CommandsTest, UsageErrorsExitTwo) {
  const std::string admin = "--admin=http://127.0.0.1:1";
  for (const std::vector<std::string>& args :
       std::vector<std::vector<std::string>>{
           {"fence"},
           {"fence", "frob", "k"},
           {"fence", "get", admin},
           {"fence", "get", "a", "b", admin},
           {"fence", "bump", "k", admin},
           {"fence", "bump", "k", "--token", "-1", admin},
           {"fence", "bump", "k", "--token", "18446744073709551616", admin},
           {"fence", "get", "k", "--bogus", "1", admin},
           {"fence", "get", "k", "--admin", "ftp://x"},
           {"lease", "acquire", "n", "--holder", "h", admin},
           {"lease", "acquire", "n", "--ttl", "10", admin},
           {"lease", "acquire", "n", "--ttl", "1.5s", admin},
           {"lease", "acquire", "n", "--ttl", "50ms", admin},
           {"lease", "acquire", "n", "--ttl", "2h", admin},
           {"lease", "release", "n", "--token", "1", admin},
           {"lease", "release", "n", "--holder", "h", admin},
           {"lease", "run", "n", "--ttl", "1s", admin},
           {"lease", "run", "n", "--ttl", "1s", admin, "--"},
           {"lease", "get", "n", "--auth-token-file", "/nonexistent", admin},
       }) {
    const auto run = RunFencepost(args);
    std::string joined;
    for (const auto& a : args) joined += a + " ";
    EXPECT_EQ(run.exit_status, 2) << joined << "\n" << run.output;
  }
}

TEST(CommandsTest, UnreachableExitsThree) {
  const testing::RefusingPort refusing;
  const std::string admin =
      "--admin=http://127.0.0.1:" + std::to_string(refusing.port());
  EXPECT_EQ(RunFencepost({"fence", "get", "k", admin}).exit_status, 3);
  EXPECT_EQ(RunFencepost({"lease", "get", "k", admin}).exit_status, 3);
  EXPECT_EQ(
      RunFencepost({"lease", "acquire", "k", "--ttl", "1s", admin}).exit_status,
      3);
}

TEST(CommandsTest, HelpExitsZero) {
  const auto run = RunFencepost({"lease", "--help"});
  EXPECT_EQ(run.exit_status, 0);
  EXPECT_TRUE(Has(run.output, "lease run")) << run.output;
}

TEST(CommandsTest, SendsTheBearerTokenFromTheFile) {
  TempDir dir;
  std::ofstream(dir / "server-tokens") << "secret\n";
  std::ofstream(dir / "client-token")
      << "# the fencepost token\n\n  secret  \n";
  ServerProcess server(dir / "data",
                       {"--auth-token-file", dir / "server-tokens"});
  const std::string admin = "--admin=" + testing::AdminUrl(server);
  EXPECT_EQ(
      RunFencepost({"fence", "bump", "k", "--token", "1", admin}).exit_status,
      1)
      << "401 is a refusal";
  const auto run = RunFencepost({"fence", "bump", "k", "--token", "1", admin,
                                 "--auth-token-file", dir / "client-token"});
  EXPECT_EQ(run.exit_status, 0) << run.output;
}

TEST(CommandsTest, LeaseAcquireReleaseGet) {
  TempDir dir;
  ServerProcess server(dir / "data");
  const std::string admin = "--admin=" + testing::AdminUrl(server);

  auto run = RunFencepost({"lease", "get", "jobs/n", admin});
  EXPECT_EQ(run.exit_status, 1) << run.output;

  run = RunFencepost(
      {"lease", "acquire", "jobs/n", "--holder", "a", "--ttl", "10s", admin});
  ASSERT_EQ(run.exit_status, 0) << run.output;
  const auto lease = ParseLease(run.output);
  ASSERT_TRUE(lease) << run.output;
  EXPECT_EQ(lease->holder, "a");

  // A racer is told who holds it, on stdout, and exits 1.
  run = RunFencepost(
      {"lease", "acquire", "jobs/n", "--holder", "b", "--ttl", "10s", admin});
  EXPECT_EQ(run.exit_status, 1) << run.output;
  EXPECT_TRUE(Has(run.output, "lease-held")) << run.output;
  EXPECT_TRUE(Has(run.output, "\"holder\":\"a\"")) << run.output;

  const auto start = Clock::now();
  run = RunFencepost({"lease", "acquire", "jobs/n", "--holder", "b", "--ttl",
                      "10s", "--wait", "700ms", admin});
  EXPECT_EQ(run.exit_status, 1) << run.output;
  EXPECT_GE(Clock::now() - start, milliseconds(700));

  run = RunFencepost({"lease", "release", "jobs/n", "--holder", "a", "--token",
                      std::to_string(lease->token + 1), admin});
  EXPECT_EQ(run.exit_status, 1) << run.output;
  EXPECT_TRUE(Has(run.output, "lease-not-held")) << run.output;
  run = RunFencepost({"lease", "release", "jobs/n", "--holder", "a", "--token",
                      std::to_string(lease->token), admin});
  EXPECT_EQ(run.exit_status, 0) << run.output;

  run = RunFencepost({"lease", "get", "jobs/n", admin});
  EXPECT_EQ(run.exit_status, 0) << run.output;
  EXPECT_TRUE(Has(run.output, "\"holder\":null")) << run.output;
}

TEST(CommandsTest, LeaseAcquireWaitsUntilTheLeaseIsFree) {
  TempDir dir;
  ServerProcess server(dir / "data");
  const std::string admin = "--admin=" + testing::AdminUrl(server);
  ASSERT_EQ(RunFencepost({"lease", "acquire", "n", "--holder", "a", "--ttl",
                          "500ms", admin})
                .exit_status,
            0);
  const auto run = RunFencepost({"lease", "acquire", "n", "--holder", "b",
                                 "--ttl", "10s", "--wait", "5s", admin});
  EXPECT_EQ(run.exit_status, 0) << run.output;
  const auto lease = ParseLease(run.output);
  ASSERT_TRUE(lease) << run.output;
  EXPECT_EQ(lease->holder, "b");
}

TEST(CommandsTest, LeaseRunGivesTheCommandItsTokenAndReleases) {
  TempDir dir;
  ServerProcess server(dir / "data");
  const std::string admin = "--admin=" + testing::AdminUrl(server);
  const auto run =
      RunFencepost({"lease", "run", "jobs/r", "--holder", "runner", "--ttl",
                    "1s", admin, "--", "sh", "-c",
                    "echo token=$FENCING_TOKEN lease=$FENCEPOST_LEASE "
                    "holder=$FENCEPOST_HOLDER; sleep 1; exit 7"});
  EXPECT_EQ(run.exit_status, 7) << run.output;
  EXPECT_TRUE(Has(run.output, "lease=jobs/r holder=runner")) << run.output;
  EXPECT_TRUE(Has(run.output, "fencepost lease run: acquired jobs/r token "))
      << run.output;

  Client client(testing::AdminOptions(server));
  const auto lease = ParseLease(client.GetLease("jobs/r").response.body);
  ASSERT_TRUE(lease);
  EXPECT_FALSE(lease->holder) << "released when the command exited";
  EXPECT_TRUE(Has(run.output, "token=" + std::to_string(lease->token)))
      << run.output;
}

// What `effect` needs from the lease: the key whose fence guards it, and the
// data port when --data names one.
TEST(CommandsTest, LeaseRunNamesTheLeasesFenceAndTheDataPort) {
  TempDir dir;
  ServerProcess server(dir / "data");
  const std::string admin = "--admin=" + testing::AdminUrl(server);
  const std::string script =
      "echo fence=$FENCEPOST_FENCE data=${FENCEPOST_DATA-unset}";
  auto run = RunFencepost({"lease", "run", "jobs/e", "--ttl", "1s", admin,
                           "--data=" + testing::DataUrl(server), "--", "sh",
                           "-c", script});
  EXPECT_EQ(run.exit_status, 0) << run.output;
  EXPECT_TRUE(
      Has(run.output, "fence=jobs/e data=" + testing::DataUrl(server) + "\n"))
      << run.output;
  run = RunFencepost({"lease", "run", "jobs/e", "--ttl", "1s", admin, "--",
                      "sh", "-c", script});
  EXPECT_EQ(run.exit_status, 0) << run.output;
  EXPECT_TRUE(Has(run.output, "fence=jobs/e data=unset")) << run.output;
}

// `effect` refuses what cannot be a call before sending anything (a
// refusing data port: exit 2, not 3), and an unreachable data port is 3.
TEST(CommandsTest, EffectUsageErrorsAndUnreachable) {
  const testing::RefusingPort refusing;
  const std::string data =
      "--data=http://127.0.0.1:" + std::to_string(refusing.port());
  const std::vector<std::string> call = {
      "--token", "1", "--fence-key", "k", "--idempotency-key", "i", data};
  const auto with = [&](std::vector<std::string> head) {
    head.insert(head.end(), call.begin(), call.end());
    return head;
  };
  for (const std::vector<std::string>& args :
       std::vector<std::vector<std::string>>{
           {"effect", "pay", "--token", "1", "--fence-key", "k", data},
           {"effect", "pay", "--token", "1", "--idempotency-key", "i", data},
           {"effect", "pay", "--fence-key", "k", "--idempotency-key", "i",
            data},
           with({"effect"}),
           with({"effect", "a b"}),
           with({"effect", "pay", "--method", "GET"}),
           with({"effect", "pay", "--token", "x"}),
           with({"effect", "pay", "one", "two"}),
           with({"effect", "pay", "--holder", "h"}),
           with({"effect", "pay", "no-such-file"}),
       }) {
    const auto run = RunFencepost(args);
    EXPECT_EQ(run.exit_status, 2) << args[1] << ": " << run.output;
  }
  auto run = RunFencepost(with({"effect", "pay/x?y=1", "--method", "DELETE"}));
  EXPECT_EQ(run.exit_status, 3) << run.output;
  run = RunFencepost({"effect", "pay", "--idempotency-key", "i", data},
                     {"FENCING_TOKEN=3", "FENCEPOST_FENCE=k"});
  EXPECT_EQ(run.exit_status, 3) << "the environment's defaults: " << run.output;
  run = RunFencepost({"effect", "--help"});
  EXPECT_EQ(run.exit_status, 0);
  EXPECT_TRUE(Has(run.output, "--idempotency-key")) << run.output;
}

// --fence raises the fences of other keys to the token before the job runs,
// and gives the lease up when a later holder has got further.
TEST(CommandsTest, LeaseRunRaisesTheFencesItIsGivenBeforeTheJob) {
  TempDir dir;
  ServerProcess server(dir / "data");
  const std::string admin = "--admin=" + testing::AdminUrl(server);
  Client client(testing::AdminOptions(server));
  auto run = RunFencepost(
      {"lease", "run", "jobs/f1", "--holder", "runner", "--ttl", "2s", admin,
       "--fence", "orders/1", "--fence", "orders/2", "--", "sh", "-c",
       "curl -s " + testing::AdminUrl(server) +
           "/v1/fences/orders/2; echo; echo token=$FENCING_TOKEN"});
  ASSERT_EQ(run.exit_status, 0) << run.output;
  const auto lease = ParseLease(client.GetLease("jobs/f1").response.body);
  ASSERT_TRUE(lease);
  for (const char* key : {"orders/1", "orders/2"}) {
    const auto fence = ParseFence(client.GetFence(key).response.body);
    ASSERT_TRUE(fence) << key;
    EXPECT_EQ(fence->token, lease->token) << key;
  }
  // The job saw the fence already raised.
  EXPECT_TRUE(Has(run.output, "\"token\":" + std::to_string(lease->token)))
      << run.output;

  // A fence above the next grant's token: the job never runs.
  ASSERT_EQ(client.Bump("orders/3", 1000).response.status / 100, 2);
  run = RunFencepost({"lease", "run", "jobs/f2", "--holder", "late", "--ttl",
                      "2s", admin, "--fence", "orders/3", "--", "sh", "-c",
                      "echo the job ran"});
  EXPECT_EQ(run.exit_status, 1) << run.output;
  EXPECT_FALSE(Has(run.output, "the job ran")) << run.output;
  EXPECT_TRUE(Has(run.output, "cannot raise the fence of orders/3"))
      << run.output;
  const auto released = ParseLease(client.GetLease("jobs/f2").response.body);
  ASSERT_TRUE(released);
  EXPECT_FALSE(released->holder) << "given up, not left to expire";
}

TEST(CommandsTest, LeaseRunStopsTheCommandAndExits75WhenTheLeaseIsLost) {
  TempDir dir;
  ServerProcess server(dir / "data");
  Client admin(testing::AdminOptions(server));
  testing::CommandProcess run({"lease", "run", "jobs/l", "--holder", "runner",
                               "--ttl", "3s", "--grace", "300ms", "--admin",
                               testing::AdminUrl(server), "--", "sh", "-c",
                               "trap '' TERM; touch '" + dir / "trapped" +
                                   "'; while :; do sleep 0.1; done"});
  std::optional<Lease> held;
  ASSERT_TRUE(testing::Eventually([&] {
    held = ParseLease(admin.GetLease("jobs/l").response.body);
    return held && held->holder == "runner" &&
           std::filesystem::exists(dir / "trapped");
  })) << run.Output();
  // Taken over behind its back: the watch of its fence (or else its next
  // renewal, refused) tells it at once.
  ASSERT_EQ(admin.ReleaseLease("jobs/l", "runner", held->token).response.status,
            204);
  ASSERT_EQ(admin.AcquireLease("jobs/l", "thief", milliseconds(10000))
                .response.status,
            200);
  EXPECT_EQ(run.Wait(fencepost::testing::kNoHang), 75) << run.Output();
  EXPECT_TRUE(Has(run.Output(), "lease lost")) << run.Output();
  EXPECT_TRUE(Has(run.Output(), "SIGKILL")) << run.Output();
  const auto lease = ParseLease(admin.GetLease("jobs/l").response.body);
  ASSERT_TRUE(lease);
  EXPECT_EQ(lease->holder, "thief") << "not released by the loser";
}

// Whether process `pid` is gone: no such process, or a zombie nobody reaped
// yet (it runs no more).
bool ProcessGone(const std::string& pid) {
  std::ifstream stat("/proc/" + pid + "/stat");
  std::string line;
  if (!std::getline(stat, line)) return true;
  const auto close = line.rfind(')');
  return close != std::string::npos && line.substr(close + 2, 1) == "Z";
}

// Waits (at most 10 s) until `path` holds one line that is a pid.
std::string PidIn(const std::string& path) {
  std::string pid;
  testing::Eventually([&] {
    std::ifstream in(path);
    std::getline(in, pid);
    return !pid.empty() && in.good();
  });
  return pid;
}

// What the job forks is stopped with it: its whole process group gets
// SIGTERM, and SIGKILL after --grace, even after the job itself has exited.
TEST(CommandsTest, LeaseRunStopsWhatTheCommandForkedWhenTheLeaseIsLost) {
  TempDir dir;
  ServerProcess server(dir / "data");
  Client admin(testing::AdminOptions(server));
  const std::string plain = dir / "plain.pid", deaf = dir / "deaf.pid";
  testing::CommandProcess run(
      {"lease", "run", "jobs/g", "--holder", "runner", "--ttl", "3s", "--grace",
       "500ms", "--admin", testing::AdminUrl(server), "--", "sh", "-c",
       "sleep 30 & echo $! >'" + plain +
           "'; (trap '' TERM; exec sleep 31) & echo $! >'" + deaf + "'; wait"});
  const std::string plain_pid = PidIn(plain), deaf_pid = PidIn(deaf);
  ASSERT_FALSE(plain_pid.empty()) << run.Output();
  ASSERT_FALSE(deaf_pid.empty()) << run.Output();
  std::optional<Lease> held;
  ASSERT_TRUE(testing::Eventually([&] {
    held = ParseLease(admin.GetLease("jobs/g").response.body);
    return held && held->holder == "runner";
  })) << run.Output();
  ASSERT_EQ(admin.ReleaseLease("jobs/g", "runner", held->token).response.status,
            204);
  ASSERT_EQ(admin.AcquireLease("jobs/g", "thief", milliseconds(10000))
                .response.status,
            200);
  EXPECT_EQ(run.Wait(milliseconds(10000)), 75) << run.Output();
  EXPECT_TRUE(testing::Eventually([&] { return ProcessGone(plain_pid); }))
      << "the job's background sleep survived the lost lease: " << run.Output();
  EXPECT_TRUE(testing::Eventually([&] { return ProcessGone(deaf_pid); }))
      << "the job's child that ignores SIGTERM survived the grace period: "
      << run.Output();
  for (const std::string& pid : {plain_pid, deaf_pid}) {
    if (!ProcessGone(pid)) ::kill(std::stoi(pid), SIGKILL);
  }
}

// A job that exits while what it forked runs on: the rest of its group is
// stopped before the lease is released, so nothing runs on unfenced.
TEST(CommandsTest, LeaseRunStopsWhatTheCommandLeftBehindBeforeReleasing) {
  TempDir dir;
  ServerProcess server(dir / "data");
  Client admin(testing::AdminOptions(server));
  const std::string left = dir / "left.pid";
  testing::CommandProcess run({"lease", "run", "jobs/h", "--holder", "runner",
                               "--ttl", "3s", "--grace", "500ms", "--admin",
                               testing::AdminUrl(server), "--", "sh", "-c",
                               "sleep 30 & echo $! >'" + left + "'; exit 3"});
  EXPECT_EQ(run.Wait(milliseconds(10000)), 3) << run.Output();
  const std::string left_pid = PidIn(left);
  ASSERT_FALSE(left_pid.empty()) << run.Output();
  EXPECT_TRUE(testing::Eventually([&] { return ProcessGone(left_pid); }))
      << "the job's background sleep outlived the lease: " << run.Output();
  if (!ProcessGone(left_pid)) ::kill(std::stoi(left_pid), SIGKILL);
  const auto lease = ParseLease(admin.GetLease("jobs/h").response.body);
  ASSERT_TRUE(lease.has_value());
  EXPECT_FALSE(lease->holder.has_value() && *lease->holder == "runner")
      << "the lease was not released";
}

// CMD runs in a process group of its own, so a terminal's Ctrl-C reaches
// lease run alone: it passes SIGINT on to the job.
TEST(CommandsTest, LeaseRunForwardsSigintToTheCommand) {
  TempDir dir;
  ServerProcess server(dir / "data");
  Client admin(testing::AdminOptions(server));
  const std::string trapped = dir / "trapped";
  testing::CommandProcess run({"lease", "run", "jobs/i", "--holder", "runner",
                               "--ttl", "2s", "--admin",
                               testing::AdminUrl(server), "--", "sh", "-c",
                               "trap 'exit 8' INT; touch '" + trapped +
                                   "'; while :; do sleep 0.1; done"});
  ASSERT_TRUE(testing::Eventually([&] {
    return std::filesystem::exists(trapped);
  })) << "the child did not set its trap: "
      << run.Output();
  run.Signal(SIGINT);
  EXPECT_EQ(run.Wait(milliseconds(5000)), 8) << run.Output();
}

// A command that cannot run is found out before the lease is taken: no
// lease is granted, and the status is a shell's (127 not found, 126 not
// executable).
TEST(CommandsTest, LeaseRunRefusesACommandItCannotRunWithoutTakingTheLease) {
  TempDir dir;
  ServerProcess server(dir / "data");
  Client admin(testing::AdminOptions(server));
  std::ofstream(dir / "not-executable") << "#!/bin/sh\necho ran\n";
  std::filesystem::create_directory(dir / "bin");
  std::ofstream(dir / "bin/plain-file") << "#!/bin/sh\necho ran\n";
  struct Case {
    std::vector<std::string> command;
    int exit_status;
    std::vector<std::string> env;
  };
  const std::vector<Case> cases = {
      {{"/nonexistent/cmd"}, 127, {}},
      {{"no-such-command-anywhere"}, 127, {}},
      {{dir / "not-executable"}, 126, {}},
      {{dir.path()}, 126, {}},
      {{"plain-file"}, 126, {"PATH=" + dir / "bin" + ":/usr/bin:/bin"}},
  };
  for (const Case& c : cases) {
    std::vector<std::string> args = {"lease",
                                     "run",
                                     "jobs/c",
                                     "--ttl",
                                     "2s",
                                     "--admin",
                                     testing::AdminUrl(server),
                                     "--"};
    args.insert(args.end(), c.command.begin(), c.command.end());
    const auto run = RunFencepost(args, c.env);
    EXPECT_EQ(run.exit_status, c.exit_status) << c.command[0] << "\n"
                                              << run.output;
    EXPECT_FALSE(Has(run.output, "acquired")) << run.output;
    EXPECT_EQ(admin.GetLease("jobs/c").response.status, 404)
        << c.command[0] << ": the lease was taken";
  }
}

TEST(CommandsTest, LeaseRunSaysTheCommandNeedsTheDashes) {
  const auto run = RunFencepost({"lease", "run", "jobs/d", "--ttl", "10s",
                                 "echo", "hi", "--admin=http://127.0.0.1:1"});
  EXPECT_EQ(run.exit_status, 2) << run.output;
  EXPECT_TRUE(Has(run.output, "the command goes after '--'")) << run.output;
  EXPECT_TRUE(Has(run.output, "-- echo hi")) << run.output;
}

// The data port reads /v1/leases/NAME as a key: its 404 ("no value for this
// key") must not read as "no such lease".
TEST(CommandsTest, TheDataPortGivenAsAdminIsNamed) {
  TempDir dir;
  ServerProcess server(dir / "data");
  const std::string data_as_admin = "--admin=" + testing::DataUrl(server);
  for (const std::vector<std::string>& args :
       std::vector<std::vector<std::string>>{
           {"lease", "get", "jobs/n", data_as_admin},
           {"fence", "get", "jobs/n", data_as_admin},
       }) {
    const auto run = RunFencepost(args);
    EXPECT_EQ(run.exit_status, 1) << run.output;
    EXPECT_TRUE(Has(run.output, "looks like fencepost's data port"))
        << run.output;
  }
  std::ofstream(dir / "ops.json")
      << R"({"ops": [{"op": "delete", "key": "k"}]})";
  const auto run = RunFencepost({"batch", "--token", "1", dir / "ops.json",
                                 "--data=" + testing::AdminUrl(server)});
  EXPECT_TRUE(Has(run.output, "looks like fencepost's admin port"))
      << run.output;
}

TEST(CommandsTest, LeaseRunForwardsSigtermToTheCommand) {
  TempDir dir;
  ServerProcess server(dir / "data");
  Client admin(testing::AdminOptions(server));
  const std::string trapped = dir / "trapped";
  testing::CommandProcess run({"lease", "run", "jobs/f", "--holder", "runner",
                               "--ttl", "2s", "--admin",
                               testing::AdminUrl(server), "--", "sh", "-c",
                               "trap 'exit 9' TERM; touch '" + trapped +
                                   "'; while :; do sleep 0.1; done"});
  ASSERT_TRUE(testing::Eventually([&] {
    const auto lease = ParseLease(admin.GetLease("jobs/f").response.body);
    return lease && lease->holder == "runner";
  })) << run.Output();
  ASSERT_TRUE(testing::Eventually([&] {
    return std::filesystem::exists(trapped);
  })) << "the child did not set its trap: "
      << run.Output();
  run.Signal(SIGTERM);
  EXPECT_EQ(run.Wait(milliseconds(5000)), 9) << run.Output();
  const auto lease = ParseLease(admin.GetLease("jobs/f").response.body);
  ASSERT_TRUE(lease);
  EXPECT_FALSE(lease->holder) << "released after the command exited";
}

// The lease is held by another: `lease run` says by whom and waits, without
// running the command, until the holder lets it go. Done by the test's word
// (a release), not by a clock, so a slow machine cannot change the answer.
TEST(CommandsTest, LeaseRunWaitsForTheLease) {
  TempDir dir;
  ServerProcess server(dir / "data");
  Client admin(testing::AdminOptions(server));
  const auto first = admin.AcquireLease("jobs/w", "first", milliseconds(60000));
  ASSERT_EQ(first.response.status, 200);
  const auto held = ParseLease(first.response.body);
  ASSERT_TRUE(held);
  const std::string ran = dir / "ran";
  testing::CommandProcess run({"lease", "run", "jobs/w", "--holder", "second",
                               "--ttl", "1s", "--admin",
                               testing::AdminUrl(server), "--", "touch", ran});
  ASSERT_TRUE(testing::Eventually([&] {
    return Has(run.Output(), "held by first");
  })) << run.Output();
  EXPECT_EQ(run.Wait(milliseconds(300)), -1) << "it waits: " << run.Output();
  EXPECT_FALSE(std::filesystem::exists(ran)) << "nothing ran while it waited";
  ASSERT_EQ(admin.ReleaseLease("jobs/w", "first", held->token).response.status,
            204);
  EXPECT_EQ(run.Wait(), 0) << run.Output();
  EXPECT_TRUE(std::filesystem::exists(ran));
}

// ---- batch ----

// A batch of three ops: put batch/a ("v1"), put batch/b ("" ), delete
// batch/c.
constexpr char kBatchDocument[] =
    R"({"ops": [{"op": "put", "key": "batch/a", "value": "djE="},)"
    R"( {"op": "put", "key": "batch/b", "value": ""},)"
    R"( {"op": "delete", "key": "batch/c"}]})"
    "\n";

// `shell_command` run by sh, its stdout and stderr together.
fencepost::testing::RunResult RunShell(const std::string& shell_command,
                                       const std::string& output_path) {
  const int status =
      std::system((shell_command + " >'" + output_path + "' 2>&1").c_str());
  fencepost::testing::RunResult result;
  result.exit_status = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  result.output = fencepost::testing::ReadFile(output_path);
  return result;
}

TEST(CommandsTest, BatchFromAFile) {
  TempDir dir;
  ServerProcess server(dir / "data");
  Client data(testing::Options(testing::DataUrl(server)));
  ASSERT_EQ(data.Put("batch/c", 1, "c").response.status, 201);
  std::ofstream(dir / "ops.json") << kBatchDocument;
  const std::string url = "--data=" + testing::DataUrl(server);

  auto run = RunFencepost({"batch", "--token", "4", dir / "ops.json", url});
  ASSERT_EQ(run.exit_status, 0) << run.output;
  const auto results = ParseBatchResults(run.output);
  ASSERT_TRUE(results) << run.output;
  ASSERT_EQ(results->size(), 3u);
  EXPECT_EQ((*results)[0].status, 201);
  EXPECT_EQ((*results)[1].status, 201);
  EXPECT_EQ((*results)[2].status, 204);
  EXPECT_EQ(data.Get("batch/a").response.body, "v1");
  EXPECT_EQ(data.Get("batch/b").response.status, 200);
  EXPECT_EQ(data.Get("batch/c").response.status, 404);

  // An older token: 409, its problem on stdout, nothing changed.
  std::ofstream(dir / "stale.json")
      << R"({"ops": [{"op": "put", "key": "batch/z", "value": "eg=="},)"
      << R"( {"op": "put", "key": "batch/a", "value": "djI="}]})";
  run = RunFencepost({"batch", dir / "stale.json", "--token", "3", url});
  EXPECT_EQ(run.exit_status, 1) << run.output;
  EXPECT_TRUE(Has(run.output, "stale-token")) << run.output;
  EXPECT_TRUE(Has(run.output, "\"key\":\"batch/a\"")) << run.output;
  EXPECT_TRUE(Has(run.output, "\"current_token\":4")) << run.output;
  EXPECT_EQ(data.Get("batch/a").response.body, "v1");
  EXPECT_EQ(data.Get("batch/z").response.status, 404);

  // A body the server calls bad: 400, exit 2, the problem on stderr.
  std::ofstream(dir / "bad.json")
      << R"({"ops": [{"op": "put", "key": "batch/a", "value": "not base64"}]})";
  run = RunFencepost({"batch", "--token", "9", dir / "bad.json", url});
  EXPECT_EQ(run.exit_status, 2) << run.output;
  EXPECT_TRUE(Has(run.output, "HTTP 400")) << run.output;
  EXPECT_TRUE(Has(run.output, "base64")) << run.output;
  EXPECT_EQ(data.Get("batch/a").response.body, "v1");
}

TEST(CommandsTest, BatchFromStandardInput) {
  TempDir dir;
  ServerProcess server(dir / "data");
  Client data(testing::Options(testing::DataUrl(server)));
  std::ofstream(dir / "ops.json") << kBatchDocument;
  const std::string binary = FENCEPOST_BINARY;

  // A pipe, the data URL from the environment.
  auto run = RunShell("cat '" + dir / "ops.json" +
                          "' | FENCEPOST_DATA=" + testing::DataUrl(server) +
                          " '" + binary + "' batch --token 6",
                      dir / "out1");
  ASSERT_EQ(run.exit_status, 0) << run.output;
  EXPECT_TRUE(Has(run.output, "\"results\"")) << run.output;
  EXPECT_EQ(data.Get("batch/a").response.body, "v1");

  // "-" names standard input too; a redirected file, an older token.
  run = RunShell("'" + binary + "' batch --token 5 - --data " +
                     testing::DataUrl(server) + " <'" + dir / "ops.json" + "'",
                 dir / "out2");
  EXPECT_EQ(run.exit_status, 1) << run.output;
  EXPECT_TRUE(Has(run.output, "stale-token")) << run.output;

  // Nothing on standard input is no batch: 400.
  run = RunShell("'" + binary + "' batch --token 6 --data " +
                     testing::DataUrl(server) + " </dev/null",
                 dir / "out3");
  EXPECT_EQ(run.exit_status, 2) << run.output;
}

TEST(CommandsTest, BatchUsageErrorsAndUnreachable) {
  TempDir dir;
  std::ofstream(dir / "ops.json") << kBatchDocument;
  const testing::RefusingPort refusing;
  const std::string data =
      "--data=http://127.0.0.1:" + std::to_string(refusing.port());
  for (const std::vector<std::string>& args :
       std::vector<std::vector<std::string>>{
           {"batch", dir / "ops.json", data},
           {"batch", "--token", "x", dir / "ops.json", data},
           {"batch", "--token", "1", dir / "ops.json", dir / "ops.json", data},
           {"batch", "--token", "1", dir / "missing.json", data},
           {"batch", "--token", "1", dir / "ops.json", "--holder", "h", data},
           {"batch", "--token", "1", dir / "ops.json", "--data", "ftp://x"},
       }) {
    const auto run = RunFencepost(args);
    std::string joined;
    for (const auto& a : args) joined += a + " ";
    EXPECT_EQ(run.exit_status, 2) << joined << "\n" << run.output;
  }
  const auto run =
      RunFencepost({"batch", "--token", "1", dir / "ops.json", data});
  EXPECT_EQ(run.exit_status, 3) << run.output;
  const auto help = RunFencepost({"batch", "--help"});
  EXPECT_EQ(help.exit_status, 0);
  EXPECT_TRUE(Has(help.output, "fencepost batch --token N [FILE]"))
      << help.output;
  // docs/batches.md: the lmdb and etcd backends take batches.
  EXPECT_TRUE(Has(help.output, "(lmdb or etcd backend)")) << help.output;
}

// A body over --max-body is answered 413 and the connection closed while
// the client is still sending: the answer is read all the same, and a 413
// is the caller's error (2), not an unreachable server (3).
TEST(CommandsTest, BatchOverMaxBodyExitsTwo) {
  TempDir dir;
  ServerProcess server(dir / "data", {"--max-body", "1024"});
  {
    std::ofstream big(dir / "big.json");
    big << R"({"ops": [{"op": "put", "key": "k", "value": ")"
        << std::string(std::size_t{16} << 20, 'A') << "\"}]}";
  }
  const auto run = RunFencepost({"batch", "--token", "1", dir / "big.json",
                                 "--data", testing::DataUrl(server)});
  EXPECT_EQ(run.exit_status, 2) << run.output;
  EXPECT_TRUE(Has(run.output, "HTTP 413")) << run.output;
}

TEST(CommandsTest, BatchOnAnFsBackendExitsTwo) {
  TempDir dir;
  ServerProcess server(dir / "data", {"--backend", "fs:" + dir / "files"});
  std::ofstream(dir / "ops.json") << kBatchDocument;
  const auto run = RunFencepost({"batch", "--token", "1", dir / "ops.json",
                                 "--data", testing::DataUrl(server)});
  EXPECT_EQ(run.exit_status, 2) << run.output;
  EXPECT_TRUE(Has(run.output, "HTTP 405")) << run.output;
}

}  // namespace
}  // namespace fencepost::client
