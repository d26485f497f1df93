// No acknowledged write is one that recovery refuses: the largest body the
// flags allow survives a kill -9 right after its answer.
//
// The largest record is 256 MiB, and it is slow to move, which is no
// defect this test judges: measured on 2 cores with a build beside it (load
// 11), the PUT took 17 s, the restart after the kill 22-28 s, the GET 5 s
// (optimized; several times that under ASan). The restart reads the log
// twice (synced, its cached pages dropped, read again from the disk) into
// a buffer grown 1 MiB at a time, and applies the value to LMDB before the
// ports open. So each step is bounded only against a hang, at kBigStep,
// and so are the server's deadlines for the test's own reads and writes
// of the body (--read-timeout, --write-timeout: a PUT cut by them was a
// "Broken pipe" in a clean root).

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "fence/key.h"
#include "fence/wal.h"
#include "tests/testing/http_client.h"
#include "tests/testing/server_process.h"
#include "tests/testing/temp_dir.h"

namespace fencepost {
namespace {

using testing::HttpClient;
using testing::RunFencepost;
using testing::ServerProcess;
using testing::TempDir;

// A start, a request or a stop of the 256 MiB record (see above).
constexpr double kBigStep = 120;

TEST(BigValueTest, TheLargestBodyAllowedSurvivesAKill) {
  TempDir dir;
  const std::string limit = std::to_string(fence::kMaxValueBytes);
  const std::string step = std::to_string(static_cast<int>(kBigStep));
  const std::vector<std::string> args = {
      "--max-body", limit, "--read-timeout", step, "--write-timeout", step};
  // The longest key, so the record is as large as one can be.
  const std::string key(fence::kMaxNameBytes, 'k');
  std::string body(fence::kMaxValueBytes, 'v');
  body.front() = 'A';
  body.back() = 'Z';
  {
    ServerProcess server(dir / "d", args, {}, {}, kBigStep);
    const auto put =
        HttpClient(server.data_port(), kBigStep)
            .Request("PUT", "/" + key, {{"Fencing-Token", "7"}}, body);
    ASSERT_EQ(put.status, 201) << put.body;
    server.Kill();  // before the applier could have put it in LMDB
  }
  ServerProcess server(dir / "d", args, {}, {}, kBigStep);
  HttpClient client(server.data_port(), kBigStep);
  const auto get = client.Request("GET", "/" + key);
  ASSERT_EQ(get.status, 200);
  EXPECT_EQ(get.header("fencing-token"), "7");
  EXPECT_TRUE(get.body == body)
      << "the value came back changed, " << get.body.size() << " bytes";
  EXPECT_EQ(client.Request("PUT", "/" + key, {{"Fencing-Token", "1"}}, "stale")
                .status,
            409);
}

TEST(BigValueTest, AMaxBodyAboveWhatALogRecordHoldsIsRefusedAtStart) {
  TempDir dir;
  const testing::RunResult refused =
      RunFencepost({"serve", "--data-dir", dir / "d", "--max-body",
                    std::to_string(fence::kMaxValueBytes + 1)});
  EXPECT_EQ(refused.exit_status, 2) << refused.output;
  EXPECT_NE(refused.output.find(std::to_string(fence::kMaxValueBytes)),
            std::string::npos)
      << refused.output;
  // The other backends keep no values in the log.
  const testing::RunResult fs = RunFencepost(
      {"serve", "--data-dir", dir / "e", "--backend", "fs:" + dir / "files",
       "--max-body", std::to_string(fence::kMaxValueBytes + 1), "--listen",
       "127.0.0.1:99999"});
  EXPECT_EQ(fs.output.find("--max-body"), std::string::npos) << fs.output;
}

}  // namespace
}  // namespace fencepost
