// CommandProcess's promises (tests/client/helpers.h): a `serve` it started
// that exits without the test's word fails the test, so does a sanitizer's
// report in a command's output, and no command reads a FENCEPOST_* variable
// of the tests' environment.

#include <gtest/gtest-spi.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>

#include <chrono>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "tests/client/helpers.h"
#include "tests/testing/http_client.h"
#include "tests/testing/temp_dir.h"
#include "tests/testing/upstreams.h"

namespace fencepost::client {
namespace {

using fencepost::testing::Fetch;
using fencepost::testing::FreePort;
using fencepost::testing::TempDir;

// `serve` on two claimed ports; their numbers in *data and *admin.
std::unique_ptr<testing::CommandProcess> Serve(const TempDir& dir,
                                               std::uint16_t* data,
                                               std::uint16_t* admin) {
  *data = FreePort();
  *admin = FreePort();
  return std::make_unique<testing::CommandProcess>(std::vector<std::string>{
      "serve", "--listen", "127.0.0.1:" + std::to_string(*data),
      "--admin-listen", "127.0.0.1:" + std::to_string(*admin), "--data-dir",
      dir / "data"});
}

bool Ready(std::uint16_t admin) {
  return testing::Eventually([&] {
    try {
      return Fetch(admin, "GET", "/readyz").status == 200;
    } catch (const std::exception&) {
      return false;
    }
  });
}

TEST(CommandProcessTest, AServeThatExitsByItselfFailsTheTest) {
  TempDir dir;
  std::uint16_t data = 0, admin = 0;
  auto server = Serve(dir, &data, &admin);
  ASSERT_TRUE(Ready(admin)) << server->Output();
  ASSERT_EQ(::kill(server->pid(), SIGTERM), 0);  // not the test's word
  siginfo_t info{};  // until it has exited, leaving it to be reaped
  ASSERT_EQ(::waitid(P_PID, server->pid(), &info, WEXITED | WNOWAIT), 0);
  EXPECT_NONFATAL_FAILURE(server.reset(), "exited by itself (status 0");
}

TEST(CommandProcessTest, AServeStoppedAtTheTestsWordPasses) {
  TempDir dir;
  std::uint16_t data = 0, admin = 0;
  auto server = Serve(dir, &data, &admin);
  ASSERT_TRUE(Ready(admin)) << server->Output();
  server->Signal(SIGTERM);
  EXPECT_EQ(server->Wait(), 0);
  server = Serve(dir, &data, &admin);
  ASSERT_TRUE(Ready(admin)) << server->Output();
  // The destructor stops it: no failure.
}

// What a sanitizer's report starts with, in the output (fencepost repeats
// an argument it does not know).
TEST(CommandProcessTest, ASanitizerReportInTheOutputFailsTheTest) {
  EXPECT_NONFATAL_FAILURE(
      {
        testing::CommandProcess command({"ERROR: AddressSanitizer: made up"});
        EXPECT_EQ(command.Wait(), 2);
      },
      "sanitizer reported");
}

// FENCEPOST_MODE=observe in the tests' environment (a shell's leftover)
// would make the server apply stale writes; CommandProcess clears it.
TEST(CommandProcessTest, CommandsDoNotInheritFencepostVariables) {
  ASSERT_EQ(::setenv("FENCEPOST_MODE", "observe", 1), 0);
  struct Unset {
    ~Unset() { ::unsetenv("FENCEPOST_MODE"); }
  } unset;
  TempDir dir;
  std::uint16_t data = 0, admin = 0;
  auto server = Serve(dir, &data, &admin);
  ASSERT_TRUE(Ready(admin)) << server->Output();
  ASSERT_EQ(Fetch(data, "PUT", "/k", {{"Fencing-Token", "5"}}, "new").status,
            201);
  EXPECT_EQ(Fetch(data, "PUT", "/k", {{"Fencing-Token", "4"}}, "stale").status,
            409)
      << "the server read FENCEPOST_MODE=observe from the tests' environment";
}

}  // namespace
}  // namespace fencepost::client
