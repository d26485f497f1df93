// Data formats: a directory written by the release before entity tags
// (format 1, tests/fixtures/format1.tar.gz) or by the release before value
// records kept their key's fence (format 2, format2.tar.gz; both made by
// make_format1.sh) opens with every value, fence and lease, upgraded in
// place; a directory of a newer format is refused with exit 2.

#include <gtest/gtest.h>
#include <lmdb.h>
#include <signal.h>
#include <sys/xattr.h>

#include <cstdlib>
#include <filesystem>
#include <string>

#include "tests/testing/http_client.h"
#include "tests/testing/server_process.h"
#include "tests/testing/temp_dir.h"

namespace fencepost {
namespace {

namespace fs = std::filesystem;
using testing::Fetch;
using testing::ServerProcess;
using testing::TempDir;

const std::vector<std::string> kScope = {"--fence-scope", "scoped/"};

// The fixture of `format`, unpacked into `dir`/data.
std::string Unpack(const TempDir& dir, int format = 1) {
  const std::string command = "tar -C '" + dir.path() + "' -xzf '" +
                              FENCEPOST_FIXTURES "/format" +
                              std::to_string(format) + ".tar.gz'";
  EXPECT_EQ(std::system(command.c_str()), 0);
  return dir / "data";
}

std::uint64_t FenceToken(std::uint16_t admin, const std::string& name) {
  const auto fence = Fetch(admin, "GET", "/v1/fences/" + name);
  if (fence.status != 200) return 0;
  return std::stoull(fence.body.substr(fence.body.find("\"token\":") + 8));
}

// What make_format1.sh wrote, read back through the server; its lease was
// acquired at `acquired` (a date and time to the minute).
void ExpectFixtureContents(const ServerProcess& server,
                           const std::string& acquired) {
  const auto port = server.data_port();
  std::string binary;
  for (int b = 0; b < 256; ++b) binary += static_cast<char>(b);
  const std::string long_key = "long/" + std::string(599, '0') + "7";
  const std::vector<std::pair<std::string, std::string>> values = {
      {"plain", "hello"},   {"binary", binary}, {long_key, "long-value"},
      {"scoped/a", "a"},    {"scoped/b", "b"},  {"batch/one", "one"},
      {"batch/two", "two"}, {"empty", ""}};
  for (const auto& [key, body] : values) {
    const auto read = Fetch(port, "GET", "/" + key);
    EXPECT_EQ(read.status, 200) << key;
    EXPECT_EQ(read.body, body) << key;
    EXPECT_FALSE(read.header("etag").empty()) << key;
  }
  EXPECT_EQ(Fetch(port, "GET", "/gone").status, 404);
  const auto admin = server.admin_port();
  EXPECT_EQ(FenceToken(admin, "plain"), 5u);
  EXPECT_EQ(FenceToken(admin, "binary"), 6u);
  EXPECT_EQ(FenceToken(admin, "scoped/"), 4u);
  EXPECT_EQ(FenceToken(admin, "gone"), 8u);
  EXPECT_EQ(FenceToken(admin, "bumped"), 42u);
  EXPECT_EQ(FenceToken(admin, "empty"), 10u);
  // The lease's record (its hour has run out since the fixture was made:
  // a lease past its time by the wall clock is not held after a start).
  const auto lease = Fetch(admin, "GET", "/v1/leases/leader");
  EXPECT_EQ(lease.status, 200);
  EXPECT_NE(lease.body.find("\"token\":1,\"ttl_ms\":3600000"),
            std::string::npos)
      << lease.body;
  EXPECT_NE(lease.body.find("\"acquired_at\":\"" + acquired + ":"),
            std::string::npos)
      << lease.body;
}

TEST(UpgradeTest, AFormat1DirectoryOpensWithEveryValueFenceAndLease) {
  TempDir dir;
  const std::string data = Unpack(dir);
  auto server = std::make_unique<ServerProcess>(data, kScope);
  EXPECT_NE(server->Log().find("upgraded in place from data format 1 to 3"),
            std::string::npos)
      << server->Log();
  ExpectFixtureContents(*server, "2026-12-04T19:19");
  // A value LMDB held in format 1 has the tag "0"; its next write, a new
  // one, and If-Match works on both.
  const auto port = server->data_port();
  EXPECT_EQ(Fetch(port, "GET", "/plain").header("etag"), "\"0\"");
  auto write = Fetch(port, "PUT", "/plain",
                     {{"Fencing-Token", "5"}, {"If-Match", "\"0\""}}, "again");
  ASSERT_EQ(write.status, 200);
  EXPECT_NE(write.header("etag"), "\"0\"");
  EXPECT_EQ(Fetch(port, "PUT", "/plain",
                  {{"Fencing-Token", "5"}, {"If-Match", "\"0\""}}, "lost")
                .status,
            412);

  // Opened again: nothing to upgrade, the same contents.
  server->Signal(SIGTERM);
  EXPECT_EQ(server->Wait(), 0);
  server = std::make_unique<ServerProcess>(data, kScope);
  EXPECT_EQ(server->Log().find("upgraded in place"), std::string::npos);
  EXPECT_EQ(Fetch(server->data_port(), "GET", "/plain").body, "again");
  EXPECT_EQ(Fetch(server->data_port(), "GET", "/plain").header("etag"),
            write.header("etag"));
}

// Format 2 kept every fence in the fences database; from format 3 a write
// keeps the fence of a key that is its own in the value record. A fence
// moved that way is read back, and refuses what it must, after a clean stop
// (from LMDB) and after a kill (from the log), and its older record in the
// fences database never shows through.
TEST(UpgradeTest, AFormat2DirectoryOpensAndItsFencesMoveOnInValueRecords) {
  TempDir dir;
  const std::string data = Unpack(dir, 2);
  auto server = std::make_unique<ServerProcess>(data, kScope);
  EXPECT_NE(server->Log().find("upgraded in place from data format 2 to 3"),
            std::string::npos)
      << server->Log();
  EXPECT_EQ(server->Log().find("entity tags"), std::string::npos);
  ExpectFixtureContents(*server, "2026-12-04T22:24");
  EXPECT_NE(Fetch(server->data_port(), "GET", "/plain").header("etag"),
            "\"0\"");
  for (const char* token : {"11", "12"}) {
    ASSERT_EQ(Fetch(server->data_port(), "PUT", "/plain",
                    {{"Fencing-Token", token}}, std::string("v") + token)
                  .status,
              200);
  }
  for (const int stop : {SIGTERM, SIGKILL}) {
    server->Signal(stop);
    server->Wait();
    server = std::make_unique<ServerProcess>(data, kScope);
    const auto port = server->data_port();
    EXPECT_EQ(FenceToken(server->admin_port(), "plain"), 12u) << stop;
    const auto listed =
        Fetch(server->admin_port(), "GET", "/v1/fences?prefix=plain");
    EXPECT_NE(listed.body.find("\"token\":12"), std::string::npos)
        << listed.body;
    EXPECT_EQ(
        Fetch(port, "PUT", "/plain", {{"Fencing-Token", "11"}}, "late").status,
        409)
        << stop;
    EXPECT_EQ(Fetch(port, "GET", "/plain").body, "v12");
    EXPECT_EQ(server->Log().find("upgraded in place"), std::string::npos);
  }
}

// Records `format` as the format of the LMDB environment in `dir`.
void SetLmdbFormat(const std::string& dir, std::uint64_t format) {
  MDB_env* env = nullptr;
  ASSERT_EQ(mdb_env_create(&env), 0);
  mdb_env_set_maxdbs(env, 8);
  ASSERT_EQ(mdb_env_open(env, dir.c_str(), 0, 0644), 0);
  MDB_txn* txn = nullptr;
  ASSERT_EQ(mdb_txn_begin(env, nullptr, 0, &txn), 0);
  MDB_dbi meta;
  ASSERT_EQ(mdb_dbi_open(txn, "meta", 0, &meta), 0);
  char value[8];
  for (int i = 0; i < 8; ++i) {
    value[i] = static_cast<char>(format >> (56 - 8 * i));
  }
  MDB_val key{6, const_cast<char*>("format")}, data{8, value};
  ASSERT_EQ(mdb_put(txn, meta, &key, &data, 0), 0);
  ASSERT_EQ(mdb_txn_commit(txn), 0);
  mdb_env_close(env);
}

TEST(UpgradeTest, ADirectoryOfANewerFormatIsRefusedWithExit2) {
  TempDir dir;
  const std::string data = dir / "data";
  {
    ServerProcess server(data);
    ASSERT_EQ(
        Fetch(server.data_port(), "PUT", "/k", {{"Fencing-Token", "1"}}, "v")
            .status,
        201);
    server.Signal(SIGTERM);
    EXPECT_EQ(server.Wait(), 0);
  }
  SetLmdbFormat(data + "/shard-0", 4);
  const auto refused =
      testing::RunFencepost({"--data-dir", data, "--listen", "127.0.0.1:0",
                             "--admin-listen", "127.0.0.1:0"});
  EXPECT_EQ(refused.exit_status, 2) << refused.output;
  EXPECT_NE(refused.output.find("newer release of fencepost"),
            std::string::npos)
      << refused.output;

  // fs: the same, from the directory's attribute.
  const std::string store = dir / "store";
  fs::create_directories(store);
  ASSERT_EQ(::setxattr(store.c_str(), "user.fencepost.format", "3", 1, 0), 0);
  const auto fs_refused = testing::RunFencepost(
      {"--data-dir", dir / "fs-data", "--backend", "fs:" + store, "--listen",
       "127.0.0.1:0", "--admin-listen", "127.0.0.1:0"});
  EXPECT_EQ(fs_refused.exit_status, 2) << fs_refused.output;
  EXPECT_NE(fs_refused.output.find("another release of fencepost"),
            std::string::npos)
      << fs_refused.output;
}

}  // namespace
}  // namespace fencepost
