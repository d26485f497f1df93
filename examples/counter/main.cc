// A read-modify-write with the C++ client (docs/conditional-writes.md):
// adds one to a counter N times, each time reading it with its ETag and
// writing it back with If-Match, again from a fresh read after a 412. Run
// several at once: the counter ends at the sum of their N, no increment
// lost.
//
//   counter DATA_URL KEY TOKEN N

#include <cstdint>
#include <cstdlib>
#include <iostream>
#include <string>

#include "client/client.h"

namespace {

using fencepost::client::Client;
using fencepost::client::Condition;

// One increment; false when the server answered something unexpected.
bool Increment(Client& client, const std::string& key, std::uint64_t token,
               int* conflicts) {
  while (true) {
    const auto read = client.Get(key);
    if (!read.ok()) return false;
    Condition condition;
    std::uint64_t value = 0;
    if (read.response.status == 200) {
      value = std::stoull(read.response.body);
      condition.if_match = read.response.header("etag");
    } else if (read.response.status == 404) {
      condition.if_none_match = true;  // the first one creates it
    } else {
      return false;
    }
    const auto write =
        client.Put(key, token, std::to_string(value + 1), condition);
    if (!write.ok()) return false;
    const int status = write.response.status;
    if (status == 200 || status == 201) return true;
    if (status != 412) {
      std::cerr << "PUT " << key << ": " << status << " " << write.response.body
                << "\n";
      return false;
    }
    ++*conflicts;  // someone wrote in between: read again
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 5) {
    std::cerr << "usage: counter DATA_URL KEY TOKEN N\n";
    return 2;
  }
  Client::Options options;
  options.url = argv[1];
  Client client(options);
  const std::string key = argv[2];
  const std::uint64_t token = std::stoull(argv[3]);
  const int n = std::atoi(argv[4]);
  int conflicts = 0;
  for (int i = 0; i < n; ++i) {
    if (!Increment(client, key, token, &conflicts)) return 1;
  }
  std::cout << "added " << n << " after " << conflicts << " conflicts\n";
  return 0;
}
