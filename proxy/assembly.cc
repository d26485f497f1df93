#include "proxy/assembly.h"

#include <spdlog/spdlog.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/ip/address.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/ssl/context.hpp>
#include <filesystem>
#include <iostream>

#include "proxy/auth.h"
#include "proxy/elections.h"
#include "proxy/scope_start.h"
#include "s3/location.h"
#include "sigv4/credentials.h"
#include "storage/etcd_backend.h"
#include "storage/etcd_client.h"
#include "storage/fs_backend.h"
#include "storage/http_backend.h"
#include "storage/s3_backend.h"

namespace fencepost::proxy {

namespace asio = boost::asio;

namespace {

std::chrono::milliseconds Millis(double seconds) {
  return std::chrono::milliseconds(static_cast<long long>(seconds * 1000));
}

asio::ip::tcp::endpoint Endpoint(const ListenAddress& address) {
  return {asio::ip::make_address(address.host), address.port};
}

// TLS 1.2 or later with the configured chain and key; with a client CA,
// clients must present a certificate that chains to it.
std::shared_ptr<asio::ssl::context> TlsContext(const Config& config) {
  namespace ssl = asio::ssl;
  auto ctx = std::make_shared<ssl::context>(ssl::context::tls_server);
  ctx->set_options(ssl::context::default_workarounds | ssl::context::no_sslv2 |
                   ssl::context::no_sslv3 | ssl::context::no_tlsv1 |
                   ssl::context::no_tlsv1_1 | ssl::context::single_dh_use);
  ctx->use_certificate_chain_file(config.tls_cert);
  ctx->use_private_key_file(config.tls_key, ssl::context::pem);
  if (!config.tls_client_ca.empty()) {
    ctx->load_verify_file(config.tls_client_ca);
    ctx->set_verify_mode(ssl::verify_peer | ssl::verify_fail_if_no_peer_cert);
  }
  return ctx;
}

// Descriptors kept for everything but client connections: LMDB's files,
// the fs: backend's open files, logs, the upstream pool's idle connections.
constexpr std::size_t kReservedDescriptors = 256;

// Raises the soft descriptor limit to the hard one and lowers the data
// port's connection cap when the limit cannot hold both caps plus the
// reserve (an http:// backend needs an upstream connection per client one),
// so the admin port and LMDB never run out. Returns the data port's cap.
std::size_t FitConnectionCap(const Config& config, bool forwarding) {
  rlimit limit{};
  if (getrlimit(RLIMIT_NOFILE, &limit) != 0) return config.max_connections;
  if (limit.rlim_cur < limit.rlim_max) {
    limit.rlim_cur = limit.rlim_max;
    if (setrlimit(RLIMIT_NOFILE, &limit) != 0) getrlimit(RLIMIT_NOFILE, &limit);
  }
  const std::size_t per_connection = forwarding ? 2 : 1;
  const std::size_t fixed = config.admin_max_connections + kReservedDescriptors;
  const std::size_t available = limit.rlim_cur > fixed + per_connection
                                    ? (limit.rlim_cur - fixed) / per_connection
                                    : 1;
  if (config.max_connections <= available) return config.max_connections;
  spdlog::warn(
      "the descriptor limit ({}) cannot hold --max-connections {}; the data "
      "port takes at most {} connections (raise ulimit -n to avoid this)",
      static_cast<std::uint64_t>(limit.rlim_cur), config.max_connections,
      available);
  return available;
}

// The `backend` label of the metrics, before the backend exists.
std::string_view BackendName(storage::BackendSpec::Kind kind) {
  using Kind = storage::BackendSpec::Kind;
  switch (kind) {
    case Kind::kFs:
      return "fs";
    case Kind::kHttp:
      return "http";
    case Kind::kS3:
      return "s3";
    case Kind::kEtcd:
      return "etcd";
    case Kind::kLmdb:
      break;
  }
  return "lmdb";
}

// Runs `task` on `io` until it completes, before the ports open. Returns
// its result; what it threw goes to `*thrown`.
std::string RunToEnd(asio::io_context& io, Awaitable<std::string> task,
                     std::string* thrown) {
  std::optional<std::string> result;
  asio::co_spawn(io, std::move(task),
                 [&](std::exception_ptr e, std::string value) {
                   result = std::move(value);
                   if (!e) return;
                   try {
                     std::rethrow_exception(e);
                   } catch (const std::exception& error) {
                     *thrown = error.what();
                   }
                 });
  while (!result && io.run_one() > 0) {
  }
  io.restart();
  if (!result) *thrown = "the start-up checks did not finish";
  return result.value_or("");
}

}  // namespace

std::chrono::milliseconds Assembly::StartHold() {
  const std::chrono::milliseconds hold = lock_.InheritedHold();
  if (hold.count() > 0) {
    spdlog::warn("{}: every fence waits {} ms before its next write",
                 lock_.why(), hold.count());
  }
  return hold;
}

Assembly::~Assembly() = default;

std::unique_ptr<Assembly> Assembly::Build(const Config& config,
                                          const TestSwitches& test,
                                          Failure* failure) {
  std::unique_ptr<Assembly> self(new Assembly);
  // With fences in etcd the data directory is not used at all.
  const bool shared = config.etcd.has_value();
  if (!shared) {
    // How long a write sent elsewhere may land after this process.
    using Kind = storage::BackendSpec::Kind;
    const Kind kind = config.backend_spec.kind;
    const std::chrono::milliseconds bound =
        kind == Kind::kHttp || kind == Kind::kS3 ||
                !config.effect_targets.empty()
            ? Millis(config.upstream_timeout + config.upstream_settle)
            : std::chrono::milliseconds(0);
    self->lock_ = DataDirLock(config.data_dir, bound);
    if (!self->lock_.error().empty()) {
      *failure = {self->lock_.error()};
      return nullptr;
    }
  }
  self->metrics_ =
      std::make_unique<metrics::Metrics>(BackendName(config.backend_spec.kind),
                                         FENCEPOST_VERSION, FENCEPOST_REVISION);
  const bool opened = shared ? self->OpenEtcd(config, failure)
                             : self->OpenEngine(config, test, failure);
  if (!opened || !self->MakeBackend(config, test, failure) ||
      !self->MakeService(config, failure) ||
      !self->WatchEtcd(config, failure) ||
      !self->FollowElections(config, failure) ||
      !self->MakeEffects(config, failure) ||
      !self->MakeServer(config, failure)) {
    return nullptr;
  }
  return self;
}

void Assembly::Stop() {
  std::chrono::milliseconds hold(0);
  if (backend_) hold = backend_->HoldLeft();
  if (effects_) hold = std::max(hold, effects_->HoldLeft());
  if (backend_ || effects_) lock_.SetHoldLeft(hold);
  if (engine_) engine_->Stop();
}

bool Assembly::OpenEtcd(const Config& config, Failure* failure) {
  metrics::Metrics& metrics = *metrics_;
  storage::EtcdFences::Options options;
  options.spec = *config.etcd;
  options.timeout = Millis(config.fence_store_timeout);
  options.max_leases = config.max_leases;
  options.on_request = [&metrics](std::string_view path, double seconds,
                                  bool ok) {
    metrics.EtcdRequest(path, seconds, ok);
  };
  options.on_retry = [&metrics](std::string_view cause) {
    metrics.EtcdTxnRetry(cause);
  };
  // A turn (fs:, http://) lasts at most one forward and its hold, with a
  // margin; the lease outlives it, and is renewed well within.
  const auto need = Millis(config.upstream_timeout + config.upstream_settle) +
                    std::chrono::seconds(2);
  options.turn_need = need;
  options.turn_ttl = std::max<std::chrono::seconds>(
      std::chrono::ceil<std::chrono::seconds>(need) + std::chrono::seconds(3),
      std::chrono::ceil<std::chrono::seconds>(need * 8 / 5));
  options.replica =
      config.listen.ToString() + " pid " + std::to_string(::getpid());
  try {
    etcd_ = std::make_unique<storage::EtcdFences>(io_, std::move(options));
    fences_ = etcd_.get();
    fences_->TellChanges(Changes());
  } catch (const std::exception& e) {
    *failure = {std::string("--fence-store: ") + e.what()};
    return false;
  }
  return true;
}

storage::ChangeSink Assembly::Changes() {
  return [this](storage::Change change) {
    if (service_) {
      service_->context().Changed(change);
    } else if (change.kind == storage::Change::Kind::kLeaseExpired) {
      ReportLeaseLost(*metrics_, change.lease_name, change.lease.record);
    }
  };
}

bool Assembly::OpenEngine(const Config& config, const TestSwitches& test,
                          Failure* failure) {
  storage::LocalEngine::Options options;
  options.dir = config.data_dir;
  options.max_map_size = config.max_map_size;
  options.shards = config.lmdb_shards;
  options.max_leases = config.max_leases;
  options.io = &io_;
  options.changes = Changes();
  options.on_fatal = [](const std::string& message) {
    spdlog::critical("stopping: {}", message);
    spdlog::shutdown();
  };
  options.max_queue_writes = test.max_queue_writes;
  if (test.segment_bytes) {
    options.segment_bytes = *test.segment_bytes * config.lmdb_shards;
  }
  if (test.max_unapplied_bytes) {
    options.max_unapplied_bytes = *test.max_unapplied_bytes;
  }
  if (test.checkpoint_without_sync) {
    options.checkpoint_without_sync = true;
    spdlog::critical(
        "FENCEPOST_TEST_CHECKPOINT_WITHOUT_SYNC=1: LMDB's checkpoints are "
        "not synced, yet the log is reused; for tests only");
  }
  if (test.answer_before_sync) {
    options.answer_before_sync = true;
    spdlog::critical(
        "FENCEPOST_TEST_ANSWER_BEFORE_SYNC=1: writes are answered before "
        "they are durable; for tests only");
  }
  try {
    engine_ = std::make_unique<storage::LocalEngine>(options);
  } catch (const std::exception& e) {
    *failure = {e.what()};
    return false;
  }
  if (const std::string why = engine_->sync_fallback(); !why.empty()) {
    spdlog::warn(
        "io_uring is not available ({}): the log's syncs run on the event "
        "loop, which waits for each one",
        why);
  }
  for (const std::string& notice : engine_->Notices(config.lmdb_shards)) {
    spdlog::info("{}", notice);
  }
  fences_ = &engine_->fences();
  return true;
}

bool Assembly::MakeBackend(const Config& config, const TestSwitches& test,
                           Failure* failure) {
  const bool shared = config.etcd.has_value();
  try {
    using Kind = storage::BackendSpec::Kind;
    if (config.backend_spec.kind == Kind::kEtcd) {
      backend_ = std::make_unique<storage::EtcdBackend>(*etcd_);
    } else if (config.backend_spec.kind == Kind::kFs) {
      std::size_t fs_threads = 2;
      if (test.one_fs_thread) fs_threads = 1;
      backend_ = std::make_unique<storage::FsBackend>(
          config.backend_spec.dir, *fences_, fs_threads, !shared);
    } else if (config.backend_spec.kind == Kind::kHttp) {
      storage::HttpBackend::Options options;
      options.upstream = config.backend_spec;
      options.timeout = Millis(config.upstream_timeout);
      options.settle = Millis(config.upstream_settle);
      options.tls_ca = config.upstream_tls_ca;
      options.forward_token = config.forward_token;
      // Writes the last process had forwarded may still be applied
      // upstream: every fence waits out what it left first.
      options.hold_at_start = StartHold();
      options.strip_authorization =
          !config.auth_token_file.empty() && !config.forward_authorization;
      if (test.disable_upstream_gate) {
        options.disable_gate = true;
        spdlog::critical(
            "FENCEPOST_TEST_DISABLE_UPSTREAM_GATE=1: fences are NOT held after "
            "unknown upstream outcomes; for tests only");
      }
      backend_ = std::make_unique<storage::HttpBackend>(io_, options, *fences_);
    } else if (config.backend_spec.kind == Kind::kS3) {
      return MakeS3Backend(config, test, failure);
    } else {
      backend_ = engine_->MakeBackend();
    }
  } catch (const std::exception& e) {
    *failure = {e.what()};
    return false;
  }
  return true;
}

bool Assembly::MakeS3Backend(const Config& config, const TestSwitches& test,
                             Failure* failure) {
  sigv4::LoadedCredentials loaded =
      sigv4::LoadCredentials({config.s3_credentials_file, config.s3_profile});
  if (!loaded.credentials) {
    *failure = {"--backend s3://: " + loaded.message};
    return false;
  }
  storage::S3Backend::Options options;
  options.spec = config.backend_spec;
  const std::string& endpoint = config.s3_endpoint;  // checked by the config
  try {
    options.location.endpoint = s3::ParseEndpoint(endpoint);
  } catch (const std::invalid_argument& e) {
    *failure = {std::string("--s3-endpoint: ") + e.what()};
    return false;
  }
  options.location.bucket = config.backend_spec.bucket;
  options.location.region = config.s3_region;
  options.location.addressing = config.s3_addressing == "virtual"
                                    ? s3::Addressing::kVirtual
                                    : s3::Addressing::kPath;
  options.credentials = std::move(*loaded.credentials);
  options.tls_ca = config.upstream_tls_ca;
  options.timeout = Millis(config.upstream_timeout);
  options.settle = Millis(config.upstream_settle);
  options.hold_at_start = StartHold();
  if (test.disable_upstream_gate) {
    options.disable_gate = true;
    spdlog::critical(
        "FENCEPOST_TEST_DISABLE_UPSTREAM_GATE=1: fences are NOT held after "
        "unknown upstream outcomes; for tests only");
  }
  try {
    backend_ =
        std::make_unique<storage::S3Backend>(io_, std::move(options), *fences_);
  } catch (const std::exception& e) {
    *failure = {e.what()};
    return false;
  }
  spdlog::info("s3:// backend: bucket {} at {} ({}-style), credentials from {}",
               config.backend_spec.bucket, endpoint, config.s3_addressing,
               loaded.source);
  return true;
}

bool Assembly::MakeService(const Config& config, Failure* failure) {
  const bool shared = config.etcd.has_value();
  BearerAuth auth;
  if (!config.auth_token_file.empty()) {
    try {
      auth = BearerAuth::FromFile(config.auth_token_file);
    } catch (const std::exception& e) {
      *failure = {e.what()};
      return false;
    }
  }
  service_ = std::make_unique<Service>(config, *fences_, *backend_, *metrics_,
                                       std::move(auth));
  if (std::string error = service_->CheckLeases(); !error.empty()) {
    *failure = {error};
    return false;
  }
  std::string store_error;
  const std::string refusal =
      RunToEnd(io_, StartScopes(*fences_, fence::Scopes(config.fence_scopes)),
               &store_error);
  if (!store_error.empty()) {
    // etcd may answer at the next start; a data directory will not.
    *failure = {store_error};
    if (shared) *failure = {"cannot check the fence scopes: " + store_error, 1};
    return false;
  }
  if (!refusal.empty()) {
    *failure = {refusal};
    return false;
  }
  return true;
}

bool Assembly::WatchEtcd(const Config& config, Failure* failure) {
  if (!config.etcd) return true;
  std::shared_ptr<boost::asio::ssl::context> tls;
  try {
    if (config.etcd->tls) tls = storage::EtcdClient::TlsContext(*config.etcd);
  } catch (const std::exception& e) {
    *failure = {std::string("--fence-store: ") + e.what()};
    return false;
  }
  RouteContext& context = service_->context();
  storage::Fences& fences = *fences_;
  // Every replica's changes, into the one channel.
  storage::EtcdWatch::Handlers handlers;
  handlers.fence = [changes = Changes()](const fence::FenceRecord& fence) {
    storage::Change change;
    change.fence = fence;
    change.from_feed = true;
    changes(std::move(change));
  };
  handlers.lease = [changes = Changes(), &fences](
                       const std::string& name, const fence::LeaseRecord& lease,
                       std::string_view what) {
    changes(storage::FedLeaseChange(name, lease, what, fences.SteadyNow()));
  };
  if (etcd_) {
    handlers.fence_put = [etcd = etcd_.get()](const fence::FenceRecord& fence,
                                              std::int64_t mod_revision) {
      etcd->Saw(fence, mod_revision);
    };
  }
  handlers.reset = [&context] { context.watches().Reset(); };
  etcd_watch_ = std::make_unique<storage::EtcdWatch>(
      io_, *config.etcd, std::move(tls), std::move(handlers));
  context.watches().set_fed_by_store(true);
  etcd_watch_->Start();
  return true;
}

bool Assembly::FollowElections(const Config& config, Failure* failure) {
  if (config.elections.empty()) return true;
  RouteContext& context = service_->context();
  try {
    elections_ = std::make_unique<Elections>(io_, context, config.elections,
                                             Millis(config.upstream_timeout));
  } catch (const std::exception& e) {
    *failure = {std::string("--election: ") + e.what()};
    return false;
  }
  std::string store_error;
  const std::string refusal =
      RunToEnd(io_, elections_->RefuseLeases(), &store_error);
  if (!store_error.empty()) {
    *failure = {"cannot check the leases of the elected fences: " + store_error,
                1};
    return false;
  }
  if (!refusal.empty()) {
    *failure = {refusal};
    return false;
  }
  for (const ElectionConfig& election : config.elections) {
    for (const std::string& scope : config.fence_scopes) {
      if (!context.scopes().IsScope(election.scope) &&
          scope.starts_with(election.scope)) {
        spdlog::warn(
            "--election {}: the key '{}' is elected, not the --fence-scope "
            "'{}' that begins with it (a typo?)",
            election.scope, election.scope, scope);
      }
    }
  }
  context.SetElections(elections_.get());
  elections_->Start();
  return true;
}

bool Assembly::MakeEffects(const Config& config, Failure* failure) {
  if (config.effect_targets.empty()) return true;
  if (engine_ && engine_->shard_count() > 1) {
    // A record and its fence are committed together, and a retry may name
    // another fence than the first call: one environment holds them all.
    *failure = {
        "--effect-target needs a data directory of one LMDB "
        "environment (this one has " +
        std::to_string(engine_->shard_count()) + ")"};
    return false;
  }
  if (etcd_) {
    effect_records_ = std::make_unique<storage::EtcdBackend>(*etcd_);
  } else {
    effect_records_ = engine_->MakeBackend();
  }
  RouteContext& context = service_->context();
  try {
    // Calls the last process sent may still reach their targets.
    effects_ = std::make_unique<Effects>(
        io_, context, *effect_records_,
        etcd_ ? std::chrono::milliseconds(0) : StartHold());
  } catch (const std::exception& e) {
    *failure = {std::string("--effect-target: ") + e.what()};
    return false;
  }
  context.SetEffects(effects_.get());
  effects_->Start();
  return true;
}

bool Assembly::MakeServer(const Config& config, Failure* failure) {
  Server::Options server_options{
      .max_body = config.max_body,
      .read_timeout = Millis(config.read_timeout),
      .idle_timeout = Millis(config.idle_timeout),
      .write_timeout = Millis(config.write_timeout),
      .tls = nullptr,
      .max_connections = FitConnectionCap(
          config,
          config.backend_spec.kind == storage::BackendSpec::Kind::kHttp ||
              config.backend_spec.kind == storage::BackendSpec::Kind::kS3),
      .admin_max_connections = config.admin_max_connections,
      .access_log = config.access_log};
  if (!config.tls_cert.empty()) {
    try {
      server_options.tls = TlsContext(config);
    } catch (const std::exception& e) {
      *failure = {std::string("TLS: ") + e.what()};
      return false;
    }
  }
  server_ = std::make_unique<Server>(io_, *service_, *metrics_, server_options);
  try {
    data_ = server_->Listen(metrics::Port::kData, Endpoint(config.listen));
  } catch (const std::exception& e) {
    *failure = {"cannot listen on " + config.listen.ToString() + ": " +
                e.what()};
    return false;
  }
  try {
    admin_ =
        server_->Listen(metrics::Port::kAdmin, Endpoint(config.admin_listen));
  } catch (const std::exception& e) {
    *failure = {"cannot listen on " + config.admin_listen.ToString() + ": " +
                e.what()};
    return false;
  }
  return !config.s3_listen || ListenS3(config, failure);
}

bool Assembly::ListenS3(const Config& config, Failure* failure) {
  S3Door::Options options;
  options.bucket = config.backend_spec.bucket;
  options.domain = config.s3_listen_domain;
  options.auth.region = config.s3_region;
  options.auth.max_body = config.max_body;
  options.auth.unsigned_payloads =
      !config.tls_cert.empty() || config.s3_allow_unsigned_payload;
  try {
    options.auth.clients = S3Auth::LoadClients(config.s3_client_credentials);
  } catch (const std::exception& e) {
    *failure = {std::string("--s3-client-credentials: ") + e.what()};
    return false;
  }
  auto* backend = dynamic_cast<storage::S3Backend*>(backend_.get());
  s3_door_ =
      std::make_unique<S3Door>(std::move(options), *backend, service_->core());
  service_->SetS3Door(s3_door_.get());
  try {
    s3_ = server_->Listen(metrics::Port::kS3, Endpoint(*config.s3_listen));
  } catch (const std::exception& e) {
    *failure = {"cannot listen on " + config.s3_listen->ToString() + ": " +
                e.what()};
    return false;
  }
  return true;
}

}  // namespace fencepost::proxy
