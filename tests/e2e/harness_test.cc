// The harness's own promise: a sanitizer's report in a server's output is
// found, so the test that started that server fails.

#include <gtest/gtest.h>

#include <string>

#include "tests/testing/server_process.h"

namespace fencepost {
namespace {

using testing::SanitizerReport;

TEST(HarnessTest, FindsEverySanitizersReport) {
  for (const std::string report :
       {"==7==ERROR: AddressSanitizer: heap-use-after-free on address",
        "==7==ERROR: LeakSanitizer: detected memory leaks",
        "WARNING: ThreadSanitizer: data race (pid=7)",
        "fence/wal.cc:12:5: runtime error: signed integer overflow",
        "==7==ERROR: UndefinedBehaviorSanitizer: SEGV on unknown address"}) {
    const std::string output =
        "info listening data=127.0.0.1:1\n" + report + "\n    #0 0x1 in main\n";
    EXPECT_NE(SanitizerReport(output).find(report), std::string::npos)
        << report;
  }
}

TEST(HarnessTest, ACleanLogHasNoReport) {
  EXPECT_EQ(SanitizerReport("info listening data=127.0.0.1:1\n"
                            "info stopping: SIGTERM\n"),
            "");
}

}  // namespace
}  // namespace fencepost
