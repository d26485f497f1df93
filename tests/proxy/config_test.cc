#include "proxy/config.h"

#include <gtest/gtest.h>

#include <chrono>
#include <map>

#include "fence/key.h"
#include "fence/shards.h"

namespace fencepost::proxy {
namespace {

Invocation Parse(std::vector<std::string> args,
                 std::map<std::string, std::string> env = {}) {
  return ParseInvocation(
      args, [&env](const std::string& name) -> std::optional<std::string> {
        auto it = env.find(name);
        if (it == env.end()) return std::nullopt;
        return it->second;
      });
}

// What ConfigError says of `args`; "" when they parse.
std::string ErrorOf(std::vector<std::string> args) {
  try {
    Parse(std::move(args));
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "";
}

TEST(ConfigTest, DefaultsAreSpecs) {
  const Config c = Parse({}).config;
  EXPECT_EQ(c.listen.ToString(), "127.0.0.1:7400");
  EXPECT_EQ(c.admin_listen.ToString(), "127.0.0.1:7401");
  EXPECT_EQ(c.data_dir, "./fencepost-data");
  EXPECT_EQ(c.backend, "lmdb");
  EXPECT_EQ(c.max_body, 4194304u);
  EXPECT_EQ(c.mode, Mode::kEnforce);
  EXPECT_EQ(c.upstream_timeout, 10);
  EXPECT_EQ(c.upstream_settle, 2);
  EXPECT_FALSE(c.forward_token);
  EXPECT_EQ(c.max_map_size, 68719476736ull);
  EXPECT_EQ(c.log_format, LogFormat::kText);
  EXPECT_EQ(c.log_level, "info");
}

TEST(ConfigTest, ConnectionCapsAndForwardingAuthorization) {
  const Config defaults = Parse({}).config;
  EXPECT_EQ(defaults.max_connections, 4096u);
  EXPECT_EQ(defaults.admin_max_connections, 64u);
  EXPECT_FALSE(defaults.forward_authorization);
  const Config c = Parse({"--max-connections", "10", "--forward-authorization"},
                         {{"FENCEPOST_ADMIN_MAX_CONNECTIONS", "3"}})
                       .config;
  EXPECT_EQ(c.max_connections, 10u);
  EXPECT_EQ(c.admin_max_connections, 3u);
  EXPECT_TRUE(c.forward_authorization);
  EXPECT_THROW(Parse({"--max-connections", "0"}), ConfigError);
  EXPECT_THROW(Parse({"--admin-max-connections", "1000001"}), ConfigError);
  EXPECT_THROW(Parse({"--max-connections", "-1"}), ConfigError);
}

TEST(ConfigTest, FlagsInBothFormsAndServeCommand) {
  const Config c =
      Parse({"serve", "--listen=0.0.0.0:0", "--max-body", "10", "--fence-scope",
             "a/", "--fence-scope=b/", "--forward-token", "--mode", "observe",
             "--admin-listen", "[::1]:9"})
          .config;
  EXPECT_EQ(c.listen.ToString(), "0.0.0.0:0");
  EXPECT_EQ(c.admin_listen.ToString(), "[::1]:9");
  EXPECT_EQ(c.max_body, 10u);
  EXPECT_EQ(c.fence_scopes, (std::vector<std::string>{"a/", "b/"}));
  EXPECT_TRUE(c.forward_token);
  EXPECT_EQ(c.mode, Mode::kObserve);
}

TEST(ConfigTest, EnvironmentFillsInAndCommandLineWins) {
  const Config c =
      Parse({"--max-body", "5"}, {{"FENCEPOST_MAX_BODY", "7"},
                                  {"FENCEPOST_DATA_DIR", "/var/lib/fp"},
                                  {"FENCEPOST_FENCE_SCOPE", "x/,y/"},
                                  {"FENCEPOST_FORWARD_TOKEN", "1"},
                                  {"FENCEPOST_LOG_FORMAT", "json"}})
          .config;
  EXPECT_EQ(c.max_body, 5u);
  EXPECT_EQ(c.data_dir, "/var/lib/fp");
  EXPECT_EQ(c.fence_scopes, (std::vector<std::string>{"x/", "y/"}));
  EXPECT_TRUE(c.forward_token);
  EXPECT_EQ(c.log_format, LogFormat::kJson);
}

TEST(ConfigTest, TheS3FlagsAndTheirDefaults) {
  Config aws =
      Parse({"--backend", "s3://state/env", "--s3-region", "eu-west-1"}).config;
  EXPECT_EQ(aws.backend_spec.kind, storage::BackendSpec::Kind::kS3);
  EXPECT_EQ(aws.s3_endpoint, "https://s3.eu-west-1.amazonaws.com");
  EXPECT_EQ(aws.s3_addressing, "virtual");
  Config local = Parse({"--backend", "s3://state", "--s3-endpoint",
                        "http://127.0.0.1:7480/"},
                       {{"FENCEPOST_S3_PROFILE", "ops"}})
                     .config;
  EXPECT_EQ(local.s3_endpoint, "http://127.0.0.1:7480");
  EXPECT_EQ(local.s3_addressing, "path");
  EXPECT_EQ(local.s3_profile, "ops");
  EXPECT_EQ(Parse({"--backend", "s3://state", "--s3-endpoint",
                   "https://store.example:9000", "--s3-addressing", "virtual",
                   "--upstream-tls-ca", "ca.pem"})
                .config.s3_addressing,
            "virtual");
  for (const std::vector<std::string>& bad :
       std::vector<std::vector<std::string>>{
           {"--s3-endpoint", "http://127.0.0.1:1"},  // without s3://
           {"--backend", "s3://b-1", "--s3-endpoint", "ftp://x"},
           {"--backend", "s3://b-1", "--s3-endpoint", "http://x/path"},
           {"--backend", "s3://b-1", "--s3-endpoint", "http://x:99999"},
           {"--backend", "s3://b-1", "--s3-endpoint", "http://u@x"},
           {"--backend", "s3://b-1", "--s3-region", "EU WEST"},
           {"--backend", "s3://b-1", "--s3-addressing", "host"},
           {"--backend", "s3://b-1", "--s3-endpoint", "http://10.0.0.1:80",
            "--s3-addressing", "virtual"},
           {"--backend", "s3://a.b.c", "--s3-addressing", "virtual"},
           {"--backend", "s3://b-1", "--s3-endpoint", "http://x",
            "--upstream-tls-ca", "ca.pem"},
           {"--backend", "http://x", "--upstream-tls-ca", "ca.pem"},
       }) {
    EXPECT_THROW(Parse(bad), ConfigError) << bad[0] << " " << bad[1];
  }
  EXPECT_NO_THROW(
      Parse({"--backend", "https://x/base", "--upstream-tls-ca", "ca.pem"}));
}

// The switch that lets a plain-HTTP door take unsigned payloads belongs
// to the door: off by default, refused without --s3-listen.
TEST(ConfigTest, AllowingUnsignedPayloadsNeedsTheFrontDoor) {
  const std::vector<std::string> door = {"--backend",
                                         "s3://state",
                                         "--s3-listen",
                                         "127.0.0.1:0",
                                         "--s3-client-credentials",
                                         "clients"};
  EXPECT_FALSE(Parse(door).config.s3_allow_unsigned_payload);
  std::vector<std::string> allowed = door;
  allowed.push_back("--s3-allow-unsigned-payload");
  EXPECT_TRUE(Parse(allowed).config.s3_allow_unsigned_payload);
  EXPECT_TRUE(Parse(door, {{"FENCEPOST_S3_ALLOW_UNSIGNED_PAYLOAD", "1"}})
                  .config.s3_allow_unsigned_payload);
  EXPECT_THROW(
      Parse({"--backend", "s3://state", "--s3-allow-unsigned-payload"}),
      ConfigError);
  EXPECT_NE(Usage().find("--s3-allow-unsigned-payload"), std::string::npos);
}

// The door's DNS name for virtual-hosted requests: lower-cased, a host
// name only, and only with the door.
TEST(ConfigTest, TheFrontDoorsDomainIsADnsName) {
  const std::vector<std::string> door = {"--backend",
                                         "s3://state",
                                         "--s3-listen",
                                         "127.0.0.1:0",
                                         "--s3-client-credentials",
                                         "clients"};
  EXPECT_EQ(Parse(door).config.s3_listen_domain, "");
  for (const auto& [given, kept] :
       std::vector<std::pair<std::string, std::string>>{
           {"S3.Example.COM", "s3.example.com"},
           {"localhost", "localhost"},
           {"s3-1.internal", "s3-1.internal"}}) {
    std::vector<std::string> args = door;
    args.insert(args.end(), {"--s3-listen-domain", given});
    EXPECT_EQ(Parse(args).config.s3_listen_domain, kept);
  }
  EXPECT_EQ(Parse(door, {{"FENCEPOST_S3_LISTEN_DOMAIN", "s3.local"}})
                .config.s3_listen_domain,
            "s3.local");
  for (const std::string& bad : std::vector<std::string>{
           "", "a_b.example", "10.0.0.1", "-a.example", "a-.example", "a..b",
           ".a", "a.", "a b", std::string(64, 'a') + ".example"}) {
    std::vector<std::string> args = door;
    args.insert(args.end(), {"--s3-listen-domain", bad});
    EXPECT_THROW(Parse(args), ConfigError) << bad;
  }
  EXPECT_THROW(Parse({"--backend", "s3://state", "--s3-listen-domain",
                      "s3.example.com"}),
               ConfigError);
  EXPECT_NE(Usage().find("--s3-listen-domain NAME"), std::string::npos);
}

TEST(ConfigTest, HelpAndVersion) {
  EXPECT_EQ(Parse({"--help"}).command, Command::kHelp);
  EXPECT_EQ(Parse({"--version"}).command, Command::kVersion);
  EXPECT_NE(Usage().find("--fence-scope"), std::string::npos);
}

TEST(ConfigTest, BadInputThrowsNamingTheFlag) {
  const std::vector<std::vector<std::string>> bad = {
      {"--nope"},
      {"--listen", "127.0.0.1"},
      {"--listen", "127.0.0.1:70000"},
      {"--listen", "example.com:80"},
      {"--max-body", "-1"},
      {"--max-body", "12k"},
      {"--mode", "strict"},
      {"--backend", "s3://x"},
      {"--max-map-size", "1000"},
      {"--log-level", "loud"},
      {"--upstream-timeout", "0"},
      {"--listen"},
      {"--fence-scope", ""},
      {"positional"},
      {"--max-body", "1", "--max-body", "2"},
  };
  for (const auto& args : bad) {
    EXPECT_THROW(Parse(args), ConfigError) << args[0];
  }
  try {
    Parse({}, {{"FENCEPOST_MODE", "loud"}});
    FAIL();
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("FENCEPOST_MODE"), std::string::npos);
  }
}

TEST(ConfigTest, RefusalsNameTheFlagAndTheRule) {
  EXPECT_NE(ErrorOf({"--max-body", "0"}).find("--max-body"), std::string::npos);
  EXPECT_NE(ErrorOf({"--upstream-timeout", "0"}).find("above 0"),
            std::string::npos);
  const std::string same = ErrorOf(
      {"--listen", "127.0.0.1:9000", "--admin-listen", "127.0.0.1:9000"});
  EXPECT_NE(same.find("--listen and --admin-listen"), std::string::npos)
      << same;
  // Port 0 twice is two ephemeral ports, not a clash.
  EXPECT_EQ(
      ErrorOf({"--listen", "127.0.0.1:0", "--admin-listen", "127.0.0.1:0"}),
      "");
}

TEST(ConfigTest, EffectTargetsAreParsed) {
  const Config c =
      Parse({"--effect-target", "pay=https://api.example:8443/v1",
             "--effect-target", "hooks=http://10.0.0.12/hooks",
             "--effect-retention", "2h", "--upstream-tls-ca", "ca.pem"})
          .config;
  ASSERT_EQ(c.effect_targets.size(), 2u);
  EXPECT_EQ(c.effect_targets[0].name, "pay");
  EXPECT_TRUE(c.effect_targets[0].spec.tls);
  EXPECT_EQ(c.effect_targets[0].spec.port, "8443");
  EXPECT_EQ(c.effect_targets[0].spec.base, "/v1");
  EXPECT_EQ(c.effect_targets[1].spec.host, "10.0.0.12");
  EXPECT_EQ(c.effect_retention, std::chrono::hours(2));
  EXPECT_EQ(Parse({}).config.effect_retention, std::chrono::hours(24));
  for (const char* bad : {"pay", "=http://x", "pay/x=http://x", "pay=ftp://x",
                          "pay=s3://bucket", "pay=fs:/tmp"}) {
    EXPECT_NE(ErrorOf({"--effect-target", bad}).find("--effect-target"),
              std::string::npos)
        << bad;
  }
  EXPECT_NE(ErrorOf({"--effect-target", "a=http://x", "--effect-target",
                     "a=http://y"})
                .find("twice"),
            std::string::npos);
  for (const char* bad : {"0s", "500ms", "24", "1d", "-1h"}) {
    EXPECT_NE(ErrorOf({"--effect-retention", bad}).find("--effect-retention"),
              std::string::npos)
        << bad;
  }
  // A CA for a plain target alone has nothing to verify.
  EXPECT_NE(
      ErrorOf({"--effect-target", "a=http://x", "--upstream-tls-ca", "ca.pem"})
          .find("--upstream-tls-ca"),
      std::string::npos);
}

TEST(ConfigTest, ElectionsAreParsedAndTiedToOneFenceEach) {
  const Config c =
      Parse({"--election", "orders/=etcd://10.0.0.1:2379,h:2/orders-election",
             "--fence-scope", "orders/", "--election",
             "jobs=zookeeper://z1:2181,z2:2181/elect/jobs"})
          .config;
  ASSERT_EQ(c.elections.size(), 2u);
  EXPECT_EQ(c.elections[0].scope, "orders/");
  EXPECT_EQ(c.elections[0].source.kind, storage::ElectionSpec::Kind::kEtcd);
  ASSERT_EQ(c.elections[0].source.etcd.endpoints.size(), 2u);
  EXPECT_EQ(c.elections[0].source.etcd.prefix, "orders-election");
  EXPECT_EQ(c.elections[1].source.kind,
            storage::ElectionSpec::Kind::kZooKeeper);
  EXPECT_EQ(c.elections[1].source.hosts, "z1:2181,z2:2181");
  EXPECT_EQ(c.elections[1].source.path, "/elect/jobs");
  EXPECT_EQ(Parse({"--election", "k=zk://z:1/a"}).config.elections.size(), 1u);
  // A doubled slash: an etcd key that starts with '/'.
  EXPECT_EQ(Parse({"--election", "k=etcd://h:1//orders"})
                .config.elections[0]
                .source.etcd.prefix,
            "/orders");
  // The variable's list is spaced: a source has commas of its own.
  const Config from_env =
      Parse({}, {{"FENCEPOST_ELECTION", "a=etcd://h:1,h:2/p b=zk://z:1,z:2/q"}})
          .config;
  ASSERT_EQ(from_env.elections.size(), 2u);
  EXPECT_EQ(from_env.elections[0].source.etcd.endpoints.size(), 2u);
  EXPECT_EQ(from_env.elections[1].source.hosts, "z:1,z:2");

  for (const char* bad :
       {"orders", "=etcd://h:1/p", "k=etcd://h:1", "k=etcd://h:1/",
        "k=etcd://h:1/a//b", "k=etcd://h:1/a/../b", "k=zookeeper://h/p",
        "k=zookeeper://h:1/zookeeper/x", "k=consul://h:1/p", "k=etcd:///p"}) {
    EXPECT_NE(ErrorOf({"--election", bad}).find("--election"),
              std::string::npos)
        << bad;
  }
  // A key under a scope: the scope is elected, not the key.
  EXPECT_NE(ErrorOf({"--fence-scope", "orders/", "--election",
                     "orders/1=etcd://h:1/p"})
                .find("elect that scope"),
            std::string::npos);
  EXPECT_NE(
      ErrorOf({"--election", "k=etcd://h:1/p", "--election", "k=zk://h:1/q"})
          .find("one election per fence"),
      std::string::npos);
  EXPECT_NE(ErrorOf({"--fence-scope", "orders/", "--fence-scope",
                     "orders/archive/", "--election", "orders/=etcd://h:1/p"})
                .find("lies inside the elected scope"),
            std::string::npos);
  EXPECT_EQ(Parse({"--fence-scope", "orders/", "--fence-scope",
                   "orders/archive/", "--election", "orders/=etcd://h:1/p",
                   "--election", "orders/archive/=etcd://h:1/q"})
                .config.elections.size(),
            2u);
  EXPECT_NE(ErrorOf({"--election", "/bad=etcd://h:1/p"}).find("valid key"),
            std::string::npos);
  EXPECT_NE(ErrorOf({"--election", "k=etcd://h:1/p", "--election-ca", "x"})
                .find("etcds://"),
            std::string::npos);
  EXPECT_NE(
      ErrorOf({"--election", "k=etcd://h:1/p", "--election-digest-file", "x"})
          .find("zookeeper://"),
      std::string::npos);
}

TEST(ConfigTest, FenceStoreInEtcdIsParsedAndPairedWithABackend) {
  const Config c =
      Parse({"--fence-store", "etcd://10.0.0.1:2379,[::1]:2380/teams/a/",
             "--backend", "etcd", "--fence-store-timeout", "0.5"})
          .config;
  ASSERT_TRUE(c.etcd.has_value());
  ASSERT_EQ(c.etcd->endpoints.size(), 2u);
  EXPECT_EQ(c.etcd->endpoints[0].host, "10.0.0.1");
  EXPECT_EQ(c.etcd->endpoints[0].port, "2379");
  EXPECT_EQ(c.etcd->endpoints[1].host, "::1");
  EXPECT_EQ(c.etcd->endpoints[1].port, "2380");
  EXPECT_EQ(c.etcd->prefix, "teams/a");
  EXPECT_EQ(c.fence_store_timeout, 0.5);
  EXPECT_EQ(Parse({"--fence-store", "etcd://h:1", "--backend", "etcd"})
                .config.etcd->prefix,
            "fencepost");
  EXPECT_FALSE(Parse({}).config.etcd.has_value());
  EXPECT_EQ(Parse({"--fence-store", "etcd://h:1", "--backend", "fs:/srv/x"})
                .config.backend_spec.kind,
            storage::BackendSpec::Kind::kFs);

  for (const char* bad :
       {"etcd://", "etcd://h", "etcd://h:", "etcd://h:x", "etcd://h:99999",
        "etcd://h:0", "etcd://h:1,", "http://h:1", "zk://h:1"}) {
    EXPECT_NE(ErrorOf({"--fence-store", bad, "--backend", "etcd"})
                  .find("--fence-store"),
              std::string::npos)
        << bad;
  }
  EXPECT_NE(ErrorOf({"--backend", "etcd"}).find("needs --fence-store"),
            std::string::npos);
  EXPECT_NE(ErrorOf({"--fence-store", "etcd://h:1"}).find("--backend etcd"),
            std::string::npos)
      << "the lmdb backend would keep values apart from their fences";
  EXPECT_NE(ErrorOf({"--fence-store-timeout", "0"}).find("above 0"),
            std::string::npos);
}

// The config check is the same parse main and the http:// backend use: a
// spec the backend would refuse is refused here, with exit status 2.
TEST(ConfigTest, BackendIsParsedOnceIntoItsSpec) {
  using Kind = storage::BackendSpec::Kind;
  EXPECT_EQ(Parse({}).config.backend_spec.kind, Kind::kLmdb);
  const Config fs = Parse({"--backend", "fs:/srv/v"}).config;
  EXPECT_EQ(fs.backend_spec.kind, Kind::kFs);
  EXPECT_EQ(fs.backend_spec.dir, "/srv/v");
  const Config up = Parse({"--backend", "http://[::1]:81/base"}).config;
  EXPECT_EQ(up.backend, "http://[::1]:81/base");
  EXPECT_EQ(up.backend_spec.kind, Kind::kHttp);
  EXPECT_EQ(up.backend_spec.host, "::1");
  EXPECT_EQ(up.backend_spec.port, "81");
  EXPECT_EQ(up.backend_spec.base, "/base");
  for (const char* bad : {"http://x:port", "http://[::1", "http://h/a%2fb"}) {
    try {
      Parse({"--backend", bad});
      ADD_FAILURE() << bad;
    } catch (const ConfigError& e) {
      EXPECT_EQ(std::string(e.what()).rfind("--backend: '", 0), 0u) << e.what();
    }
  }
}

TEST(ConfigTest, ListenAddressesKeepIpv6InBrackets) {
  const Config c =
      Parse({"--listen", "[::1]:9000", "--admin-listen", ":9001"}).config;
  EXPECT_EQ(c.listen.host, "::1");
  EXPECT_EQ(c.listen.ToString(), "[::1]:9000");
  EXPECT_EQ(c.admin_listen.ToString(), "0.0.0.0:9001");
  EXPECT_THROW(Parse({"--listen", "[::1]"}), ConfigError);
  EXPECT_THROW(Parse({"--listen", "[::1:9000"}), ConfigError);
}

TEST(ConfigTest, LimitsInMessagesAndHelpComeFromTheirConstants) {
  const std::string max = std::to_string(fence::Shards::kMaxCount);
  try {
    Parse({"--lmdb-shards", std::to_string(fence::Shards::kMaxCount + 1)});
    FAIL();
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("1 to " + max), std::string::npos);
  }
  EXPECT_EQ(Parse({"--lmdb-shards", max}).config.lmdb_shards,
            fence::Shards::kMaxCount);
  EXPECT_NE(Usage().find("1-" + max + " (default 1)"), std::string::npos);
  try {
    Parse({"--fence-scope", std::string(fence::kMaxNameBytes + 1, 'a')});
    FAIL();
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find(std::to_string(fence::kMaxNameBytes) +
                                         " bytes"),
              std::string::npos);
  }
}

}  // namespace
}  // namespace fencepost::proxy
