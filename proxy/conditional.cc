#include "proxy/conditional.h"

#include <vector>

#include "fence/value_fields.h"
#include "s3/object_fields.h"

namespace fencepost::proxy {

namespace http = boost::beast::http;

namespace {

bool Etagc(unsigned char c) { return c == 0x21 || (c >= 0x23 && c != 0x7f); }

bool Ows(char c) { return c == ' ' || c == '\t'; }

// One field's list into `tags` (with their W/ prefix kept as `weak`), or
// `*`; false when it is neither.
struct Tag {
  bool weak = false;
  std::string opaque;
};
bool ParseList(std::string_view field, bool* any, std::vector<Tag>* tags) {
  std::size_t at = 0;
  auto skip_ows = [&] {
    while (at < field.size() && Ows(field[at])) ++at;
  };
  skip_ows();
  if (at < field.size() && field[at] == '*' &&
      field.find_first_not_of(" \t", at + 1) == std::string_view::npos) {
    *any = true;
    return true;
  }
  while (at < field.size()) {
    if (field[at] == ',') {  // empty list elements are allowed
      ++at;
      skip_ows();
      continue;
    }
    Tag tag;
    if (field.substr(at, 2) == "W/") {
      tag.weak = true;
      at += 2;
    }
    if (at >= field.size() || field[at] != '"') return false;
    const std::size_t start = ++at;
    while (at < field.size() && Etagc(static_cast<unsigned char>(field[at]))) {
      ++at;
    }
    if (at >= field.size() || field[at] != '"') return false;
    tag.opaque = std::string(field.substr(start, at - start));
    ++at;
    tags->push_back(std::move(tag));
    skip_ows();
    if (at < field.size() && field[at] != ',') return false;
  }
  return true;
}

// Every field named `name` of `req` into its half of `out`.
std::string ReadField(const Request& req, http::field name, bool strong,
                      bool* present, bool* any, std::vector<std::string>* out) {
  std::vector<Tag> tags;
  const auto [first, last] = req.equal_range(name);
  for (auto it = first; it != last; ++it) {
    const auto& field = *it;
    *present = true;
    const std::size_t before = tags.size();
    const bool was_any = *any;
    // `*` alone, or at least one tag; never both across fields.
    if (!ParseList(field.value(), any, &tags) ||
        (*any == was_any && tags.size() == before) || (*any && !tags.empty())) {
      return std::string(http::to_string(name)) +
             " must be * or a list of quoted entity tags";
    }
  }
  for (Tag& tag : tags) {
    if (strong && tag.weak) continue;  // never matches strongly
    out->push_back(std::move(tag.opaque));
  }
  return {};
}

}  // namespace

std::string QuoteTag(std::string_view tag) {
  std::string out = "\"";
  out += tag;
  out += '"';
  return out;
}

std::string ReadPreconditions(const Request& req, fence::Precondition* out) {
  std::string error = ReadField(req, http::field::if_match, true,
                                &out->has_match, &out->match_any, &out->match);
  if (error.empty()) {
    error =
        ReadField(req, http::field::if_none_match, false, &out->has_none_match,
                  &out->none_match_any, &out->none_match);
  }
  return error;
}

bool BatchIfMatch(std::string_view value, fence::Precondition* out) {
  out->has_match = true;
  if (value == "*") {
    out->match_any = true;
    return true;
  }
  if (value.size() >= 2 && value.front() == '"' && value.back() == '"') {
    value = value.substr(1, value.size() - 2);
  }
  if (!fence::ValidTag(value)) return false;
  out->match.emplace_back(value);
  return true;
}

std::optional<Problem> ReadWriteFields(const Request& req, bool forwarded,
                                       WriteCall& call) {
  if (!forwarded) {
    if (std::string e = ReadPreconditions(req, &call.precondition);
        !e.empty()) {
      return Problem{ProblemType::kBadRequest, std::move(e), call.key};
    }
    const std::string_view type = req[http::field::content_type];
    if (!fence::ValidContentType(type)) {
      return Problem{ProblemType::kBadRequest,
                     "Content-Type must be at most " +
                         std::to_string(fence::kMaxContentTypeBytes) +
                         " bytes without control characters",
                     call.key};
    }
    if (call.kind == storage::WriteKind::kPut) call.content_type = type;
  }
  if (call.kind == storage::WriteKind::kPut) {
    for (const auto& field : req) {
      if (s3::KeptWithObject(field.name_string())) {
        call.object_fields.emplace_back(field.name_string(), field.value());
      }
    }
  }
  return std::nullopt;
}

}  // namespace fencepost::proxy
