// No acknowledged write is one that recovery refuses: the largest body the
// flags allow survives a kill -9 right after its answer.

#include <gtest/gtest.h>

#include <string>

#include "fence/key.h"
#include "fence/wal.h"
#include "tests/testing/http_client.h"
#include "tests/testing/server_process.h"
#include "tests/testing/temp_dir.h"

namespace fencepost {
namespace {

using testing::Fetch;
using testing::RunFencepost;
using testing::ServerProcess;
using testing::TempDir;

TEST(BigValueTest, TheLargestBodyAllowedSurvivesAKill) {
  TempDir dir;
  const std::string limit = std::to_string(fence::kMaxValueBytes);
  // The longest key, so the record is as large as one can be.
  const std::string key(fence::kMaxNameBytes, 'k');
  std::string body(fence::kMaxValueBytes, 'v');
  body.front() = 'A';
  body.back() = 'Z';
  {
    ServerProcess server(dir / "d", {"--max-body", limit});
    const auto put = Fetch(server.data_port(), "PUT", "/" + key,
                           {{"Fencing-Token", "7"}}, body);
    ASSERT_EQ(put.status, 201) << put.body;
    server.Kill();  // before the applier could have put it in LMDB
  }
  ServerProcess server(dir / "d", {"--max-body", limit});
  const auto get = Fetch(server.data_port(), "GET", "/" + key);
  ASSERT_EQ(get.status, 200);
  EXPECT_EQ(get.header("fencing-token"), "7");
  EXPECT_TRUE(get.body == body)
      << "the value came back changed, " << get.body.size() << " bytes";
  EXPECT_EQ(Fetch(server.data_port(), "PUT", "/" + key,
                  {{"Fencing-Token", "1"}}, "stale")
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
