// The binary's command line, start-up failures and graceful drain.

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "tests/testing/http_client.h"
#include "tests/testing/server_process.h"
#include "tests/testing/temp_dir.h"

namespace fencepost {
namespace {

using testing::HttpClient;
using testing::RunFencepost;
using testing::ServerProcess;
using testing::TempDir;
using namespace std::chrono_literals;

TEST(CliTest, VersionAndHelp) {
  auto version = RunFencepost({"--version"});
  EXPECT_EQ(version.exit_status, 0);
  EXPECT_NE(version.output.find("fencepost 0.1.0"), std::string::npos);
  auto help = RunFencepost({"--help"});
  EXPECT_EQ(help.exit_status, 0);
  EXPECT_NE(help.output.find("--max-map-size"), std::string::npos);
  // Every client command is named, each with where its own help is.
  for (const std::string command :
       {"fencepost lease ", "fencepost fence ", "fencepost batch ",
        "fencepost probe ", "fencepost watch "}) {
    EXPECT_NE(help.output.find(command), std::string::npos) << command << "\n"
                                                            << help.output;
  }
  auto watch_help = RunFencepost({"watch", "--help"});
  EXPECT_EQ(watch_help.exit_status, 0);
  EXPECT_NE(watch_help.output.find("fencepost watch [PREFIX]"),
            std::string::npos);
}

TEST(CliTest, BadFlagsExitTwoWithAMessage) {
  TempDir dir;
  for (const std::vector<std::string>& args :
       std::vector<std::vector<std::string>>{
           {"serve", "--bogus"},
           {"serve", "--mode", "strict"},
           {"serve", "--listen", "nowhere"},
           {"serve", "--max-map-size", "12"},
           {"serve", "--data-dir", dir.path(), "--backend", "ftp://x"}}) {
    auto run = RunFencepost(args);
    EXPECT_EQ(run.exit_status, 2) << args[1];
    EXPECT_NE(run.output.find("fencepost: "), std::string::npos) << run.output;
  }
  auto env = RunFencepost({"serve"}, {"FENCEPOST_MAX_BODY=lots"});
  EXPECT_EQ(env.exit_status, 2);
  EXPECT_NE(env.output.find("FENCEPOST_MAX_BODY"), std::string::npos);
}

TEST(CliTest, UnusableDataDirectoryExitsTwo) {
  TempDir dir;
  const std::string file = dir / "file";
  fclose(fopen(file.c_str(), "w"));
  auto run = RunFencepost({"serve", "--data-dir", file, "--listen",
                           "127.0.0.1:0", "--admin-listen", "127.0.0.1:0"});
  EXPECT_EQ(run.exit_status, 2);
  EXPECT_NE(run.output.find("not usable"), std::string::npos) << run.output;
}

// A data directory that cannot be created is reported with the reason
// mkdir gave, not as a lock file that does not exist.
TEST(CliTest, ADataDirectoryThatCannotBeCreatedSaysWhy) {
  TempDir dir;
  fclose(fopen((dir / "file").c_str(), "w"));
  auto run = RunFencepost({"serve", "--data-dir", dir / "file/data", "--listen",
                           "127.0.0.1:0", "--admin-listen", "127.0.0.1:0"});
  EXPECT_EQ(run.exit_status, 2);
  EXPECT_NE(run.output.find("cannot create it: Not a directory"),
            std::string::npos)
      << run.output;

  // A parent the server may not write to. Root may write anywhere, so the
  // server then runs as nobody (setpriv, util-linux).
  std::filesystem::create_directory(dir / "read-only");
  std::filesystem::permissions(dir.path(), std::filesystem::perms(0755));
  std::filesystem::permissions(dir / "read-only", std::filesystem::perms(0555));
  const std::string as = ::geteuid() == 0
                             ? "setpriv --reuid=65534 --regid=65534 "
                               "--clear-groups "
                             : "";
  const std::string out = dir / "out";
  const int status = std::system(
      (as + "timeout 15 '" + FENCEPOST_BINARY + "' serve --data-dir '" +
       dir / "read-only/data" +
       "' --listen 127.0.0.1:0 --admin-listen 127.0.0.1:0 >'" + out + "' 2>&1")
          .c_str());
  const std::string output = testing::ReadFile(out);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 2) << output;
  EXPECT_NE(output.find("data directory " + dir / "read-only/data" +
                        " is not usable: cannot create it: Permission denied"),
            std::string::npos)
      << output;
}

// --max-body 0 is refused, and docs/configuration.md says so in the words
// the binary uses.
TEST(CliTest, MaxBodyZeroIsRefusedAsTheDocsSay) {
  TempDir dir;
  auto run =
      RunFencepost({"serve", "--max-body", "0", "--data-dir", dir / "data"});
  EXPECT_EQ(run.exit_status, 2) << run.output;
  const std::string message = "--max-body: must be at least 1 byte";
  EXPECT_NE(run.output.find(message), std::string::npos) << run.output;
  const std::string docs = testing::ReadFile(std::string(FENCEPOST_SOURCE_DIR) +
                                             "/docs/configuration.md");
  ASSERT_FALSE(docs.empty());
  EXPECT_NE(docs.find(message), std::string::npos)
      << "docs/configuration.md does not quote the refusal";
  EXPECT_EQ(docs.find("`--max-body 0` is accepted"), std::string::npos);
}

TEST(CliTest, PortInUseExitsTwo) {
  TempDir dir;
  ServerProcess first(dir / "a");
  auto run = RunFencepost({"serve", "--data-dir", dir / "b", "--listen",
                           "127.0.0.1:" + std::to_string(first.data_port()),
                           "--admin-listen", "127.0.0.1:0"});
  EXPECT_EQ(run.exit_status, 2);
  EXPECT_NE(run.output.find("cannot listen"), std::string::npos);
}

TEST(CliTest, EnvironmentConfiguresTheServer) {
  TempDir dir;
  ServerProcess server("", {"--max-body", "8"},
                       {"FENCEPOST_DATA_DIR=" + (dir / "env-data"),
                        "FENCEPOST_FENCE_SCOPE=a/,b/", "FENCEPOST_MAX_BODY=1"});
  EXPECT_TRUE(std::filesystem::exists(dir / "env-data/shard-0/data.mdb"));
  const int port = server.data_port();
  EXPECT_EQ(
      testing::Fetch(port, "PUT", "/b/1", {{"Fencing-Token", "9"}}, "12345678")
          .status,
      201)
      << "the command line's --max-body wins over the environment's";
  EXPECT_EQ(
      testing::Fetch(port, "PUT", "/b/2", {{"Fencing-Token", "8"}}, "x").status,
      409)
      << "the second scope from the comma-separated list applies";
}

TEST(CliTest, JsonLogsAreOneObjectPerLine) {
  TempDir dir;
  ServerProcess server(dir / "d", {"--log-format", "json"});
  testing::Fetch(server.data_port(), "PUT", "/k%22q", {{"Fencing-Token", "2"}},
                 "v");
  testing::Fetch(server.data_port(), "PUT", "/k%22q", {{"Fencing-Token", "1"}},
                 "v");
  server.Signal(SIGTERM);
  EXPECT_EQ(server.Wait(), 0);
  std::istringstream lines(server.Log());
  int count = 0;
  for (std::string line; std::getline(lines, line); ++count) {
    EXPECT_EQ(line.rfind("{\"time\":\"", 0), 0u) << line;
    EXPECT_EQ(line.back(), '}') << line;
    EXPECT_NE(line.find("\"msg\":\""), std::string::npos) << line;
  }
  EXPECT_GE(count, 3);
  EXPECT_NE(server.Log().find("\"key\":\"k\\\"q\""), std::string::npos)
      << "quotes in keys are escaped, in a field of their own";
}

// Whether every established connection to `port` on 127.0.0.1 has had its
// bytes read by the server (receive queue 0 in /proc/net/tcp), within 5 s.
bool ReceiveQueuesEmpty(std::uint16_t port) {
  char local[16];
  std::snprintf(local, sizeof local, ":%04X", port);
  const auto deadline = std::chrono::steady_clock::now() + 5s;
  while (std::chrono::steady_clock::now() < deadline) {
    std::ifstream tcp("/proc/net/tcp");
    bool pending = false;
    int connections = 0;
    for (std::string line; std::getline(tcp, line);) {
      std::istringstream fields(line);
      std::string slot, local_address, remote, state, queues;
      fields >> slot >> local_address >> remote >> state >> queues;
      if (state != "01" || local_address.size() < 5 ||
          local_address.substr(local_address.size() - 5) != local) {
        continue;
      }
      ++connections;
      pending |= queues.substr(queues.find(':') + 1) != "00000000";
    }
    if (connections > 0 && !pending) return true;
    std::this_thread::sleep_for(10ms);
  }
  return false;
}

TEST(DrainTest, SigtermFinishesStartedRequestsThenExitsZero) {
  TempDir dir;
  ServerProcess server(dir / "d");
  HttpClient idle(server.data_port());
  HttpClient writer(server.data_port());
  HttpClient admin(server.admin_port());
  // Requests whose headers are on their way when the signal lands.
  writer.Send(
      "PUT /drained HTTP/1.1\r\nHost: x\r\nFencing-Token: 3\r\n"
      "Content-Length: 5\r\n\r\n");
  admin.Send("GET /readyz HTTP/1.1\r\nHost: x\r\n");
  ASSERT_TRUE(ReceiveQueuesEmpty(server.data_port()) &&
              ReceiveQueuesEmpty(server.admin_port()))
      << "the server never read the started requests";
  server.Signal(SIGTERM);
  // While the writer's body is still missing the process cannot finish, so
  // a refused connection here is the draining server's, not an exited one's.
  const auto deadline = std::chrono::steady_clock::now() + 10s;
  bool refused = false;
  while (!refused && std::chrono::steady_clock::now() < deadline) {
    try {
      HttpClient late(server.data_port());
      std::this_thread::sleep_for(10ms);
    } catch (const std::exception&) {
      refused = true;
    }
  }
  EXPECT_TRUE(refused) << "no new connections while draining";
  EXPECT_THROW(HttpClient(server.admin_port()), std::exception)
      << "the admin port stops accepting too";

  admin.Send("\r\n");
  auto ready = admin.ReadResponse();
  EXPECT_EQ(ready.status, 503) << "readyz turns 503 at once";
  writer.Send("hello");
  auto put = writer.ReadResponse();
  EXPECT_EQ(put.status, 201) << "a request already started finishes";
  EXPECT_EQ(put.header("connection"), "close");
  EXPECT_TRUE(idle.ClosedByPeer()) << "idle connections are closed";
  EXPECT_EQ(server.Wait(), 0);

  ServerProcess again(dir / "d");
  EXPECT_EQ(testing::Fetch(again.data_port(), "GET", "/drained").body, "hello");
}

TEST(DrainTest, SigintAlsoDrains) {
  TempDir dir;
  ServerProcess server(dir / "d");
  server.Signal(SIGINT);
  EXPECT_EQ(server.Wait(), 0);
}

}  // namespace
}  // namespace fencepost
