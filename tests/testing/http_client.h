#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace fencepost::testing {

struct HttpResponse {
  int status = 0;
  std::map<std::string, std::string> headers;  // names in lower case
  std::string body;
  bool has(const std::string& name) const { return headers.count(name) > 0; }
  std::string header(const std::string& name) const {
    auto it = headers.find(name);
    return it == headers.end() ? "" : it->second;
  }
};

using Headers = std::vector<std::pair<std::string, std::string>>;

// A blocking HTTP/1.1 client on one keep-alive connection to 127.0.0.1.
// Every read has a deadline (10 s unless `seconds` says), so a broken
// server fails a test instead of hanging it.
class HttpClient {
 public:
  explicit HttpClient(std::uint16_t port, double seconds = 10);
  ~HttpClient();
  HttpClient(const HttpClient&) = delete;
  HttpClient& operator=(const HttpClient&) = delete;

  HttpResponse Request(const std::string& method, const std::string& target,
                       const Headers& headers = {},
                       const std::string& body = "");
  // Sends raw bytes as they are, then reads one response.
  HttpResponse Raw(const std::string& bytes);
  void Send(const std::string& bytes);
  HttpResponse ReadResponse(bool head = false);
  // True when the server closed the connection (read returns EOF or reset)
  // within `seconds`.
  bool ClosedByPeer(double seconds = 5);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
  double seconds_;
};

// One request on a fresh connection.
HttpResponse Fetch(std::uint16_t port, const std::string& method,
                   const std::string& target, const Headers& headers = {},
                   const std::string& body = "");

}  // namespace fencepost::testing
