#include "client/documents.h"

#include "client/json.h"

namespace fencepost::client {
namespace {

std::optional<std::string> StringMember(const Json& object,
                                        std::string_view name) {
  const Json* member = object.Find(name);
  if (member == nullptr || member->AsString() == nullptr) return std::nullopt;
  return *member->AsString();
}

std::optional<std::uint64_t> Uint64Member(const Json& object,
                                          std::string_view name) {
  const Json* member = object.Find(name);
  return member == nullptr ? std::nullopt : member->AsUint64();
}

std::optional<std::int64_t> Int64Member(const Json& object,
                                        std::string_view name) {
  const Json* member = object.Find(name);
  return member == nullptr ? std::nullopt : member->AsInt64();
}

std::optional<Json> ParseObject(std::string_view body) {
  std::optional<Json> json = Json::Parse(body);
  if (!json || json->kind() != Json::Kind::kObject) return std::nullopt;
  return json;
}

}  // namespace

std::string_view Problem::slug() const {
  std::string_view t = type;
  const auto at = t.find_last_of(":/");
  return at == std::string_view::npos ? t : t.substr(at + 1);
}

std::optional<Lease> ParseLease(std::string_view body) {
  const std::optional<Json> json = ParseObject(body);
  if (!json) return std::nullopt;
  Lease lease;
  std::optional<std::string> name = StringMember(*json, "name");
  std::optional<std::uint64_t> token = Uint64Member(*json, "token");
  const Json* holder = json->Find("holder");
  if (!name || !token || holder == nullptr) return std::nullopt;
  if (holder->AsString() != nullptr) {
    lease.holder = *holder->AsString();
  } else if (!holder->is_null()) {
    return std::nullopt;
  }
  lease.name = std::move(*name);
  lease.token = *token;
  lease.ttl_ms = Int64Member(*json, "ttl_ms").value_or(0);
  lease.expires_in_ms = Int64Member(*json, "expires_in_ms").value_or(0);
  lease.acquired_at = StringMember(*json, "acquired_at").value_or("");
  lease.renewed_at = StringMember(*json, "renewed_at").value_or("");
  lease.transitions = Uint64Member(*json, "transitions").value_or(0);
  return lease;
}

std::optional<Fence> ParseFence(std::string_view body) {
  const std::optional<Json> json = ParseObject(body);
  if (!json) return std::nullopt;
  std::optional<std::string> name = StringMember(*json, "fence");
  const std::optional<std::uint64_t> token = Uint64Member(*json, "token");
  if (!name || !token) return std::nullopt;
  return Fence{std::move(*name), *token,
               StringMember(*json, "updated_at").value_or("")};
}

std::optional<Problem> ParseProblem(std::string_view body) {
  const std::optional<Json> json = ParseObject(body);
  if (!json) return std::nullopt;
  std::optional<std::string> type = StringMember(*json, "type");
  if (!type) return std::nullopt;
  Problem problem;
  problem.type = std::move(*type);
  problem.title = StringMember(*json, "title").value_or("");
  problem.detail = StringMember(*json, "detail").value_or("");
  const std::optional<std::int64_t> status = Int64Member(*json, "status");
  if (status && *status >= 100 && *status <= 999) {
    problem.status = static_cast<int>(*status);
  }
  problem.key = StringMember(*json, "key");
  problem.holder = StringMember(*json, "holder");
  problem.expires_in_ms = Int64Member(*json, "expires_in_ms");
  problem.current_token = Uint64Member(*json, "current_token");
  problem.presented_token = Uint64Member(*json, "presented_token");
  return problem;
}

std::optional<std::vector<BatchResult>> ParseBatchResults(
    std::string_view body) {
  const std::optional<Json> json = ParseObject(body);
  if (!json) return std::nullopt;
  const Json* results = json->Find("results");
  if (results == nullptr || results->kind() != Json::Kind::kArray) {
    return std::nullopt;
  }
  std::vector<BatchResult> out;
  out.reserve(results->items().size());
  for (const Json& item : results->items()) {
    std::optional<std::string> key = StringMember(item, "key");
    const std::optional<std::int64_t> status = Int64Member(item, "status");
    if (!key || !status || *status < 100 || *status > 999) return std::nullopt;
    out.push_back({std::move(*key), static_cast<int>(*status)});
  }
  return out;
}

}  // namespace fencepost::client
