// Hostile bytes on a raw socket, sent exactly as written. Each request gets
// its SPEC status, the connection closes where the framing is in doubt, a
// well-behaved client is served all along, and nothing is stored.

#include <gtest/gtest.h>

#include <atomic>
#include <fstream>
#include <thread>

#include "tests/testing/http_client.h"
#include "tests/testing/server_process.h"
#include "tests/testing/temp_dir.h"

namespace fencepost {
namespace {

using testing::Fetch;
using testing::HttpClient;
using testing::ServerProcess;
using testing::TempDir;

struct Case {
  std::string name;
  std::string bytes;
  int status;
  bool closes;  // the framing is in doubt: the server must close
};

std::string Put(const std::string& target, const std::string& token_line,
                const std::string& rest = "Content-Length: 4\r\n\r\nevil") {
  return "PUT " + target + " HTTP/1.1\r\nHost: x\r\n" + token_line + rest;
}

TEST(RawCorpusTest, EveryCaseGetsItsStatusAndNothingIsStored) {
  TempDir dir;
  ServerProcess server(dir / "data",
                       {"--max-body", "1024", "--read-timeout", "1"});
  const std::string token = "Fencing-Token: 5\r\n";
  const std::string smuggled = "GET /smuggled HTTP/1.1\r\nHost: x\r\n\r\n";
  const std::vector<Case> cases = {
      {"CL.TE",
       Put("/c", token,
           "Content-Length: 5\r\nTransfer-Encoding: "
           "chunked\r\n\r\n0\r\n\r\n" +
               smuggled),
       400, true},
      {"TE.CL",
       Put("/c", token,
           "Transfer-Encoding: chunked\r\nContent-"
           "Length: 5\r\n\r\n0\r\n\r\n" +
               smuggled),
       400, true},
      {"TE gzip + CL",
       Put("/c", token,
           "Transfer-Encoding: gzip\r\nContent-"
           "Length: 5\r\n\r\nhello"),
       400, true},
      {"CL + TE gzip",
       Put("/c", token,
           "Content-Length: 5\r\nTransfer-"
           "Encoding: gzip\r\n\r\nhello"),
       400, true},
      {"chunked, chunked",
       Put("/c", token,
           "Transfer-Encoding: chunked, "
           "chunked\r\n\r\n0\r\n\r\n"),
       400, true},
      {"two Content-Lengths",
       Put("/c", token,
           "Content-Length: 4\r\nContent-"
           "Length: 5\r\n\r\nevil!"),
       400, true},
      {"obs-fold",
       Put("/c", token,
           "X-A: 1\r\n  folded\r\nContent-Length: "
           "4\r\n\r\nevil"),
       400, true},
      {"obs-fold in the token", Put("/c", "Fencing-Token:\r\n 5\r\n"), 400,
       true},
      {"spaces in the target",
       "PUT /a b HTTP/1.1\r\nHost: x\r\n" + token +
           "Content-Length: 4\r\n\r\nevil",
       400, true},
      {"10 KiB of headers are fine, 17 KiB are not",
       Put("/c", token,
           "X-Big: " + std::string(17 * 1024, 'a') +
               "\r\nContent-Length: 4\r\n\r\nevil"),
       431, true},
      {"body over --max-body",
       Put("/c", token,
           "Content-Length: 2000\r\n\r\n" + std::string(2000, 'b')),
       413, true},
      {"hex token", Put("/c", "Fencing-Token: 0x10\r\n"), 400, false},
      {"negative token", Put("/c", "Fencing-Token: -1\r\n"), 400, false},
      {"21-digit token", Put("/c", "Fencing-Token: 100000000000000000000\r\n"),
       400, false},
      {"2^64 token", Put("/c", "Fencing-Token: 18446744073709551616\r\n"), 400,
       false},
      {"fullwidth digit token", Put("/c", "Fencing-Token: \xef\xbc\x95\r\n"),
       400, false},
      {"two tokens", Put("/c", token + token), 400, false},
      {"no token", Put("/c", ""), 428, false},
      {"invalid UTF-8 key", Put("/%ff%fe", token), 400, false},
      {"overlong UTF-8 key", Put("/%c0%af", token), 400, false},
      {"NUL in key", Put("/a%00b", token), 400, false},
      {"dot segments", Put("/a/%2e%2e/b", token), 400, false},
      {"empty segment", Put("/a//b", token), 400, false},
      {"key over 1024 bytes", Put("/" + std::string(1025, 'k'), token), 400,
       false},
      // Request targets: origin form only, and nothing a store reads
      // differently from the key (docs/request-targets.md).
      {"fragment", Put("/c#zombie", token), 400, false},
      {"fragment after a query", Put("/c?x=1#zombie", token), 400, false},
      {"no leading slash", Put("c", token), 400, false},
      {"absolute form", Put("http://x/c", token), 400, false},
      {"asterisk form", Put("*", token), 400, false},
      {"raw backslash", Put("/c\\d", token), 400, false},
      {"raw UTF-8", Put("/caf\xc3\xa9", token), 400, false},
      // RFC 9112: chunked in HTTP/1.0 is faulty framing; HTTP/1.1 needs
      // exactly one Host.
      {"HTTP/1.0 with chunked",
       "PUT /c HTTP/1.0\r\nHost: x\r\n" + token +
           "Transfer-Encoding: chunked\r\n\r\n4\r\nevil\r\n0\r\n\r\n",
       400, true},
      {"HTTP/1.1 without Host",
       "PUT /c HTTP/1.1\r\n" + token + "Content-Length: 4\r\n\r\nevil", 400,
       true},
      {"two Hosts",
       Put("/c", token, "Host: y\r\nContent-Length: 4\r\n\r\nevil"), 400, true},
      // Trailer fields are never header fields.
      {"token only in the trailer",
       Put("/c", "",
           "Transfer-Encoding: chunked\r\nTrailer: Fencing-Token\r\n\r\n"
           "4\r\nevil\r\n0\r\nFencing-Token: 77\r\n\r\n"),
       428, false},
      // Every part of a request is bounded, whatever --max-body says.
      {"chunk extension over 32 KiB",
       Put("/c", token,
           "Transfer-Encoding: chunked\r\n\r\n4;" +
               std::string(40 * 1024, 'x') + "\r\nevil\r\n0\r\n\r\n"),
       400, true},
      {"trailer section over 32 KiB",
       Put("/c", token,
           "Transfer-Encoding: chunked\r\n\r\n4\r\nevil\r\n0\r\nX-T: " +
               std::string(40 * 1024, 't') + "\r\n\r\n"),
       400, true},
      // Expect: 100-continue is answered only after the header's checks.
      {"100-continue without a token",
       Put("/c", "", "Expect: 100-continue\r\nContent-Length: 4\r\n\r\n"), 428,
       true},
      {"100-continue with a bad key",
       Put("/a//b", token, "Expect: 100-continue\r\nContent-Length: 4\r\n\r\n"),
       400, true},
  };

  // A well-behaved client writes all along and must always be answered.
  std::atomic<bool> stop = false;
  std::atomic<int> served = 0, failed = 0;
  std::thread good([&] {
    HttpClient client(server.data_port());
    for (std::uint64_t t = 1; !stop; ++t) {
      auto r = client.Request("PUT", "/good",
                              {{"Fencing-Token", std::to_string(t)}}, "ok");
      (r.status / 100 == 2 ? served : failed)++;
    }
  });
  for (const Case& c : cases) {
    HttpClient client(server.data_port());
    auto r = client.Raw(c.bytes);
    EXPECT_EQ(r.status, c.status) << c.name;
    if (c.closes) {
      EXPECT_TRUE(client.ClosedByPeer(3)) << c.name;
    }
  }
  // A client that sends its header slowly but within the read deadline (1 s
  // here) is served: slowness alone is not refused.
  {
    HttpClient slow(server.data_port());
    for (const std::string part : {"GET /slow HTTP/1.1\r\n", "Host: x\r\n"}) {
      slow.Send(part);
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    slow.Send("\r\n");
    EXPECT_EQ(slow.ReadResponse().status, 404) << "a slow client was refused";
  }
  // A client dripping a header that never ends (a byte every 150 ms, never
  // the blank line) is cut off by the read deadline, while the good client
  // is still served. Without a deadline it would hold its connection open
  // for good: the drip ends after ~6 s and the close is awaited 10 s more.
  {
    HttpClient drip(server.data_port());
    const std::string header = "GET /drip HTTP/1.1\r\nHost: x\r\nX-Slow: 1\r\n";
    bool cut = false;
    for (char c : header) {
      try {
        drip.Send(std::string(1, c));
      } catch (const std::exception&) {
        cut = true;  // the server had closed: the write failed
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(150));
    }
    if (!cut) cut = drip.ClosedByPeer(10);
    EXPECT_TRUE(cut) << "the dripping client was never cut off";
  }
  stop = true;
  good.join();
  EXPECT_GT(served, 0);
  EXPECT_EQ(failed, 0);

  // Nothing but the good client's key was stored or fenced.
  auto fences = Fetch(server.admin_port(), "GET", "/v1/fences");
  EXPECT_NE(fences.body.find("\"fence\":\"good\""), std::string::npos);
  EXPECT_EQ(fences.body.find("\"fence\":\"c\""), std::string::npos)
      << fences.body;
  EXPECT_EQ(Fetch(server.data_port(), "GET", "/smuggled").status, 404);
}

// Streams `endless` after `head` as fast as the server takes it, for at most
// `seconds` or until the server closes; returns whether it closed.
bool Flood(std::uint16_t port, const std::string& head, char endless,
           double seconds) {
  HttpClient client(port);
  client.Send(head);
  const std::string chunk(64 * 1024, endless);
  const auto until =
      std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  while (std::chrono::steady_clock::now() < until) {
    try {
      client.Send(chunk);
    } catch (const std::exception&) {
      return true;  // closed: the write failed
    }
  }
  return client.ClosedByPeer(1);
}

// A line that never ends cannot grow the process: a chunk extension, a
// trailer field, each bounded independently of --max-body.
TEST(RawCorpusTest, ALineThatNeverEndsIsCutOffWithBoundedMemory) {
  TempDir dir;
  ServerProcess server(dir / "data", {"--max-body", "268433366"});
  const std::string put =
      "PUT /c HTTP/1.1\r\nHost: x\r\nFencing-Token: 5\r\n"
      "Transfer-Encoding: chunked\r\n\r\n";
  EXPECT_TRUE(Flood(server.data_port(), put + "4;ext=", 'x', 3))
      << "a chunk extension that never ends was not cut off";
  EXPECT_TRUE(
      Flood(server.data_port(), put + "4\r\nevil\r\n0\r\nX-T: ", 't', 3))
      << "a trailer field that never ends was not cut off";
  EXPECT_TRUE(
      Flood(server.data_port(), "GET /c HTTP/1.1\r\nHost: x\r\nX-H: ", 'h', 3))
      << "a header field that never ends was not cut off";
  const std::size_t peak = server.PeakRss();
  EXPECT_GT(peak, 0u);
  // Unbounded, it reached 1 GiB in 3 s; ASan's shadow and quarantine add
  // their own megabytes.
#if defined(__SANITIZE_ADDRESS__)
  constexpr std::size_t kBound = 256u << 20;
#else
  constexpr std::size_t kBound = 64u << 20;
#endif
  EXPECT_LT(peak, kBound) << "peak RSS " << (peak >> 20) << " MiB";
  EXPECT_EQ(Fetch(server.admin_port(), "GET", "/v1/fences/c").status, 404);
}

}  // namespace
}  // namespace fencepost
