// Uses the installed fencepost client: reads a URL, a lease document and a
// duration, and gets an error (not a crash, not an exception) from a port
// where nothing listens. Exits 0 when all of that holds.

#include <chrono>
#include <iostream>
#include <stdexcept>

#include "client/client.h"
#include "client/documents.h"
#include "client/duration.h"
#include "client/leader_elector.h"

namespace fc = fencepost::client;

int main(int argc, char** argv) {
  const std::string url = argc > 1 ? argv[1] : "http://127.0.0.1:1";
  try {
    fc::Client::Options bad_options;
    bad_options.url = "ftp://nowhere";
    fc::Client bad(bad_options);
    std::cerr << "a bad URL was accepted\n";
    return 1;
  } catch (const std::invalid_argument&) {
  }
  const auto lease = fc::ParseLease(
      R"({"name":"n","holder":null,"token":18446744073709551615})");
  if (!lease || lease->token != 18446744073709551615ull || lease->holder) {
    std::cerr << "the lease document was misread\n";
    return 1;
  }
  if (fc::ParseDuration("2m") != std::chrono::minutes(2)) {
    std::cerr << "the duration was misread\n";
    return 1;
  }
  fc::Client::Options options;
  options.url = url;
  options.timeout = std::chrono::seconds(2);
  fc::Client client(options);
  const fc::Result result = client.GetFence("some/key");
  if (result.ok()) {
    std::cerr << "a response from " << url << " where nothing listens\n";
    return 1;
  }
  std::cout << "consumer: " << client.url().ToString() << ": "
            << result.error.message() << " (" << result.detail << ")\n";
  std::cout << "consumer: a holder ID: " << fc::DefaultHolderId() << "\n";
  return 0;
}
