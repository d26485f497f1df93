#pragma once

#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace fencepost::sigv4 {

// The canonical request of AWS Signature Version 4 ("Create a canonical
// request" in the IAM user guide; "Task 1" of the S3 API reference), shared
// by the signer and the verifier so that both spell a request alike.

// A query parameter, decoded (no percent-encoding left in it).
struct QueryParam {
  std::string name;
  std::string value;
};

// A header as it is sent or received: any case, untrimmed value.
struct Header {
  std::string name;
  std::string value;
};

// How the path becomes the canonical URI.
enum class PathStyle {
  // S3: `path` is the decoded path (the object key with its slashes),
  // encoded once, byte for byte, '/' kept; never normalised ("a//b/./c"
  // names its own object).
  kS3,
  // Every other service (the aws-sig-v4-test-suite): `path` as the request
  // spells it; dot segments removed and repeated slashes merged (RFC 3986
  // section 5.2.4), then encoded as kS3 does. A '%' already in the path is
  // encoded again ("%20" becomes "%2520"): AWS's double encoding.
  kNormalized,
};

// A request as SigV4 sees it.
struct Request {
  std::string method;  // "GET", "PUT", ...
  std::string path;    // see PathStyle; empty means "/"
  PathStyle path_style = PathStyle::kS3;
  std::vector<QueryParam> query;  // decoded, any order
  std::vector<Header> headers;    // exactly the headers to sign
  std::string payload_hash;       // hex SHA-256 of the body, or one of
                                  // signer.h's kUnsignedPayload, ...
};

// The canonical request's text and the signed-headers list it names.
struct CanonicalRequest {
  std::string text;
  std::string signed_headers;  // "host;range;x-amz-date"
};

// Percent-encodes every byte of `bytes` outside A-Z a-z 0-9 - . _ ~ as %XX
// with upper-case hex (AWS's UriEncode); '/' is kept when `keep_slash`.
std::string UriEncode(std::string_view bytes, bool keep_slash);

// The canonical URI of `path` (see PathStyle).
std::string CanonicalUri(std::string_view path, PathStyle style);

// Splits a raw query string ("a=1&b&c=%20") into decoded parameters; a
// parameter without '=' has an empty value, empty pieces ("a=1&&b") are
// skipped. nullopt on a malformed '%'.
std::optional<std::vector<QueryParam>> ParseQuery(std::string_view raw);

// name=value pairs, each side UriEncode'd ('/' encoded too), sorted by
// encoded name then encoded value, joined with '&' ("" when empty).
std::string CanonicalQuery(std::span<const QueryParam> params);

// A header value trimmed of surrounding whitespace, each run of spaces,
// tabs and line breaks inside it made one space.
std::string CanonicalHeaderValue(std::string_view value);

// The canonical headers block ("name:value\n" per name, names lower-cased
// and sorted, the values of repeated names joined with ',' in the order they
// came) and the signed-headers list, for exactly `headers`.
struct CanonicalHeaders {
  std::string text;
  std::string signed_headers;
};
CanonicalHeaders CanonicalizeHeaders(std::span<const Header> headers);

// The canonical request of `request`: method, canonical URI, canonical
// query, canonical headers, signed headers and payload hash, one per line.
CanonicalRequest Canonicalize(const Request& request);

// Whether `name` is `lower` (all lower case) but for the case of its ASCII
// letters: how header names are compared.
bool EqualsLowerCase(std::string_view name, std::string_view lower);

// `s` without the spaces and tabs around it.
std::string_view TrimSpaces(std::string_view s);

}  // namespace fencepost::sigv4
