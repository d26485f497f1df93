#include "storage/etcd_records.h"

#include <algorithm>
#include <charconv>

#include "fence/value_fields.h"

namespace fencepost::storage::etcd {

std::string FormatFence(fence::Token token, std::int64_t updated_at_ns) {
  return std::to_string(token) + " " + std::to_string(updated_at_ns);
}

bool ParseFence(std::string_view text, fence::Token* token,
                std::int64_t* updated_at_ns) {
  const std::size_t space = text.find(' ');
  if (space == std::string_view::npos) return false;
  const auto a = std::from_chars(text.data(), text.data() + space, *token);
  const auto b = std::from_chars(text.data() + space + 1,
                                 text.data() + text.size(), *updated_at_ns);
  return a.ec == std::errc() && a.ptr == text.data() + space &&
         b.ec == std::errc() && b.ptr == text.data() + text.size();
}

std::string FormatHold(fence::Token token, std::int64_t deadline_ns,
                       std::string_view name, std::string_view holder) {
  return std::to_string(token) + " " + std::to_string(deadline_ns) + " " +
         std::to_string(name.size()) + "\n" + std::string(name) +
         std::string(holder);
}

bool ParseHold(std::string_view text, fence::Token* token,
               std::int64_t* deadline_ns, std::string* name,
               std::string* holder) {
  const std::size_t newline = text.find('\n');
  if (newline == std::string_view::npos) return false;
  const char* p = text.data();
  const char* end = text.data() + newline;
  std::size_t name_bytes = 0;
  auto a = std::from_chars(p, end, *token);
  if (a.ec != std::errc() || a.ptr == end || *a.ptr != ' ') return false;
  auto b = std::from_chars(a.ptr + 1, end, *deadline_ns);
  if (b.ec != std::errc() || b.ptr == end || *b.ptr != ' ') return false;
  auto c = std::from_chars(b.ptr + 1, end, name_bytes);
  if (c.ec != std::errc() || c.ptr != end) return false;
  const std::string_view rest = text.substr(newline + 1);
  if (name_bytes > rest.size()) return false;
  *name = std::string(rest.substr(0, name_bytes));
  *holder = std::string(rest.substr(name_bytes));
  return true;
}

std::string FormatLease(const fence::LeaseRecord& record, bool noticed) {
  return (noticed ? "n" : "-") + fence::EncodeLease(record);
}

bool ParseLease(std::string_view text, fence::LeaseRecord* record,
                bool* noticed) {
  if (text.empty() || (text[0] != '-' && text[0] != 'n')) return false;
  *noticed = text[0] == 'n';
  return fence::DecodeLease(text.substr(1), record);
}

std::string FormatValue(std::optional<fence::Token> token,
                        std::string_view content_type, std::string_view body) {
  content_type = content_type.substr(0, content_type.find_first_of("\r\n"));
  content_type = content_type.substr(0, fence::kMaxContentTypeBytes);
  std::string out = token ? std::to_string(*token) : std::string("-");
  if (!content_type.empty()) {
    out += ' ';
    out += content_type;
  }
  out += '\n';
  out += body;
  return out;
}

bool ParseValue(std::string_view text, std::optional<fence::Token>* token,
                std::string* content_type, std::string* body) {
  const std::size_t newline = text.find('\n');
  if (newline == std::string_view::npos) return false;
  std::string_view spelled = text.substr(0, newline);
  content_type->clear();
  if (const std::size_t space = spelled.find(' ');
      space != std::string_view::npos) {
    *content_type = std::string(spelled.substr(space + 1));
    spelled = spelled.substr(0, space);
    // Whoever can write to etcd could set anything: none goes into a header
    // that could end it early.
    if (!fence::ValidContentType(*content_type)) content_type->clear();
  }
  token->reset();
  if (spelled != "-") {
    fence::Token t = 0;
    const auto [end, ec] =
        std::from_chars(spelled.data(), spelled.data() + spelled.size(), t);
    if (ec != std::errc() || end != spelled.data() + spelled.size()) {
      return false;
    }
    *token = t;
  }
  *body = std::string(text.substr(newline + 1));
  return true;
}

std::string TagOf(std::int64_t mod_revision) {
  return std::to_string(mod_revision);
}

std::int64_t EtcdSeconds(std::uint64_t ttl_ms) {
  return static_cast<std::int64_t>(
      std::max<std::uint64_t>(1, (ttl_ms + 999) / 1000));
}

bool SeenOf(const Json& kv, Seen* seen) {
  std::string text;
  fence::Token token = 0;
  if (!BytesOf(kv, "value", &text) ||
      !ParseFence(text, &token, &seen->updated_at_ns)) {
    return false;
  }
  seen->token = token;
  seen->mod_revision = Int64Of(kv.Find("mod_revision"));
  return true;
}

bool HoldOf(const Json& kv, Hold* hold) {
  std::string text;
  if (!BytesOf(kv, "value", &text) ||
      !ParseHold(text, &hold->token, &hold->deadline_ns, &hold->name,
                 &hold->holder)) {
    return false;
  }
  hold->etcd_lease = Int64Of(kv.Find("lease"));
  return hold->etcd_lease > 0;
}

}  // namespace fencepost::storage::etcd
