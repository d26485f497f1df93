#include "s3/error.h"

#include <utility>

namespace fencepost::s3 {

namespace {

// The text of the first <name>...</name> in `xml`, as ErrorDocument keeps
// it.
std::string Element(std::string_view xml, std::string_view name) {
  const std::string open = "<" + std::string(name) + ">";
  const std::string close = "</" + std::string(name) + ">";
  const std::size_t start = xml.find(open);
  if (start == std::string_view::npos) return "";
  const std::size_t from = start + open.size();
  const std::size_t end = xml.find(close, from);
  if (end == std::string_view::npos) return "";
  const std::string_view raw = xml.substr(from, end - from);
  static constexpr std::pair<std::string_view, char> kEntities[] = {
      {"&amp;", '&'},
      {"&lt;", '<'},
      {"&gt;", '>'},
      {"&quot;", '"'},
      {"&apos;", '\''}};
  std::string out;
  for (std::size_t i = 0; i < raw.size() && out.size() < kMaxErrorField;) {
    char c = raw[i++];
    if (c == '&') {
      for (const auto& [entity, decoded] : kEntities) {
        if (raw.substr(i - 1, entity.size()) == entity) {
          c = decoded;
          i += entity.size() - 1;
          break;
        }
      }
    }
    // A line break or tab in a message becomes a space; any other control
    // character is dropped.
    if (c == '\n' || c == '\r' || c == '\t') {
      out.push_back(' ');
    } else if (static_cast<unsigned char>(c) >= 0x20 && c != 0x7f) {
      out.push_back(c);
    }
  }
  return out;
}

// Keeps an answer's text on one line and short: a store's message is
// shown, but a page of it says nothing more.
std::string OneLine(std::string text) {
  for (char& c : text) {
    if (static_cast<unsigned char>(c) < ' ') c = ' ';
  }
  if (text.size() > 200) text = text.substr(0, 200) + "...";
  return text;
}

}  // namespace

std::optional<ErrorDocument> ParseErrorDocument(std::string_view body) {
  const std::size_t start = body.find("<Error>");
  const std::string_view error =
      start == std::string_view::npos ? body : body.substr(start);
  ErrorDocument document{Element(error, "Code"), Element(error, "Message"),
                         Element(error, "RequestId")};
  if (start == std::string_view::npos && document.code.empty() &&
      document.message.empty() && document.request_id.empty()) {
    return std::nullopt;
  }
  return document;
}

ErrorAnswer ReadErrorAnswer(unsigned status, std::string_view body,
                            std::string_view request_id_field) {
  ErrorAnswer answer;
  answer.status = status;
  if (std::optional<ErrorDocument> document = ParseErrorDocument(body)) {
    answer.code = std::move(document->code);
    answer.message = std::move(document->message);
    answer.request_id = std::move(document->request_id);
  }
  if (answer.request_id.empty()) answer.request_id = Bounded(request_id_field);
  return answer;
}

std::string DescribeAnswer(unsigned status, std::string_view body,
                           std::string_view request_id_field) {
  std::string out = "HTTP " + std::to_string(status);
  if (status / 100 == 2) return out;
  const ErrorAnswer error = ReadErrorAnswer(status, body, request_id_field);
  if (!error.code.empty()) out += " " + OneLine(error.code);
  if (!error.message.empty()) out += ": " + OneLine(error.message);
  if (!error.request_id.empty()) {
    out += ", request id " + OneLine(error.request_id);
  }
  return out;
}

std::string Bounded(std::string_view text) {
  std::string out;
  for (const char c : text.substr(0, kMaxErrorField)) {
    if (static_cast<unsigned char>(c) >= 0x20 && c != 0x7f) out.push_back(c);
  }
  return out;
}

}  // namespace fencepost::s3
