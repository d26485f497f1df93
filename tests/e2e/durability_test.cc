// The order of system calls behind an acknowledgement, watched with strace:
// no 2xx to a write leaves the process before the write-ahead log's sync
// that holds its record has returned.

#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <map>
#include <sstream>

#include "tests/testing/http_client.h"
#include "tests/testing/server_process.h"
#include "tests/testing/temp_dir.h"

namespace fencepost {
namespace {

using testing::HttpClient;
using testing::ServerProcess;
using testing::TempDir;

TEST(DurabilityTest, EveryAcknowledgementFollowsItsLogSync) {
  if (std::system("strace -V >/dev/null 2>&1") != 0) {
    FAIL() << "strace is not installed; scripts/deps.sh installs it";
  }
  TempDir dir;
  const std::string trace = dir / "trace";
  constexpr int kWrites = 40;
  {
    ServerProcess server(dir / "data", {}, {},
                         {"strace", "-f", "-qq", "-y", "-s", "24", "-o", trace,
                          "-e", "trace=fdatasync,sendmsg"});
    HttpClient client(server.data_port());
    for (int token = 1; token <= kWrites; ++token) {
      // One client, one write at a time: each is its own group and sync.
      ASSERT_EQ(client.Request("PUT", "/k" + std::to_string(token % 3),
                               {{"Fencing-Token", std::to_string(token)}}, "v")
                        .status /
                    100,
                2);
    }
  }
  // strace logs a syscall's end before anything it made possible: the
  // answer is sent only after the committer's sync returned and handed it
  // over. So, read in order, the n-th 2xx must come after the n-th
  // completed sync of a log segment.
  std::ifstream in(trace);
  std::map<std::string, bool> pending_log_sync;  // by thread id
  int syncs = 0, answers = 0, early = 0;
  auto succeeded = [](const std::string& line) {
    return line.size() >= 3 && line.compare(line.size() - 3, 3, "= 0") == 0;
  };
  for (std::string line; std::getline(in, line);) {
    const std::string pid = line.substr(0, line.find(' '));
    const bool log_file = line.find("/wal-") != std::string::npos;
    if (line.find("fdatasync(") != std::string::npos && log_file) {
      if (line.find("<unfinished ...>") != std::string::npos) {
        pending_log_sync[pid] = true;
      } else if (succeeded(line)) {
        ++syncs;
      }
    } else if (line.find("<... fdatasync resumed>") != std::string::npos &&
               pending_log_sync[pid]) {
      pending_log_sync[pid] = false;
      if (succeeded(line)) ++syncs;
    } else if (line.find("sendmsg(") != std::string::npos &&
               line.find("HTTP/1.1 20") != std::string::npos) {
      ++answers;
      if (syncs < answers) ++early;
    }
  }
  EXPECT_EQ(answers, kWrites) << "every answer was seen";
  EXPECT_GE(syncs, kWrites);
  EXPECT_EQ(early, 0) << "answers sent before their log sync returned";
}

}  // namespace
}  // namespace fencepost
