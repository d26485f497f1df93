#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace fencepost::client {

// A JSON value (RFC 8259) as read by Json::Parse. Numbers keep their text,
// so integers of any length are read exactly, never through a double: a
// token of 18446744073709551615 stays that number.
//
// Thread safety: a Json is a value; const access from many threads is safe.
class Json {
 public:
  enum class Kind { kNull, kBool, kNumber, kString, kArray, kObject };

  // The deepest nesting of arrays and objects Parse accepts.
  static constexpr std::size_t kMaxDepth = 64;
  // The longest text Parse accepts, in bytes.
  static constexpr std::size_t kMaxSize = std::size_t{16} << 20;

  // Reads exactly one value, with optional whitespace around it. nullopt
  // when `text` is not JSON, is longer than kMaxSize, nests deeper than
  // kMaxDepth, holds a string with invalid UTF-8 or a lone surrogate
  // escape, or an object that names a member twice.
  static std::optional<Json> Parse(std::string_view text);

  Json() = default;  // null

  Kind kind() const { return kind_; }
  bool is_null() const { return kind_ == Kind::kNull; }

  // The value of true or false; nullopt for other kinds.
  std::optional<bool> AsBool() const;
  // The decoded text of a string; nullptr for other kinds.
  const std::string* AsString() const;
  // A number without fraction or exponent that fits the type; nullopt
  // otherwise (also for other kinds).
  std::optional<std::uint64_t> AsUint64() const;
  std::optional<std::int64_t> AsInt64() const;
  // A number's text as it was written ("" for other kinds).
  const std::string& number_text() const;

  // An array's elements; empty for other kinds.
  const std::vector<Json>& items() const;
  // An object's member names, in document order; empty for other kinds.
  const std::vector<std::string>& names() const { return names_; }
  // An object's member `name`; nullptr when absent or not an object.
  const Json* Find(std::string_view name) const;

 private:
  friend class JsonReader;

  Kind kind_ = Kind::kNull;
  bool bool_ = false;
  std::string text_;                // a string's value or a number's text
  std::vector<std::string> names_;  // object member names
  std::vector<Json> values_;        // array elements or object member values
};

// `s` as a JSON string literal, quotes included: '"', '\\' and control
// characters are escaped, every other byte is copied as it is.
std::string JsonQuote(std::string_view s);

// Standard, padded base64 (RFC 4648 section 4), how JSON documents carry
// bytes (fencepost's batches, etcd's keys and values).
std::string Base64Encode(std::string_view bytes);
// nullopt for anything but what Base64Encode writes: standard, padded
// base64 whose padding drops only zero bits.
std::optional<std::string> Base64Decode(std::string_view text);

}  // namespace fencepost::client
