#include "cli/watch.h"

#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/signal_set.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/http/parser.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/string_body.hpp>
#include <boost/beast/http/write.hpp>
#include <boost/beast/ssl/ssl_stream.hpp>
#include <chrono>
#include <iostream>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <thread>

#include "cli/requests.h"
#include "client/client.h"
#include "client/json.h"

namespace fencepost::cli {
namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
namespace ssl = asio::ssl;
using asio::ip::tcp;
using std::chrono::milliseconds;

// The server sends a comment every 15 s: a stream silent for longer is
// gone, and is opened again.
constexpr std::chrono::seconds kSilence{25};
// The longest event (its lines together) the command reads.
constexpr std::size_t kMaxEventBytes = 1u << 20;

// The events of an SSE byte stream, as they complete.
class EventReader {
 public:
  // Takes more bytes; prints each whole event. False when an event passed
  // kMaxEventBytes.
  bool Add(std::string_view bytes, std::optional<std::string>* last_id) {
    pending_ += bytes;
    std::size_t end;
    while ((end = pending_.find("\n\n")) != std::string::npos) {
      Print(std::string_view(pending_).substr(0, end), last_id);
      pending_.erase(0, end + 2);
    }
    return pending_.size() <= kMaxEventBytes;
  }

 private:
  static void Print(std::string_view block,
                    std::optional<std::string>* last_id) {
    std::string id, type, data;
    while (!block.empty()) {
      const std::size_t eol = std::min(block.find('\n'), block.size());
      const std::string_view line = block.substr(0, eol);
      if (line.rfind("id: ", 0) == 0) id = line.substr(4);
      if (line.rfind("event: ", 0) == 0) type = line.substr(7);
      if (line.rfind("data: ", 0) == 0) data = line.substr(6);
      block.remove_prefix(std::min(eol + 1, block.size()));
    }
    if (type.empty() || data.size() < 2 || data.front() != '{') return;
    std::string out = "{\"event\":" + client::JsonQuote(type);
    if (!id.empty() &&
        id.find_first_not_of("0123456789") == std::string::npos) {
      out += ",\"id\":" + id;
      *last_id = id;
    }
    out += data == "{}" ? "}" : "," + data.substr(1);
    std::cout << out << "\n" << std::flush;
  }

  std::string pending_;
};

// One connection: the request, then the stream until it ends, goes silent,
// breaks, or a signal came. Returns the status of the answer (0 when none
// came), and sets *stop on a signal.
template <class Stream>
int Follow(asio::io_context& io, Stream& stream, const std::string& request,
           std::optional<std::string>* last_id, bool* stop) {
  auto& lowest = beast::get_lowest_layer(stream);
  beast::error_code ec;
  lowest.expires_after(std::chrono::seconds(10));
  asio::write(stream, asio::buffer(request), ec);
  if (ec) return 0;
  beast::flat_buffer buffer;
  // Each chunk's bytes go to the reader as they come, none to the body.
  http::response_parser<http::string_body> parser;
  parser.body_limit(boost::none);
  EventReader reader;
  bool too_long = false;
  auto on_chunk = [&](std::uint64_t, beast::string_view body,
                      beast::error_code&) -> std::size_t {
    if (!reader.Add(std::string_view(body.data(), body.size()), last_id)) {
      too_long = true;
    }
    return body.size();
  };
  parser.on_chunk_body(on_chunk);
  int status = 0;
  bool done = false;
  http::async_read_header(stream, buffer, parser,
                          [&](beast::error_code e, std::size_t) {
                            ec = e;
                            done = true;
                          });
  lowest.expires_after(kSilence);
  while (!done) io.run_one();  // a signal closes the socket: it ends
  if (ec || *stop) return 0;
  status = parser.get().result_int();
  if (status != 200) return status;
  while (!*stop && !too_long && !parser.is_done()) {
    done = false;
    lowest.expires_after(kSilence);
    http::async_read_some(stream, buffer, parser,
                          [&](beast::error_code e, std::size_t) {
                            ec = e;
                            done = true;
                          });
    while (!done) io.run_one();
    if (ec) break;
  }
  return status;
}

}  // namespace

int Watch(const Flags& flags) {
  const std::string prefix =
      flags.positional.empty() ? "" : flags.positional[0];
  const client::Client::Options options = AdminOptions(flags);
  client::Url url;
  try {
    url = client::Url::Parse(options.url);
  } catch (const std::exception& e) {
    throw UsageError(e.what());
  }
  asio::io_context io;
  bool stop = false;
  asio::signal_set signals(io, SIGINT, SIGTERM);
  std::function<void()> cancel;
  signals.async_wait([&](beast::error_code e, int) {
    if (e) return;
    stop = true;
    if (cancel) cancel();
  });
  std::unique_ptr<ssl::context> tls;
  if (url.tls) {
    tls = std::make_unique<ssl::context>(ssl::context::tls_client);
    tls->set_verify_mode(ssl::verify_peer);
    if (options.ca_file.empty()) {
      tls->set_default_verify_paths();
    } else {
      tls->load_verify_file(options.ca_file);
    }
  }
  std::optional<std::string> last_id;
  milliseconds backoff(100);
  std::mt19937 random(std::random_device{}());
  for (bool first = true; !stop; first = false) {
    std::string request = "GET /v1/watch?prefix=" + client::EncodeKey(prefix) +
                          " HTTP/1.1\r\nHost: " + url.host +
                          "\r\nAccept: text/event-stream\r\n";
    if (!options.bearer_token.empty()) {
      request += "Authorization: Bearer " + options.bearer_token + "\r\n";
    }
    if (last_id) request += "Last-Event-ID: " + *last_id + "\r\n";
    request += "\r\n";
    int status = 0;
    beast::error_code ec;
    tcp::resolver resolver(io);
    const auto endpoints =
        resolver.resolve(url.host, std::to_string(url.port), ec);
    if (!ec) {
      beast::tcp_stream plain(io);
      plain.expires_after(std::chrono::seconds(10));
      plain.connect(endpoints, ec);
      if (!ec && !tls) {
        cancel = [&plain] { plain.socket().close(); };
        status = Follow(io, plain, request, &last_id, &stop);
      } else if (!ec) {
        beast::ssl_stream<beast::tcp_stream> secure(std::move(plain), *tls);
        SSL_set_tlsext_host_name(secure.native_handle(), url.host.c_str());
        secure.set_verify_callback(ssl::host_name_verification(url.host));
        secure.handshake(ssl::stream_base::client, ec);
        cancel = [&secure] {
          beast::get_lowest_layer(secure).socket().close();
        };
        if (!ec) status = Follow(io, secure, request, &last_id, &stop);
      }
      cancel = nullptr;
    }
    if (stop) break;
    if (first && status != 200) {
      std::cerr << "fencepost: watch: "
                << (status == 0 ? "cannot reach " + url.ToString()
                                : "HTTP " + std::to_string(status))
                << "\n";
      return status == 0 || status >= 500 ? kUnavailable
             : status == 400              ? kUsage
                                          : kRefused;
    }
    if (status == 200) backoff = milliseconds(100);
    const milliseconds wait =
        backoff + milliseconds(random() % (backoff.count() / 2 + 1));
    backoff = std::min(backoff * 2, milliseconds(5000));
    asio::steady_timer pause(io, wait);
    bool paused = false;
    pause.async_wait([&](beast::error_code) { paused = true; });
    cancel = [&pause] { pause.cancel(); };
    while (!paused) io.run_one();
    cancel = nullptr;
  }
  return kSuccess;
}

}  // namespace fencepost::cli
