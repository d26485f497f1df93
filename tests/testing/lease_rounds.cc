#include "tests/testing/lease_rounds.h"

#include <gtest/gtest.h>

#include <atomic>
#include <thread>

#include "tests/testing/http_client.h"

namespace fencepost::testing {

void ExpectOneGrantPerRound(const std::vector<std::uint16_t>& admin_ports,
                            const std::string& prefix, int rounds,
                            const std::function<void()>& granted) {
  constexpr int kClients = 16;
  for (int round = 0; round < rounds; ++round) {
    SCOPED_TRACE("round " + std::to_string(round));
    const auto name = [&](int i) {
      return prefix + "-" + std::to_string(round) + "-" + std::to_string(i);
    };
    const auto port = [&](int i) {
      return admin_ports[i % admin_ports.size()];
    };
    std::atomic<int> ready = 0;
    std::atomic<bool> go = false;
    std::vector<HttpResponse> answers(kClients);
    std::vector<std::thread> clients;
    for (int i = 0; i < kClients; ++i) {
      clients.emplace_back([&, i] {
        HttpClient client(port(i));
        ++ready;
        while (!go) std::this_thread::yield();
        answers[i] = client.Request("PUT", "/v1/leases/" + name(i), {},
                                    R"({"holder":"h","ttl_ms":60000})");
      });
    }
    while (ready < kClients) std::this_thread::yield();
    go = true;
    for (auto& t : clients) t.join();
    int winner = -1, count = 0;
    for (int i = 0; i < kClients; ++i) {
      if (answers[i].status == 200) {
        winner = i;
        ++count;
      } else {
        EXPECT_EQ(answers[i].status, 507) << answers[i].body;
        EXPECT_NE(answers[i].body.find("too-many-leases"), std::string::npos)
            << answers[i].body;
      }
    }
    ASSERT_EQ(count, 1);
    if (granted) granted();
    ASSERT_EQ(
        Fetch(port(winner), "DELETE", "/v1/leases/" + name(winner),
              {{"Fencing-Token", answers[winner].header("fencing-token")}},
              R"({"holder":"h"})")
            .status,
        204);
  }
}

}  // namespace fencepost::testing
