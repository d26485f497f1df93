#include "client/json.h"

#include <limits>
#include <utility>

#include "codec/base64.h"
#include "codec/json.h"

namespace fencepost::client {

// Turns the one JSON reader's values (codec/json.h) into Json values, taking
// their text and items over. Recursion is bounded by Json::kMaxDepth, which
// the parse enforced.
class JsonReader {
 public:
  static Json From(codec::JsonValue&& value) {
    using Kind = codec::JsonValue::Kind;
    Json out;
    switch (value.kind) {
      case Kind::kNull:
        break;
      case Kind::kBool:
        out.kind_ = Json::Kind::kBool;
        out.bool_ = value.text == "true";
        break;
      case Kind::kNumber:
        out.kind_ = Json::Kind::kNumber;
        out.text_ = std::move(value.text);
        break;
      case Kind::kString:
        out.kind_ = Json::Kind::kString;
        out.text_ = std::move(value.text);
        break;
      case Kind::kArray:
        out.kind_ = Json::Kind::kArray;
        out.values_.reserve(value.items.size());
        for (codec::JsonValue& item : value.items) {
          out.values_.push_back(From(std::move(item)));
        }
        break;
      case Kind::kObject:
        out.kind_ = Json::Kind::kObject;
        out.names_.reserve(value.members.size());
        out.values_.reserve(value.members.size());
        for (codec::JsonMember& member : value.members) {
          out.names_.push_back(std::move(member.name));
          out.values_.push_back(From(std::move(member.value)));
        }
        break;
    }
    return out;
  }
};

std::optional<Json> Json::Parse(std::string_view text) {
  if (text.size() > kMaxSize) return std::nullopt;
  // Bounded by depth and size only: no count of items, members or values.
  constexpr std::size_t kAny = std::numeric_limits<std::size_t>::max();
  const codec::JsonLimits limits{static_cast<int>(kMaxDepth), kAny, kAny, kAny,
                                 nullptr};
  codec::JsonValue value;
  if (!codec::ParseJson(text, &value, limits).empty()) return std::nullopt;
  return JsonReader::From(std::move(value));
}

std::optional<bool> Json::AsBool() const {
  if (kind_ != Kind::kBool) return std::nullopt;
  return bool_;
}

const std::string* Json::AsString() const {
  return kind_ == Kind::kString ? &text_ : nullptr;
}

std::optional<std::uint64_t> Json::AsUint64() const {
  if (kind_ != Kind::kNumber || text_.empty() || text_.size() > 20) {
    return std::nullopt;
  }
  std::uint64_t value = 0;
  for (const char c : text_) {
    if (c < '0' || c > '9') return std::nullopt;  // sign, fraction, exponent
    const auto digit = static_cast<std::uint64_t>(c - '0');
    if (value > (UINT64_MAX - digit) / 10) return std::nullopt;
    value = value * 10 + digit;
  }
  return value;
}

std::optional<std::int64_t> Json::AsInt64() const {
  if (kind_ != Kind::kNumber || text_.empty()) return std::nullopt;
  const bool negative = text_[0] == '-';
  Json magnitude;
  magnitude.kind_ = Kind::kNumber;
  magnitude.text_ = negative ? text_.substr(1) : text_;
  const std::optional<std::uint64_t> m = magnitude.AsUint64();
  if (!m) return std::nullopt;
  const auto limit = static_cast<std::uint64_t>(INT64_MAX);
  if (!negative) {
    if (*m > limit) return std::nullopt;
    return static_cast<std::int64_t>(*m);
  }
  if (*m > limit + 1) return std::nullopt;
  if (*m == limit + 1) return INT64_MIN;
  return -static_cast<std::int64_t>(*m);
}

const std::string& Json::number_text() const {
  static const std::string kEmpty;
  return kind_ == Kind::kNumber ? text_ : kEmpty;
}

const std::vector<Json>& Json::items() const {
  static const std::vector<Json> kNone;
  return kind_ == Kind::kArray ? values_ : kNone;
}

const Json* Json::Find(std::string_view name) const {
  if (kind_ != Kind::kObject) return nullptr;
  for (std::size_t i = 0; i < names_.size(); ++i) {
    if (names_[i] == name) return &values_[i];
  }
  return nullptr;
}

std::string JsonQuote(std::string_view s) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  out.reserve(s.size() + 2);
  out.push_back('"');
  for (const char c : s) {
    const auto u = static_cast<unsigned char>(c);
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      default:
        if (u < 0x20 || u == 0x7F) {
          out += "\\u00";
          out.push_back(kHex[u >> 4]);
          out.push_back(kHex[u & 0xF]);
        } else {
          out.push_back(c);
        }
    }
  }
  out.push_back('"');
  return out;
}

std::string Base64Encode(std::string_view bytes) {
  return codec::EncodeBase64(bytes);
}

std::optional<std::string> Base64Decode(std::string_view text) {
  std::string bytes;
  if (!codec::DecodeBase64(text, &bytes)) return std::nullopt;
  return bytes;
}

}  // namespace fencepost::client
