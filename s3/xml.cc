#include "s3/xml.h"

#include <cstdint>
#include <map>

#include "codec/utf8.h"

namespace fencepost::s3 {

namespace {

bool XmlSpace(char c) {
  return c == ' ' || c == '\t' || c == '\r' || c == '\n';
}

bool NameChar(char c) {
  return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') ||
         (c >= '0' && c <= '9');
}

// The character a reference's digits ("65", "x41") name, if any.
std::optional<std::uint32_t> CharRef(std::string_view digits) {
  std::uint32_t base = 10;
  if (!digits.empty() && digits.front() == 'x') {
    base = 16;
    digits.remove_prefix(1);
  }
  if (digits.empty() || digits.size() > 8) return std::nullopt;
  std::uint32_t value = 0;
  for (const char c : digits) {
    std::uint32_t digit = 99;
    if (c >= '0' && c <= '9') digit = c - '0';
    if (base == 16 && c >= 'a' && c <= 'f') digit = c - 'a' + 10;
    if (base == 16 && c >= 'A' && c <= 'F') digit = c - 'A' + 10;
    if (digit >= base) return std::nullopt;
    value = value * base + digit;
  }
  if (value == 0 || value > 0x10ffff || (value >= 0xd800 && value <= 0xdfff)) {
    return std::nullopt;
  }
  return value;
}

}  // namespace

bool NextElement(std::string_view text, std::size_t* at, XmlElement* element,
                 bool* malformed) {
  while (*at < text.size() && XmlSpace(text[*at])) ++*at;
  if (*at == text.size()) return false;
  *malformed = true;
  const std::size_t start = *at;
  std::size_t name_end = start + 1;
  while (name_end < text.size() && NameChar(text[name_end])) ++name_end;
  const std::size_t gt = text.find('>', name_end);
  if (text[start] != '<' || name_end == start + 1 ||
      gt == std::string_view::npos ||
      (text[name_end] != '>' && text[name_end] != '/' &&
       !XmlSpace(text[name_end]))) {
    return false;
  }
  element->name = text.substr(start + 1, name_end - start - 1);
  element->inner = {};
  *at = gt + 1;
  if (text[gt - 1] != '/') {
    const std::string close = "</" + std::string(element->name) + ">";
    const std::size_t end = text.find(close, gt + 1);
    if (end == std::string_view::npos) return false;
    element->inner = text.substr(gt + 1, end - gt - 1);
    *at = end + close.size();
  }
  element->raw = text.substr(start, *at - start);
  *malformed = false;
  return true;
}

std::size_t SkipProlog(std::string_view text) {
  std::size_t at = 0;
  for (;;) {
    while (at < text.size() && XmlSpace(text[at])) ++at;
    std::string_view end;
    if (text.substr(at, 2) == "<?") {
      end = "?>";
    } else if (text.substr(at, 4) == "<!--") {
      end = "-->";
    } else {
      return at;
    }
    const std::size_t found = text.find(end, at);
    if (found == std::string_view::npos) return std::string_view::npos;
    at = found + end.size();
  }
}

std::optional<std::string> DecodeXmlText(std::string_view text) {
  static const std::map<std::string_view, char> kNamed = {
      {"amp", '&'}, {"lt", '<'}, {"gt", '>'}, {"quot", '"'}, {"apos", '\''}};
  std::string out;
  out.reserve(text.size());
  for (std::size_t i = 0; i < text.size(); ++i) {
    if (text[i] == '<') return std::nullopt;
    if (text[i] != '&') {
      out.push_back(text[i]);
      continue;
    }
    const std::size_t semi = text.find(';', i);
    if (semi == std::string_view::npos || semi - i > 12) return std::nullopt;
    const std::string_view entity = text.substr(i + 1, semi - i - 1);
    i = semi;
    if (const auto named = kNamed.find(entity); named != kNamed.end()) {
      out.push_back(named->second);
    } else if (entity.size() > 1 && entity.front() == '#') {
      const std::optional<std::uint32_t> c = CharRef(entity.substr(1));
      if (!c) return std::nullopt;
      codec::AppendUtf8(&out, *c);
    } else {
      return std::nullopt;
    }
  }
  return out;
}

bool XmlCarries(std::string_view raw) {
  for (const char c : raw) {
    if (static_cast<unsigned char>(c) < 0x20 && c != '\t' && c != '\n' &&
        c != '\r') {
      return false;
    }
  }
  return codec::IsValidUtf8(raw) &&
         raw.find("\xEF\xBF\xBE") == std::string_view::npos &&
         raw.find("\xEF\xBF\xBF") == std::string_view::npos;
}

// A CR as a reference, so that a reader's line-end normalisation keeps it.
std::string EscapeXml(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (const char c : text) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      case '\r':
        out += "&#13;";
        break;
      default:
        // XML 1.0 has no other C0 control characters: they are dropped.
        if (static_cast<unsigned char>(c) >= 0x20 || c == '\t' || c == '\n') {
          out.push_back(c);
        }
    }
  }
  return out;
}

}  // namespace fencepost::s3
