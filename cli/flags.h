#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <set>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

// The client commands' flags (SPEC "Client commands"), their exit statuses
// and the usage error that ends a command with kUsage.
namespace fencepost::cli {

inline constexpr int kSuccess = 0;
inline constexpr int kRefused = 1;
inline constexpr int kUsage = 2;
inline constexpr int kUnavailable = 3;
inline constexpr int kLeaseLost = 75;
inline constexpr int kCannotExecute = 126;
inline constexpr int kNotFound = 127;

class UsageError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct Flags {
  std::string admin;
  std::string data;
  bool data_given = false;  // --data on the command line, not a default
  std::string auth_token_file;
  std::string tls_ca;
  std::string holder;
  std::optional<std::chrono::milliseconds> ttl;
  std::optional<std::chrono::milliseconds> wait;
  std::optional<std::chrono::milliseconds> grace;
  std::string via;
  std::vector<std::string> fences;  // lease run --fence, repeatable
  std::optional<std::uint64_t> token;
  // effect: --fence-key, --idempotency-key, --method, --content-type.
  std::string fence_key;
  std::string idempotency_key;
  std::string method;
  std::string content_type;
  // probe s3://: as serve's --s3-* flags (SPEC "S3 backend"); "" when not
  // given.
  std::string s3_endpoint;
  std::string s3_region;
  std::string s3_addressing;
  std::string s3_credentials_file;
  std::string s3_profile;
  std::vector<std::string> positional;
  std::vector<std::string> command;  // lease run: what follows "--"
};

// What one command takes besides the flags of every command.
struct CommandSpec {
  std::string_view group;    // "lease", "fence", "batch", "probe", ...
  std::string_view name;     // "" for a command of one word ("batch")
  std::string_view operand;  // "NAME", "KEY", "FILE", "URL", ...
  std::set<std::string_view> flags;
  bool takes_command = false;
  bool operand_optional = false;
  bool takes_file = false;  // a second operand, optional: FILE or "-"

  // "fencepost lease acquire", "fencepost batch".
  std::string Title() const {
    return "fencepost " + std::string(group) +
           (name.empty() ? "" : " " + std::string(name));
  }
};

// The commands there are, with what each takes.
const std::vector<CommandSpec>& Commands();

// The flags and operands of `spec` in `args` (after the command's words),
// with the defaults of the environment (FENCEPOST_ADMIN, FENCEPOST_DATA;
// for a command that takes --fence-key, --token from FENCING_TOKEN and
// --fence-key from FENCEPOST_FENCE, as `lease run` hands them to its
// command). Throws UsageError.
Flags ParseFlags(const CommandSpec& spec, const std::vector<std::string>& args);

// Throws UsageError "--FLAG is required" unless `present`.
void Require(bool present, std::string_view flag);

// --ttl, required, from 100ms to 1h.
std::chrono::milliseconds RequireTtl(const Flags& flags);

}  // namespace fencepost::cli
