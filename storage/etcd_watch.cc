#include "storage/etcd_watch.h"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/asio/ssl/host_name_verification.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/http/parser.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/string_body.hpp>
#include <boost/beast/ssl/ssl_stream.hpp>
#include <chrono>

#include "fence/rules.h"
#include "storage/etcd_client.h"
#include "storage/etcd_json.h"
#include "storage/etcd_paging.h"
#include "storage/etcd_records.h"

namespace fencepost::storage {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace bhttp = beast::http;
namespace ssl = asio::ssl;
using asio::ip::tcp;

namespace {

constexpr std::size_t kMaxMessageBytes = 16u << 20;
// The JSON of one message: up to etcd's 1.5 MiB requests' worth of events.
constexpr http::JsonLimits kMessageLimits{8, 100000, 64, 1000000};

}  // namespace

struct EtcdWatch::State {
  bool stopped = false;
  std::int64_t next_revision = 0;  // 0: from now
  std::function<void()> cancel;    // closes the stream in flight
};

// From PREFIX/fences/ to the end of PREFIX/leases/: fences, holds and
// leases, not the values (which may be large, and are not events).
EtcdWatch::EtcdWatch(asio::io_context& io, EtcdSpec spec,
                     std::shared_ptr<ssl::context> tls, Handlers handlers)
    : io_(io),
      spec_(std::move(spec)),
      tls_(std::move(tls)),
      range_{spec_.prefix + "/fences/",
             etcd::PrefixEnd(spec_.prefix + "/leases/")},
      prev_kv_(true),
      handlers_(std::move(handlers)),
      state_(std::make_shared<State>()) {}

EtcdWatch::EtcdWatch(asio::io_context& io, EtcdSpec spec,
                     std::shared_ptr<ssl::context> tls, Range range,
                     Handlers handlers)
    : io_(io),
      spec_(std::move(spec)),
      tls_(std::move(tls)),
      range_(std::move(range)),
      prev_kv_(false),
      handlers_(std::move(handlers)),
      state_(std::make_shared<State>()) {}

EtcdWatch::~EtcdWatch() { Stop(); }

void EtcdWatch::Start() { asio::co_spawn(io_, Run(state_), asio::detached); }

void EtcdWatch::Stop() {
  state_->stopped = true;
  if (state_->cancel) state_->cancel();
}

Awaitable<void> EtcdWatch::Run(std::shared_ptr<State> state) {
  std::chrono::milliseconds backoff(100);
  for (std::size_t at = 0; !state->stopped; ++at) {
    const EtcdSpec::Endpoint& endpoint =
        spec_.endpoints[at % spec_.endpoints.size()];
    beast::error_code ec;
    auto token = asio::redirect_error(kUseAwaitable, ec);
    tcp::resolver resolver(io_);
    state->cancel = [&resolver] { resolver.cancel(); };
    const auto found =
        co_await resolver.async_resolve(endpoint.host, endpoint.port, token);
    state->cancel = nullptr;
    bool followed = false;
    if (!ec && !state->stopped) {
      beast::tcp_stream plain(io_);
      plain.expires_after(std::chrono::seconds(10));
      state->cancel = [&plain] { plain.socket().close(); };
      co_await plain.async_connect(found, token);
      if (!ec && !tls_) {
        state->cancel = [&plain] { plain.socket().close(); };
        followed = co_await Follow(plain, endpoint.host, state);
      } else if (!ec) {
        beast::ssl_stream<beast::tcp_stream> secure(std::move(plain), *tls_);
        SSL_set_tlsext_host_name(secure.native_handle(), endpoint.host.c_str());
        secure.set_verify_callback(ssl::host_name_verification(endpoint.host));
        state->cancel = [&secure] {
          beast::get_lowest_layer(secure).socket().close();
        };
        co_await secure.async_handshake(ssl::stream_base::client, token);
        if (!ec) followed = co_await Follow(secure, endpoint.host, state);
      }
      state->cancel = nullptr;
    }
    if (state->stopped) co_return;
    if (followed) backoff = std::chrono::milliseconds(100);
    asio::steady_timer pause(io_, backoff);
    state->cancel = [&pause] { pause.cancel(); };
    co_await pause.async_wait(token);
    state->cancel = nullptr;
    backoff = std::min(backoff * 2, std::chrono::milliseconds(2000));
  }
}

// One stream: the watch's create request, then its messages until it
// breaks. True when it was created and ended cleanly (the next one starts at
// once).
template <class Stream>
Awaitable<bool> EtcdWatch::Follow(Stream& stream, const std::string& host,
                                  std::shared_ptr<State> state) {
  std::string body =
      "{\"create_request\":{\"key\":\"" + EncodeBase64(range_.key) + "\"";
  if (!range_.end.empty()) {
    body += ",\"range_end\":\"" + EncodeBase64(range_.end) + "\"";
  }
  if (prev_kv_) body += ",\"prev_kv\":true";
  body += ",\"progress_notify\":true";
  if (state->next_revision > 0) {
    body +=
        ",\"start_revision\":\"" + std::to_string(state->next_revision) + "\"";
  }
  body += "}}";
  const std::string request = "POST /v3/watch HTTP/1.1\r\nHost: " + host +
                              "\r\nContent-Type: application/json\r\n"
                              "Content-Length: " +
                              std::to_string(body.size()) + "\r\n\r\n" + body;
  beast::error_code ec;
  auto token = asio::redirect_error(kUseAwaitable, ec);
  auto& lowest = beast::get_lowest_layer(stream);
  lowest.expires_after(std::chrono::seconds(10));
  co_await asio::async_write(stream, asio::buffer(request), token);
  if (ec || state->stopped) co_return false;
  beast::flat_buffer buffer(1u << 20);
  bhttp::response_parser<bhttp::string_body> parser;
  parser.body_limit(boost::none);
  std::string pending;  // the stream's bytes not yet a whole message
  bool created = false, broken = false;
  auto on_chunk = [&](std::uint64_t, beast::string_view bytes,
                      beast::error_code&) -> std::size_t {
    pending.append(bytes.data(), bytes.size());
    std::size_t end;
    while (!broken && !state->stopped &&
           (end = pending.find('\n')) != std::string::npos) {
      http::JsonValue message;
      std::int64_t revision = 0;
      if (!http::ParseJson(std::string_view(pending).substr(0, end), &message,
                           kMessageLimits)
               .empty() ||
          !Handle(message, &revision)) {
        broken = true;
      }
      created = true;
      if (revision < 0) {
        state->next_revision = 0;  // compacted: from now on
      } else if (revision > 0 && revision >= state->next_revision) {
        state->next_revision = revision + 1;
      }
      pending.erase(0, end + 1);
    }
    if (pending.size() > kMaxMessageBytes) broken = true;
    return bytes.size();
  };
  parser.on_chunk_body(on_chunk);
  co_await bhttp::async_read_header(stream, buffer, parser, token);
  if (ec || state->stopped || parser.get().result_int() != 200) co_return false;
  // etcd sends a progress notification at least every 10 minutes: a
  // stream silent for longer is dead (a member cut off, say).
  while (!ec && !broken && !state->stopped && !parser.is_done()) {
    lowest.expires_after(std::chrono::minutes(11));
    co_await bhttp::async_read_some(stream, buffer, parser, token);
  }
  // A message that broke the stream comes again at the next one: only a
  // stream that ended cleanly starts the next at once.
  co_return created && !broken;
}

bool EtcdWatch::Handle(const http::JsonValue& message, std::int64_t* revision) {
  const http::JsonValue* result = message.Find("result");
  *revision = 0;
  if (result == nullptr) return false;
  if (etcd::Int64Of(result->Find("compact_revision")) > 0) {
    // What came after the revision asked for is gone: from now on.
    *revision = -1;
    if (handlers_.reset) handlers_.reset();
    return false;
  }
  const http::JsonValue* canceled = result->Find("canceled");
  if (canceled != nullptr && canceled->text == "true") return false;
  const http::JsonValue* created = result->Find("created");
  if (created != nullptr && created->text == "true") {
    // Only a watch from now learns its start here; one from a revision is
    // answered with the current one before the events it asked for.
    if (state_->next_revision == 0) *revision = etcd::RevisionOf(*result);
    if (handlers_.opened) handlers_.opened();
    return true;
  }
  const http::JsonValue* events = result->Find("events");
  if (events == nullptr) return true;  // a progress notification
  for (const http::JsonValue& event : events->items) {
    if (handlers_.event) {
      handlers_.event(event);
    } else {
      Change(event);
    }
    const http::JsonValue* kv = event.Find("kv");
    if (kv != nullptr) {
      *revision = std::max(*revision, etcd::Int64Of(kv->Find("mod_revision")));
    }
  }
  return true;
}

void EtcdWatch::Change(const http::JsonValue& event) {
  const http::JsonValue* type = event.Find("type");
  if (type != nullptr && type->text == "DELETE") return;
  const http::JsonValue* kv = event.Find("kv");
  const http::JsonValue* prev = event.Find("prev_kv");
  std::string key, value, before;
  if (kv == nullptr || !etcd::BytesOf(*kv, "key", &key) ||
      !etcd::BytesOf(*kv, "value", &value)) {
    return;
  }
  const bool had = prev != nullptr && etcd::BytesOf(*prev, "value", &before);
  const std::string fences = spec_.prefix + "/fences/";
  const std::string leases = spec_.prefix + "/leases/";
  if (key.rfind(fences, 0) == 0 && (handlers_.fence || handlers_.fence_put)) {
    fence::FenceRecord now{key.substr(fences.size()), 0, 0};
    fence::Token old_token = 0;
    std::int64_t old_at = 0;
    if (!etcd::ParseFence(value, &now.token, &now.updated_at_ns)) return;
    if (handlers_.fence_put) {
      handlers_.fence_put(now, etcd::Int64Of(kv->Find("mod_revision")));
    }
    if (!handlers_.fence) return;
    const bool old_ok = had && etcd::ParseFence(before, &old_token, &old_at);
    // The same token: not a raise, nothing to tell.
    if (!fence::RaisedBetween(old_ok ? std::optional(old_token) : std::nullopt,
                              now.token)) {
      return;
    }
    handlers_.fence(now);
  } else if (key.rfind(leases, 0) == 0 && handlers_.lease) {
    fence::StoredLease now, old;
    if (!etcd::ParseLease(value, &now.record, &now.noticed)) return;
    const bool old_ok =
        had && etcd::ParseLease(before, &old.record, &old.noticed);
    const std::string name = key.substr(leases.size());
    for (const std::string_view change :
         fence::LeaseChanges(old_ok ? &old : nullptr, now)) {
      // An expiry is the previous holder's: its record, as it was.
      handlers_.lease(name,
                      change == "expired" && old_ok ? old.record : now.record,
                      change);
    }
  }
}

}  // namespace fencepost::storage
