// A leader in C++, the quick start: campaign for a lease with
// fencepost::client::LeaderElector and, while elected, write progress
// through fencepost's data port with the lease's token. SIGINT or SIGTERM
// ends the term and releases the lease.
//
//   leader NAME KEY [ADMIN_URL [DATA_URL [TTL_MS [BLOCK_MS]]]]
//   leader orders/leader orders/progress http://127.0.0.1:7401
//     http://127.0.0.1:7400 3000
//
// With BLOCK_MS, the work first blocks that long without looking at its
// stop signal (a long computation, a GC pause of the work alone): the
// elector keeps renewing on its own thread meanwhile.
//
// Prints one line per event: "elected TOKEN", "wrote KEY TOKEN STATUS",
// "fenced TOKEN" (a write refused with 409: another leader took over),
// "stop TOKEN UNIX_MS" (the moment the stop signal fired), "lost TOKEN
// REASON".

#include <pthread.h>
#include <signal.h>

#include <atomic>
#include <chrono>
#include <iostream>
#include <string>
#include <thread>

#include "client/client.h"
#include "client/leader_elector.h"

using fencepost::client::Client;
using fencepost::client::LeaderElector;
using fencepost::client::StopSignal;

int main(int argc, char** argv) {
  if (argc < 3) {
    std::cerr << "usage: leader NAME KEY [ADMIN_URL [DATA_URL [TTL_MS "
                 "[BLOCK_MS]]]]\n";
    return 2;
  }
  const std::string name = argv[1], key = argv[2];
  const std::string admin = argc > 3 ? argv[3] : "http://127.0.0.1:7401";
  const std::string data = argc > 4 ? argv[4] : "http://127.0.0.1:7400";
  const auto ttl =
      std::chrono::milliseconds(argc > 5 ? std::stoi(argv[5]) : 3000);
  const auto block =
      std::chrono::milliseconds(argc > 6 ? std::stoi(argv[6]) : 0);

  // Signals go to one thread that waits for them, never to a handler.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);

  LeaderElector::Options options;
  options.client.url = admin;
  options.name = name;
  options.ttl = ttl;
  LeaderElector elector(
      options,
      [&](LeaderElector::Token token, const StopSignal& stop) {
        std::cout << "elected " << token << std::endl;
        // Notes the moment the stop signal fires, whatever the work does.
        std::atomic<bool> done{false};
        std::thread watcher([&stop, &done, token] {
          while (!stop.wait_for(std::chrono::milliseconds(20))) {
            if (done) return;
          }
          const auto now = std::chrono::system_clock::now().time_since_epoch();
          std::cout << "stop " << token << " "
                    << std::chrono::duration_cast<std::chrono::milliseconds>(
                           now)
                           .count()
                    << std::endl;
        });
        std::this_thread::sleep_for(block);
        Client::Options store_options;
        store_options.url = data;
        store_options.timeout = std::chrono::milliseconds(1000);
        Client store(store_options);
        for (int step = 1; !stop.stopped(); ++step) {
          const auto r = store.Put(key, token, "step " + std::to_string(step));
          if (!r.ok()) {
            std::cout << "write failed: " << r.detail << std::endl;
          } else if (r.response.status == 409) {
            std::cout << "fenced " << token << std::endl;
            break;  // a newer leader exists: stop the work at once
          } else {
            std::cout << "wrote " << key << " " << token << " "
                      << r.response.status << std::endl;
          }
          stop.wait_for(std::chrono::milliseconds(100));
        }
        done = true;
        watcher.join();
      },
      [](LeaderElector::Token token, const std::string& reason) {
        std::cout << "lost " << token << " " << reason << std::endl;
      });

  std::thread waiter([&] {
    int signal = 0;
    sigwait(&signals, &signal);
    elector.Stop();
  });
  elector.Run();
  // Run() returns only after Stop(), so the waiter has its signal.
  waiter.join();
  return 0;
}
