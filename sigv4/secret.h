#pragma once

#include <iosfwd>
#include <string>
#include <string_view>

namespace fencepost::sigv4 {

// A secret (an AWS secret access key, a session token, a derived signing
// key) that cannot be printed by accident: no operator<<, no conversion, no
// to-string; gtest prints it as "Secret(redacted)". Its bytes are wiped when
// it is destroyed or moved from. Reveal() is for the code that signs with it
// or sends it, and only that code: never log, format or put the result in an
// error message. A Secret is a value; like std::string, not thread-safe.
class Secret {
 public:
  Secret() = default;
  explicit Secret(std::string value) : value_(std::move(value)) {}
  Secret(const Secret& other) = default;
  Secret& operator=(const Secret& other);
  Secret(Secret&& other) noexcept;
  Secret& operator=(Secret&& other) noexcept;
  ~Secret();

  bool empty() const { return value_.empty(); }
  std::string_view Reveal() const { return value_; }

  friend void PrintTo(const Secret&, std::ostream* os);

 private:
  std::string value_;
};

// Deleted so that `stream << secret` does not compile.
std::ostream& operator<<(std::ostream&, const Secret&) = delete;

}  // namespace fencepost::sigv4
