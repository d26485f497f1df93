#include "proxy/s3_delete_objects.h"

#include <optional>
#include <string_view>

#include "fence/key.h"
#include "fence/token.h"
#include "proxy/problem.h"
#include "s3/xml.h"

namespace fencepost::proxy {

namespace http = boost::beast::http;

namespace {

DeleteObjectsDone RefusedWhole(unsigned status, std::string code,
                               std::string message) {
  DeleteObjectsDone done;
  done.status = status;
  done.code = std::move(code);
  done.message = std::move(message);
  return done;
}

DeleteObjectsDone MalformedDelete(std::string_view why) {
  return RefusedWhole(400, "MalformedXML",
                      "The XML you provided was not well-formed or did not "
                      "validate against our published schema: " +
                          std::string(why));
}

// An element's character data as a reader of XML gets it: line ends
// normalised (XML 1.0 2.11: CR LF and a lone CR are LF, before references
// are decoded, so that &#13; stays a CR), entities and references decoded.
// nullopt for markup, a bad reference, or what XML cannot carry (bytes
// that are not UTF-8, a control character, even as &#1;): no reader would
// take it, and its key could not be written back in the answer.
std::optional<std::string> XmlTextOf(std::string_view inner) {
  std::string lines;
  lines.reserve(inner.size());
  for (std::size_t i = 0; i < inner.size(); ++i) {
    if (inner[i] != '\r') {
      lines.push_back(inner[i]);
      continue;
    }
    lines.push_back('\n');
    if (i + 1 < inner.size() && inner[i + 1] == '\n') ++i;
  }
  std::optional<std::string> text = s3::DecodeXmlText(lines);
  if (!text || !s3::XmlCarries(*text)) return std::nullopt;
  return text;
}

// One <Object>'s key, or why the whole request is refused.
std::optional<DeleteObjectsDone> ReadDeleteObject(std::string_view inner,
                                                  std::string* key) {
  std::size_t at = 0;
  s3::XmlElement element;
  bool malformed = false;
  bool has_key = false;
  while (s3::NextElement(inner, &at, &element, &malformed)) {
    if (element.name == "Key" && !has_key) {
      std::optional<std::string> text = XmlTextOf(element.inner);
      if (!text)
        return MalformedDelete("a <Key> is not character data XML carries");
      *key = std::move(*text);
      has_key = true;
    } else if (element.name == "VersionId") {
      return RefusedWhole(501, "NotImplemented",
                          "fencepost keeps no object versions: DeleteObjects "
                          "takes keys without <VersionId>");
    } else if (element.name == "ETag" || element.name == "LastModifiedTime" ||
               element.name == "Size") {
      return RefusedWhole(
          501, "NotImplemented",
          "fencepost does not decide a DeleteObjects' conditions "
          "(<ETag>, <LastModifiedTime>, <Size>); a DeleteObject "
          "takes If-Match");
    } else {
      return MalformedDelete("an <Object> holds one <Key>");
    }
  }
  if (malformed || !has_key)
    return MalformedDelete("an <Object> holds one <Key>");
  return std::nullopt;
}

// The <Delete> document.
struct DeleteDocument {
  std::vector<std::string> keys;  // as given, repeats and all
  bool quiet = false;
};

// `body` read into `out`, or why the whole request is refused.
std::optional<DeleteObjectsDone> ReadDelete(std::string_view body,
                                            DeleteDocument* out) {
  std::size_t at = s3::SkipProlog(body);
  if (at == std::string_view::npos) {
    return MalformedDelete("the XML declaration or a comment does not end");
  }
  s3::XmlElement root;
  bool malformed = false;
  if (!s3::NextElement(body, &at, &root, &malformed) || root.name != "Delete") {
    return MalformedDelete("the document is not one <Delete>");
  }
  s3::XmlElement element;
  if (s3::NextElement(body, &at, &element, &malformed) || malformed) {
    return MalformedDelete("something follows </Delete>");
  }
  bool has_quiet = false;
  std::size_t in = 0;
  while (s3::NextElement(root.inner, &in, &element, &malformed)) {
    if (element.name == "Object") {
      if (out->keys.size() == kMaxDeleteKeys) {
        return MalformedDelete("a DeleteObjects names at most 1000 keys");
      }
      std::string key;
      if (std::optional<DeleteObjectsDone> refused =
              ReadDeleteObject(element.inner, &key)) {
        return refused;
      }
      out->keys.push_back(std::move(key));
    } else if (element.name == "Quiet" && !has_quiet) {
      has_quiet = true;
      const std::optional<std::string> text = XmlTextOf(element.inner);
      out->quiet = text == "true";
      if (!out->quiet && text != "false") {
        return MalformedDelete("<Quiet> is true or false");
      }
    } else {
      return MalformedDelete("a <Delete> holds <Object>s and one <Quiet>");
    }
  }
  if (malformed)
    return MalformedDelete("a <Delete> holds <Object>s and one <Quiet>");
  if (out->keys.empty())
    return MalformedDelete("a <Delete> names a key at least");
  return std::nullopt;
}

// The request's token into `token` (nullopt: none, which observe mode
// alone takes), or why the whole request is refused. `key` names the
// refusal (Core::RefuseToken counts it once, for the request).
std::optional<DeleteObjectsDone> ReadDeleteToken(
    Core& core, const Request& request, const std::string& key,
    std::optional<fence::Token>* token) {
  std::vector<std::string_view> sent;
  const auto [first, last] = request.equal_range("Fencing-Token");
  for (auto it = first; it != last; ++it) sent.push_back(it->value());
  if (sent.empty() && request.count("x-amz-meta-fencing-token") > 0) {
    return RefusedWhole(400, "InvalidArgument",
                        "a DeleteObjects carries no object metadata: send its "
                        "token as Fencing-Token");
  }
  fence::Token value = 0;
  const fence::TokenState state = fence::ReadTokenValues(sent, &value);
  if (std::optional<Problem> refused = core.RefuseToken(key, state, sent)) {
    return RefusedWhole(static_cast<unsigned>(StatusOf(refused->type)),
                        std::string(S3CodeOf(*refused)), refused->detail);
  }
  if (state == fence::TokenState::kOk) *token = value;
  return std::nullopt;
}

std::string DeleteErrorEntry(std::string_view key, std::string_view code,
                             std::string_view message) {
  return "<Error><Key>" + s3::EscapeXml(key) + "</Key><Code>" +
         s3::EscapeXml(code) + "</Code><Message>" + s3::EscapeXml(message) +
         "</Message></Error>";
}

}  // namespace

bool AsksDeleteObjects(const std::vector<sigv4::QueryParam>& params) {
  return params.size() == 1 && params[0].name == "delete" &&
         params[0].value.empty();
}

Awaitable<DeleteObjectsDone> DeleteObjects(Core& core, const Request& request,
                                           const std::string& body,
                                           const std::string& client) {
  if (request.count("x-amz-mfa") > 0 ||
      request.count("x-amz-bypass-governance-retention") > 0) {
    co_return RefusedWhole(
        501, "NotImplemented",
        "fencepost keeps no object versions or object locks: "
        "x-amz-mfa and x-amz-bypass-governance-retention are "
        "not supported");
  }
  DeleteDocument parsed;
  if (std::optional<DeleteObjectsDone> refused = ReadDelete(body, &parsed)) {
    co_return std::move(*refused);
  }
  std::optional<fence::Token> token;
  if (std::optional<DeleteObjectsDone> refused =
          ReadDeleteToken(core, request, parsed.keys.front(), &token)) {
    co_return std::move(*refused);
  }
  // Deleted keys first, then refused ones, each in the order given, as a
  // store lists them.
  std::string deleted;
  std::string errors;
  for (const std::string& key : parsed.keys) {
    if (const fence::KeyError e = fence::ValidateKey(key);
        e != fence::KeyError::kOk) {
      errors += DeleteErrorEntry(key, "InvalidArgument", fence::Describe(e));
      continue;
    }
    WriteCall call;
    call.kind = storage::WriteKind::kDelete;
    call.key = key;
    call.token = token;
    call.method = "DELETE";
    call.client = client;
    Written written = co_await core.Write(std::move(call));
    if (written.problem) {
      errors += DeleteErrorEntry(key, S3CodeOf(*written.problem),
                                 written.problem->detail);
    } else if (!parsed.quiet) {
      deleted += "<Deleted><Key>" + s3::EscapeXml(key) + "</Key></Deleted>";
    }
  }
  DeleteObjectsDone done;
  done.document =
      "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<DeleteResult "
      "xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\">" +
      deleted + errors + "</DeleteResult>\n";
  co_return done;
}

Response DeleteResultAnswer(const Request& request,
                            const DeleteObjectsDone& done,
                            const std::string& request_id) {
  Response res(http::status::ok, request.version());
  res.set(http::field::content_type, "application/xml");
  res.set("x-amz-request-id", request_id);
  res.body() = done.document;
  res.prepare_payload();
  return res;
}

}  // namespace fencepost::proxy
