#include "client/json.h"

#include <set>

namespace fencepost::client {

// A recursive-descent reader over one text. Recursion is bounded by
// Json::kMaxDepth, so hostile input cannot exhaust the stack.
class JsonReader {
 public:
  explicit JsonReader(std::string_view text) : text_(text) {}

  bool ReadDocument(Json* out) {
    SkipSpace();
    if (!ReadValue(out, 0)) return false;
    SkipSpace();
    return pos_ == text_.size();
  }

 private:
  bool ReadValue(Json* out, std::size_t depth) {
    if (pos_ >= text_.size()) return false;
    switch (text_[pos_]) {
      case '{':
        return ReadObject(out, depth + 1);
      case '[':
        return ReadArray(out, depth + 1);
      case '"':
        out->kind_ = Json::Kind::kString;
        return ReadString(&out->text_);
      case 't':
        out->kind_ = Json::Kind::kBool;
        out->bool_ = true;
        return ReadLiteral("true");
      case 'f':
        out->kind_ = Json::Kind::kBool;
        return ReadLiteral("false");
      case 'n':
        out->kind_ = Json::Kind::kNull;
        return ReadLiteral("null");
      default:
        out->kind_ = Json::Kind::kNumber;
        return ReadNumber(&out->text_);
    }
  }

  bool ReadObject(Json* out, std::size_t depth) {
    if (depth > Json::kMaxDepth) return false;
    out->kind_ = Json::Kind::kObject;
    ++pos_;  // '{'
    SkipSpace();
    if (Consume('}')) return true;
    std::set<std::string> seen;
    while (true) {
      SkipSpace();
      std::string name;
      if (Peek() != '"' || !ReadString(&name)) return false;
      if (!seen.insert(name).second) return false;
      SkipSpace();
      if (!Consume(':')) return false;
      SkipSpace();
      Json value;
      if (!ReadValue(&value, depth)) return false;
      out->names_.push_back(std::move(name));
      out->values_.push_back(std::move(value));
      SkipSpace();
      if (Consume('}')) return true;
      if (!Consume(',')) return false;
    }
  }

  bool ReadArray(Json* out, std::size_t depth) {
    if (depth > Json::kMaxDepth) return false;
    out->kind_ = Json::Kind::kArray;
    ++pos_;  // '['
    SkipSpace();
    if (Consume(']')) return true;
    while (true) {
      SkipSpace();
      Json value;
      if (!ReadValue(&value, depth)) return false;
      out->values_.push_back(std::move(value));
      SkipSpace();
      if (Consume(']')) return true;
      if (!Consume(',')) return false;
    }
  }

  bool ReadLiteral(std::string_view word) {
    if (text_.substr(pos_, word.size()) != word) return false;
    pos_ += word.size();
    return true;
  }

  // -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?
  bool ReadNumber(std::string* out) {
    const std::size_t start = pos_;
    Consume('-');
    if (Consume('0')) {
      // no leading zeros
    } else if (!ReadDigits()) {
      return false;
    }
    if (Consume('.') && !ReadDigits()) return false;
    if (Consume('e') || Consume('E')) {
      if (!Consume('+')) Consume('-');
      if (!ReadDigits()) return false;
    }
    out->assign(text_.substr(start, pos_ - start));
    return true;
  }

  bool ReadDigits() {
    const std::size_t start = pos_;
    while (pos_ < text_.size() && IsDigit(text_[pos_])) ++pos_;
    return pos_ > start;
  }

  bool ReadString(std::string* out) {
    ++pos_;  // '"'
    while (pos_ < text_.size()) {
      const unsigned char c = static_cast<unsigned char>(text_[pos_]);
      if (c == '"') {
        ++pos_;
        return true;
      }
      if (c < 0x20) return false;
      if (c == '\\') {
        if (!ReadEscape(out)) return false;
      } else if (c < 0x80) {
        out->push_back(static_cast<char>(c));
        ++pos_;
      } else if (!CopyUtf8Sequence(out)) {
        return false;
      }
    }
    return false;  // unterminated
  }

  bool ReadEscape(std::string* out) {
    ++pos_;  // '\\'
    if (pos_ >= text_.size()) return false;
    const char c = text_[pos_++];
    switch (c) {
      case '"':
      case '\\':
      case '/':
        out->push_back(c);
        return true;
      case 'b':
        out->push_back('\b');
        return true;
      case 'f':
        out->push_back('\f');
        return true;
      case 'n':
        out->push_back('\n');
        return true;
      case 'r':
        out->push_back('\r');
        return true;
      case 't':
        out->push_back('\t');
        return true;
      case 'u':
        return ReadUnicodeEscape(out);
      default:
        return false;
    }
  }

  // After "\u": four hex digits, and for a high surrogate a "\uXXXX" low
  // surrogate right after it.
  bool ReadUnicodeEscape(std::string* out) {
    std::uint32_t code = 0;
    if (!ReadHex4(&code)) return false;
    if (code >= 0xDC00 && code <= 0xDFFF) return false;  // lone low half
    if (code >= 0xD800 && code <= 0xDBFF) {
      std::uint32_t low = 0;
      if (!ReadLiteral("\\u") || !ReadHex4(&low)) return false;
      if (low < 0xDC00 || low > 0xDFFF) return false;
      code = 0x10000 + ((code - 0xD800) << 10) + (low - 0xDC00);
    }
    AppendUtf8(code, out);
    return true;
  }

  bool ReadHex4(std::uint32_t* code) {
    if (text_.size() - pos_ < 4) return false;
    for (int i = 0; i < 4; ++i) {
      const char c = text_[pos_++];
      std::uint32_t digit = 0;
      if (c >= '0' && c <= '9') {
        digit = static_cast<std::uint32_t>(c - '0');
      } else if (c >= 'a' && c <= 'f') {
        digit = static_cast<std::uint32_t>(c - 'a' + 10);
      } else if (c >= 'A' && c <= 'F') {
        digit = static_cast<std::uint32_t>(c - 'A' + 10);
      } else {
        return false;
      }
      *code = *code * 16 + digit;
    }
    return true;
  }

  static void AppendUtf8(std::uint32_t code, std::string* out) {
    if (code < 0x80) {
      out->push_back(static_cast<char>(code));
    } else if (code < 0x800) {
      out->push_back(static_cast<char>(0xC0 | (code >> 6)));
      out->push_back(static_cast<char>(0x80 | (code & 0x3F)));
    } else if (code < 0x10000) {
      out->push_back(static_cast<char>(0xE0 | (code >> 12)));
      out->push_back(static_cast<char>(0x80 | ((code >> 6) & 0x3F)));
      out->push_back(static_cast<char>(0x80 | (code & 0x3F)));
    } else {
      out->push_back(static_cast<char>(0xF0 | (code >> 18)));
      out->push_back(static_cast<char>(0x80 | ((code >> 12) & 0x3F)));
      out->push_back(static_cast<char>(0x80 | ((code >> 6) & 0x3F)));
      out->push_back(static_cast<char>(0x80 | (code & 0x3F)));
    }
  }

  // One multi-byte UTF-8 sequence (RFC 3629: no overlong forms, no
  // surrogates, nothing past U+10FFFF), copied as it is.
  bool CopyUtf8Sequence(std::string* out) {
    const auto byte = [&](std::size_t i) {
      return static_cast<unsigned char>(text_[pos_ + i]);
    };
    const unsigned char lead = byte(0);
    std::size_t length = 0;
    unsigned char low = 0x80, high = 0xBF;  // range of the second byte
    if (lead >= 0xC2 && lead <= 0xDF) {
      length = 2;
    } else if (lead >= 0xE0 && lead <= 0xEF) {
      length = 3;
      if (lead == 0xE0) low = 0xA0;
      if (lead == 0xED) high = 0x9F;
    } else if (lead >= 0xF0 && lead <= 0xF4) {
      length = 4;
      if (lead == 0xF0) low = 0x90;
      if (lead == 0xF4) high = 0x8F;
    } else {
      return false;
    }
    if (text_.size() - pos_ < length) return false;
    if (byte(1) < low || byte(1) > high) return false;
    for (std::size_t i = 2; i < length; ++i) {
      if (byte(i) < 0x80 || byte(i) > 0xBF) return false;
    }
    out->append(text_.substr(pos_, length));
    pos_ += length;
    return true;
  }

  static bool IsDigit(char c) { return c >= '0' && c <= '9'; }
  char Peek() const { return pos_ < text_.size() ? text_[pos_] : '\0'; }
  bool Consume(char c) {
    if (pos_ < text_.size() && text_[pos_] == c) {
      ++pos_;
      return true;
    }
    return false;
  }
  void SkipSpace() {
    while (pos_ < text_.size() &&
           (text_[pos_] == ' ' || text_[pos_] == '\t' || text_[pos_] == '\n' ||
            text_[pos_] == '\r')) {
      ++pos_;
    }
  }

  std::string_view text_;
  std::size_t pos_ = 0;
};

std::optional<Json> Json::Parse(std::string_view text) {
  if (text.size() > kMaxSize) return std::nullopt;
  Json value;
  JsonReader reader(text);
  if (!reader.ReadDocument(&value)) return std::nullopt;
  return value;
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

namespace {
constexpr char kBase64[] =
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
}  // namespace

std::string Base64Encode(std::string_view bytes) {
  const auto byte = [&](std::size_t i) -> std::uint32_t {
    return i < bytes.size() ? static_cast<unsigned char>(bytes[i]) : 0;
  };
  std::string out;
  out.reserve((bytes.size() + 2) / 3 * 4);
  for (std::size_t i = 0; i < bytes.size(); i += 3) {
    const std::uint32_t n = (byte(i) << 16) | (byte(i + 1) << 8) | byte(i + 2);
    const std::size_t left = bytes.size() - i;  // 1, 2, or 3 and more
    out.push_back(kBase64[(n >> 18) & 63]);
    out.push_back(kBase64[(n >> 12) & 63]);
    out.push_back(left > 1 ? kBase64[(n >> 6) & 63] : '=');
    out.push_back(left > 2 ? kBase64[n & 63] : '=');
  }
  return out;
}

std::optional<std::string> Base64Decode(std::string_view text) {
  if (text.size() % 4 != 0) return std::nullopt;
  const auto value = [](char c) -> int {
    const char* at = std::char_traits<char>::find(kBase64, 64, c);
    return at == nullptr ? -1 : static_cast<int>(at - kBase64);
  };
  std::string out;
  out.reserve(text.size() / 4 * 3);
  for (std::size_t i = 0; i < text.size(); i += 4) {
    const bool last = i + 4 == text.size();
    const int pad = last ? (text[i + 3] == '=') + (text[i + 2] == '=') : 0;
    if (pad == 1 && text[i + 2] == '=') return std::nullopt;
    std::uint32_t n = 0;
    for (int k = 0; k < 4; ++k) {
      const int v =
          k >= 4 - pad ? 0 : value(text[i + static_cast<std::size_t>(k)]);
      if (v < 0) return std::nullopt;
      n = (n << 6) | static_cast<std::uint32_t>(v);
    }
    out.push_back(static_cast<char>((n >> 16) & 0xff));
    if (pad < 2) out.push_back(static_cast<char>((n >> 8) & 0xff));
    if (pad < 1) out.push_back(static_cast<char>(n & 0xff));
  }
  return out;
}

}  // namespace fencepost::client
