#include "codec/json.h"

#include <optional>
#include <unordered_set>

#include "codec/utf8.h"

namespace fencepost::codec {

void AppendJsonString(std::string* out, std::string_view s) {
  static constexpr char kHex[] = "0123456789abcdef";
  const bool utf8 = IsValidUtf8(s);
  out->push_back('"');
  for (char ch : s) {
    const auto c = static_cast<unsigned char>(ch);
    switch (c) {
      case '"':
        out->append("\\\"");
        break;
      case '\\':
        out->append("\\\\");
        break;
      case '\n':
        out->append("\\n");
        break;
      case '\r':
        out->append("\\r");
        break;
      case '\t':
        out->append("\\t");
        break;
      default:
        if (c < 0x20 || (c >= 0x80 && !utf8)) {
          out->append("\\u00");
          out->push_back(kHex[c >> 4]);
          out->push_back(kHex[c & 15]);
        } else {
          out->push_back(ch);
        }
    }
  }
  out->push_back('"');
}

namespace {

// A cursor over JSON text; each Parse* returns false with `error` set.
struct JsonReader {
  std::string_view in;
  std::size_t at = 0;
  std::string error;
  std::size_t values = 0;  // built so far (ParseJson)

  bool Fail(std::string what) {
    error = std::move(what) + " at byte " + std::to_string(at);
    return false;
  }
  void SkipSpace() {
    while (at < in.size() && (in[at] == ' ' || in[at] == '\t' ||
                              in[at] == '\n' || in[at] == '\r')) {
      ++at;
    }
  }
  bool Eat(char c) {
    SkipSpace();
    if (at < in.size() && in[at] == c) {
      ++at;
      return true;
    }
    return false;
  }
  bool Hex4(unsigned* v) {
    if (at + 4 > in.size()) return Fail("a short \\u escape");
    *v = 0;
    for (int i = 0; i < 4; ++i) {
      const char c = in[at++];
      *v <<= 4;
      if (c >= '0' && c <= '9') {
        *v |= static_cast<unsigned>(c - '0');
      } else if (c >= 'a' && c <= 'f') {
        *v |= static_cast<unsigned>(c - 'a' + 10);
      } else if (c >= 'A' && c <= 'F') {
        *v |= static_cast<unsigned>(c - 'A' + 10);
      } else {
        return Fail("a bad \\u escape");
      }
    }
    return true;
  }

  bool String(std::string* out) {
    if (!Eat('"')) return Fail("expected a string");
    const std::size_t start = at;
    while (at < in.size() && in[at] != '"') {
      const auto c = static_cast<unsigned char>(in[at]);
      if (c < 0x20) return Fail("a control character in a string");
      if (c != '\\') {
        out->push_back(in[at++]);
        continue;
      }
      if (++at >= in.size()) break;
      const char e = in[at++];
      switch (e) {
        case '"':
        case '\\':
        case '/':
          out->push_back(e);
          break;
        case 'b':
          out->push_back('\b');
          break;
        case 'f':
          out->push_back('\f');
          break;
        case 'n':
          out->push_back('\n');
          break;
        case 'r':
          out->push_back('\r');
          break;
        case 't':
          out->push_back('\t');
          break;
        case 'u': {
          unsigned cp = 0;
          if (!Hex4(&cp)) return false;
          if (cp >= 0xD800 && cp < 0xDC00) {
            unsigned low = 0;
            if (at + 2 > in.size() || in[at] != '\\' || in[at + 1] != 'u') {
              return Fail("a lone surrogate");
            }
            at += 2;
            if (!Hex4(&low)) return false;
            if (low < 0xDC00 || low >= 0xE000) return Fail("a lone surrogate");
            cp = 0x10000 + ((cp - 0xD800) << 10) + (low - 0xDC00);
          } else if (cp >= 0xDC00 && cp < 0xE000) {
            return Fail("a lone surrogate");
          }
          AppendUtf8(out, cp);
          break;
        }
        default:
          return Fail("a bad escape");
      }
    }
    if (at >= in.size()) {
      at = start;
      return Fail("an unterminated string");
    }
    ++at;
    if (!IsValidUtf8(*out)) return Fail("a string that is not UTF-8");
    return true;
  }
  bool Number(std::string* out) {
    const std::size_t start = at;
    if (at < in.size() && in[at] == '-') ++at;
    const auto digits = [this] {
      const std::size_t from = at;
      while (at < in.size() && in[at] >= '0' && in[at] <= '9') ++at;
      return at - from;
    };
    const std::size_t first = at;
    const std::size_t n = digits();
    if (n == 0 || (n > 1 && in[first] == '0')) return Fail("a bad number");
    if (at < in.size() && in[at] == '.') {
      ++at;
      if (digits() == 0) return Fail("a bad number");
    }
    if (at < in.size() && (in[at] == 'e' || in[at] == 'E')) {
      ++at;
      if (at < in.size() && (in[at] == '+' || in[at] == '-')) ++at;
      if (digits() == 0) return Fail("a bad number");
    }
    *out = std::string(in.substr(start, at - start));
    return true;
  }
  bool Scalar(JsonScalar* value) {
    SkipSpace();
    if (at >= in.size()) return Fail("expected a value");
    const char c = in[at];
    if (c == '"') {
      value->kind = JsonScalar::Kind::kString;
      return String(&value->text);
    }
    if (c == '-' || (c >= '0' && c <= '9')) {
      value->kind = JsonScalar::Kind::kNumber;
      return Number(&value->text);
    }
    for (std::string_view word : {"null", "true", "false"}) {
      if (in.substr(at, word.size()) == word) {
        at += word.size();
        value->kind =
            word == "null" ? JsonScalar::Kind::kNull : JsonScalar::Kind::kBool;
        value->text = std::string(word);
        return true;
      }
    }
    if (c == '{' || c == '[') return Fail("a nested value");
    return Fail("expected a value");
  }
  // The kind of the value starting at `at` (after space), by its first
  // byte; nullopt when no value starts there (the parse then says why).
  std::optional<JsonValue::Kind> Upcoming() {
    SkipSpace();
    if (at >= in.size()) return std::nullopt;
    switch (in[at]) {
      case '[':
        return JsonValue::Kind::kArray;
      case '{':
        return JsonValue::Kind::kObject;
      case '"':
        return JsonValue::Kind::kString;
      case 't':
      case 'f':
        return JsonValue::Kind::kBool;
      case 'n':
        return JsonValue::Kind::kNull;
      default:
        if (in[at] == '-' || (in[at] >= '0' && in[at] <= '9')) {
          return JsonValue::Kind::kNumber;
        }
        return std::nullopt;
    }
  }
  static const char* NameOf(JsonValue::Kind kind) {
    static constexpr const char* kNames[] = {
        "a string", "a number", "null", "a boolean", "an array", "an object"};
    return kNames[static_cast<int>(kind)];
  }
  // Counts one more value against the budget, and checks its kind against
  // `shape` before a byte of it is read.
  bool Admit(const JsonLimits& limits, const JsonShape* shape) {
    if (values >= limits.values) {
      return Fail("more than " + std::to_string(limits.values) + " values");
    }
    ++values;
    const std::optional<JsonValue::Kind> kind = Upcoming();
    if (shape != nullptr && kind &&
        (shape->kinds & JsonShape::Bit(*kind)) == 0) {
      std::string allowed;
      for (int k = 0; k <= static_cast<int>(JsonValue::Kind::kObject); ++k) {
        if ((shape->kinds & (1u << k)) == 0) continue;
        allowed += allowed.empty() ? "" : " or ";
        allowed += NameOf(static_cast<JsonValue::Kind>(k));
      }
      return Fail(std::string(NameOf(*kind)) + " where " + allowed +
                  " belongs");
    }
    return true;
  }
  // Whether no member of `members` is named `name`: a scan while the
  // object is small (the server allows 64 members), a set of the names once
  // it is larger (the client reads objects of any size), so that no object
  // costs time quadratic in its size.
  static bool IsNewName(const std::vector<JsonMember>& members,
                        const std::string& name,
                        std::unordered_set<std::string>* names) {
    constexpr std::size_t kScanned = 32;
    if (members.size() < kScanned) {
      for (const JsonMember& other : members) {
        if (other.name == name) return false;
      }
      return true;
    }
    if (names->empty()) {
      for (const JsonMember& other : members) names->insert(other.name);
    }
    return names->insert(name).second;
  }
  bool Value(JsonValue* value, const JsonLimits& limits, int depth,
             const JsonShape* shape) {
    if (!Admit(limits, shape)) return false;
    SkipSpace();
    if (at < in.size() && (in[at] == '[' || in[at] == '{')) {
      if (depth >= limits.depth) return Fail("nesting too deep");
      const bool array = in[at++] == '[';
      value->kind = array ? JsonValue::Kind::kArray : JsonValue::Kind::kObject;
      const JsonShape* inner = shape == nullptr ? nullptr
                               : array          ? shape->items
                                                : shape->members;
      if (Eat(array ? ']' : '}')) return true;
      std::unordered_set<std::string> names;  // see IsNewName
      do {
        if (array) {
          if (value->items.size() >= limits.items) {
            return Fail("an array with more than " +
                        std::to_string(limits.items) + " items");
          }
          if (!Value(&value->items.emplace_back(), limits, depth + 1, inner)) {
            return false;
          }
          continue;
        }
        if (value->members.size() >= limits.members) {
          return Fail("an object with more than " +
                      std::to_string(limits.members) + " members");
        }
        std::string name;
        if (!String(&name)) return false;
        if (!Eat(':')) return Fail("expected ':'");
        if (!IsNewName(value->members, name, &names)) {
          return Fail("a member appears twice");
        }
        JsonMember& member = value->members.emplace_back();
        member.name = std::move(name);
        if (!Value(&member.value, limits, depth + 1, inner)) return false;
      } while (Eat(','));
      if (!Eat(array ? ']' : '}')) {
        return Fail(array ? "expected ',' or ']'" : "expected ',' or '}'");
      }
      return true;
    }
    JsonScalar scalar;
    if (!Scalar(&scalar)) return false;
    // The scalar kinds come first in both enums, in the same order.
    value->kind = static_cast<JsonValue::Kind>(scalar.kind);
    value->text = std::move(scalar.text);
    return true;
  }
};

}  // namespace

const JsonValue* JsonValue::Find(std::string_view name) const {
  for (const JsonMember& member : members) {
    if (member.name == name) return &member.value;
  }
  return nullptr;
}

std::string ParseJson(std::string_view text, JsonValue* value,
                      const JsonLimits& limits, JsonStats* stats) {
  *value = JsonValue{};
  JsonReader r{text, 0, {}, 0};
  bool ok = r.Value(value, limits, 0, limits.shape);
  if (ok) {
    r.SkipSpace();
    if (r.at != text.size()) ok = r.Fail("text after the value");
  }
  if (stats != nullptr) *stats = {r.values, r.at};
  if (!ok) {
    // What was built before the failure is of no use: free it now.
    *value = JsonValue{};
    return r.error;
  }
  return {};
}

std::string ParseFlatObject(std::string_view text,
                            std::map<std::string, JsonScalar>* members,
                            std::size_t max_members) {
  members->clear();
  JsonReader r{text, 0, {}, 0};
  if (!r.Eat('{')) return "expected a JSON object";
  if (!r.Eat('}')) {
    do {
      std::string name;
      JsonScalar value;
      if (!r.String(&name)) return r.error;
      if (!r.Eat(':')) return r.Fail("expected ':'"), r.error;
      if (!r.Scalar(&value)) return r.error;
      if (members->size() >= max_members) return "too many members";
      if (!members->emplace(std::move(name), std::move(value)).second) {
        return "a member appears twice";
      }
    } while (r.Eat(','));
    if (!r.Eat('}')) return r.Fail("expected ',' or '}'"), r.error;
  }
  r.SkipSpace();
  if (r.at != text.size()) return r.Fail("text after the object"), r.error;
  return {};
}

}  // namespace fencepost::codec
