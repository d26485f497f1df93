#pragma once

#include <cstddef>
#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

// The project's one JSON reader (RFC 8259), for the server's request
// bodies and etcd's answers, and under client::Json for the client library:
// numbers keep their text, strings must be valid UTF-8, a name appears at
// most once per object, and JsonLimits bounds what a parse builds.
namespace fencepost::codec {

// Appends `s` as a JSON string literal. Bytes that are not valid UTF-8 are
// written as \u00XX escapes so the output is always valid JSON.
void AppendJsonString(std::string* out, std::string_view s);

// A member value of a flat JSON object: a string (decoded), a number (as
// written), null, or a boolean ("true"/"false").
struct JsonScalar {
  enum class Kind { kString, kNumber, kNull, kBool };
  Kind kind = Kind::kNull;
  std::string text;
};

// Parses `text` (RFC 8259) as one object whose member values are all
// scalars, each name at most once, at most `max_members` of them. Returns
// an empty string on success, else what is wrong with it.
std::string ParseFlatObject(std::string_view text,
                            std::map<std::string, JsonScalar>* members,
                            std::size_t max_members = 16);

struct JsonMember;

// Any JSON value (for request bodies with arrays and objects): a scalar,
// or `items` (an array) or `members` (an object, in document order, each
// name once).
struct JsonValue {
  enum class Kind { kString, kNumber, kNull, kBool, kArray, kObject };
  Kind kind = Kind::kNull;
  std::string text;  // as JsonScalar's
  std::vector<JsonValue> items;
  std::vector<JsonMember> members;

  // The member named `name` of an object, or nullptr.
  const JsonValue* Find(std::string_view name) const;
};

struct JsonMember {
  std::string name;
  JsonValue value;
};

// The shape a document must have, checked while it is parsed: a value of
// the wrong kind fails the parse where it starts, before anything after it
// is read or built. (A few bytes such as `[0,0,...]` would otherwise build
// a JsonValue of some 90 bytes each.)
struct JsonShape {
  // The kinds allowed here, a bit set of Bit(JsonValue::Kind).
  unsigned kinds = ~0u;
  const JsonShape* items = nullptr;    // of each array item; nullptr: any
  const JsonShape* members = nullptr;  // of each member's value; nullptr: any

  static constexpr unsigned Bit(JsonValue::Kind kind) {
    return 1u << static_cast<unsigned>(kind);
  }
};

// Bounds on what ParseJson builds, so a body's size alone cannot make it
// use much more memory or time than the body: at most `values` values in
// all (each holds about 100 bytes beside its text), nested at most `depth`
// deep, and of the `shape` given, if any.
struct JsonLimits {
  int depth = 8;
  std::size_t items = 1024;  // per array
  std::size_t members = 64;  // per object
  std::size_t values = 65536;
  const JsonShape* shape = nullptr;
};

// What a parse did, also when it failed: the values it built and the bytes
// it read before it stopped.
struct JsonStats {
  std::size_t values = 0;
  std::size_t bytes = 0;
};

// Parses `text` as one JSON value within `limits`. Returns an empty string
// on success, else what is wrong with it.
std::string ParseJson(std::string_view text, JsonValue* value,
                      const JsonLimits& limits = {},
                      JsonStats* stats = nullptr);

}  // namespace fencepost::codec
