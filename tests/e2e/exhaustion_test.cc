// What runs out: the disk under LMDB, and the token space of a fence.

#include <gtest/gtest.h>
#include <sys/mount.h>
#include <sys/stat.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <map>
#include <string>

#include "tests/testing/http_client.h"
#include "tests/testing/server_process.h"
#include "tests/testing/temp_dir.h"

namespace fencepost {
namespace {

using testing::Fetch;
using testing::HttpClient;
using testing::RunFencepost;
using testing::ServerProcess;
using testing::TempDir;

// A small tmpfs, unmounted at the end.
class SmallDisk {
 public:
  SmallDisk(const std::string& at, const std::string& size) : at_(at) {
    ::mkdir(at.c_str(), 0755);
    const std::string options = "size=" + size;
    if (::mount("tmpfs", at.c_str(), "tmpfs", 0, options.c_str()) != 0) {
      error_ = std::strerror(errno);
    }
  }
  ~SmallDisk() {
    if (error_.empty()) ::umount2(at_.c_str(), MNT_DETACH);
  }
  const std::string& error() const { return error_; }

 private:
  std::string at_;
  std::string error_;
};

// A disk that fills under LMDB stops the server with a message naming
// ENOSPC; a restart on the full disk refuses to serve, saying what to do;
// once space is freed every acknowledged write is there.
TEST(FullDiskTest, AFullDiskIsNamedAndARestartWaitsForSpace) {
  TempDir dir;
  const std::string mnt = dir / "mnt";
  // Two 16 MiB log segments, 120 MiB of ballast, 8 MiB left, which the
  // log (a segment grows while LMDB is behind) or LMDB fills; freeing the
  // ballast leaves room to apply the whole log.
  SmallDisk disk(mnt, "160m");
  if (!disk.error().empty()) {
    FAIL() << "cannot mount a tmpfs (the test command runs as root): "
           << disk.error();
  }
  const std::string ballast = mnt + "/ballast";
  {
    std::ofstream out(ballast, std::ios::binary);
    const std::string mib(1u << 20, 'b');
    for (int i = 0; i < 120; ++i) out << mib;
    ASSERT_TRUE(out.flush());
  }
  const std::string data = mnt + "/d";
  std::map<std::string, std::string> acknowledged;  // key -> token
  {
    ServerProcess server(data);
    const std::string value(64u << 10, 'v');
    try {
      HttpClient client(server.data_port());
      for (int i = 1; i <= 600; ++i) {
        const std::string key = "k" + std::to_string(i);
        const auto put = client.Request(
            "PUT", "/" + key, {{"Fencing-Token", std::to_string(i)}}, value);
        if (put.status != 201) break;
        acknowledged[key] = std::to_string(i);
      }
    } catch (const std::exception&) {
      // The server stopped under the write in flight.
    }
    EXPECT_NE(server.Wait(30), -1) << "the full disk did not stop the server";
    EXPECT_NE(server.Log().find("no space left on device (ENOSPC"),
              std::string::npos)
        << server.Log();
  }
  ASSERT_FALSE(acknowledged.empty());
  const testing::RunResult refused =
      RunFencepost({"serve", "--data-dir", data, "--listen", "127.0.0.1:0",
                    "--admin-listen", "127.0.0.1:0"});
  EXPECT_EQ(refused.exit_status, 2) << refused.output;
  EXPECT_NE(refused.output.find("ENOSPC"), std::string::npos) << refused.output;
  EXPECT_NE(refused.output.find("free space"), std::string::npos)
      << refused.output;
  EXPECT_EQ(refused.output.find("listening"), std::string::npos)
      << refused.output;

  ASSERT_EQ(::unlink(ballast.c_str()), 0);
  ServerProcess server(data);
  for (const auto& [key, token] : acknowledged) {
    const auto get = Fetch(server.data_port(), "GET", "/" + key);
    EXPECT_EQ(get.status, 200) << key;
    EXPECT_EQ(get.header("fencing-token"), token) << key;
  }
}

// A grant needs a token above the fence: at the largest uint64 there is
// none, and the answer says so (409 tokens-exhausted), changing nothing.
TEST(TokensExhaustedTest, AGrantOnAFenceAtTheLargestTokenSaysSo) {
  TempDir dir;
  ServerProcess server(dir / "d");
  const std::string max = "18446744073709551615";
  ASSERT_EQ(Fetch(server.admin_port(), "PUT", "/v1/fences/locks/x",
                  {{"Fencing-Token", max}})
                .status,
            201);
  const auto grant = Fetch(server.admin_port(), "PUT", "/v1/leases/locks/x", {},
                           R"({"holder":"a","ttl_ms":60000})");
  EXPECT_EQ(grant.status, 409) << grant.body;
  EXPECT_NE(grant.body.find("urn:fencepost:problem:tokens-exhausted"),
            std::string::npos)
      << grant.body;
  EXPECT_EQ(Fetch(server.admin_port(), "GET", "/v1/leases/locks/x").status,
            404);
  // Writes at the largest token still go through.
  EXPECT_EQ(Fetch(server.data_port(), "PUT", "/locks/x",
                  {{"Fencing-Token", max}}, "v")
                .status,
            201);
}

}  // namespace
}  // namespace fencepost
