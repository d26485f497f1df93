#pragma once

#include <chrono>
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "http/message.h"
#include "sigv4/signer.h"

namespace fencepost::storage {

// The requests of the s3:// backend, without any I/O: where a bucket and an
// object key go in the URL (path-style or virtual-hosted), the SigV4
// signature of each request, and what an S3 error answer says. Pure
// functions, so that the backend and its tests spell requests alike.

// One bucket on one S3 endpoint.
struct S3Bucket {
  std::string host;  // of the endpoint, without brackets
  std::string port;  // digits
  bool tls = false;
  std::string bucket;
  std::string region;
  // Virtual-hosted: the bucket in the host name (BUCKET.HOST); path-style:
  // the path's first segment (/BUCKET/KEY).
  bool virtual_hosted = false;
};

// The longest object key S3 takes, in bytes.
inline constexpr std::size_t kMaxObjectKeyBytes = 1024;

// The object key of `key` under `prefix` (s3://BUCKET/PREFIX's "/PREFIX",
// canonical, or ""): PREFIX decoded, '/', then the key's own bytes. A key is
// never normalised: its bytes are the object's name.
std::string ObjectKey(std::string_view prefix, std::string_view key);

// A request to `bucket` for `object_key` ("" for the bucket itself) with
// `method` and `body`: the target (every byte outside A-Z a-z 0-9 - . _ ~ /
// percent-encoded, as SigV4 encodes S3 paths), Host (":PORT" unless it is
// the scheme's default), Content-Length when there is a body or the method
// is PUT, and keep-alive. The caller adds its own fields, then signs.
http::Request S3Request(const S3Bucket& bucket, boost::beast::http::verb method,
                        std::string_view object_key, std::string body);

// Signs `request` (built by S3Request or S3ListRequest, with every field
// it will carry) with SigV4 for service s3 at `time`, the payload's hex
// SHA-256 signed: adds x-amz-date, x-amz-content-sha256,
// x-amz-security-token (with a session token) and Authorization. Every
// field then on the request is signed, except the hop-by-hop Connection;
// the target's query (after '?'), percent-decoded, is the canonical query.
void SignS3(http::Request& request, const S3Bucket& bucket,
            const sigv4::Credentials& credentials,
            std::chrono::system_clock::time_point time);

// Whether S3 keeps the request field `name` (any case) with the object a
// PutObject writes and answers it on GetObject and HeadObject:
// Content-Encoding, Cache-Control, Content-Disposition, Content-Language,
// Expires and user metadata (x-amz-meta-*), less x-amz-meta-fencing-token,
// which is fencepost's. Content-Type travels on its own.
bool KeptWithObject(std::string_view name);
// Whether the metadata field `lower_name` (lower case) is read as
// x-amz-meta-fencing-token by some store: that name, or it with '_' for
// '-' (a store may read them alike).
bool NamesFencingToken(std::string_view lower_name);

// A Content-Encoding value without its aws-chunked coding (SigV4's framing
// of the body, which S3 takes off and never stores); "" when nothing else
// is left.
std::string StoredContentEncoding(std::string_view value);

// What an S3 error answer says (its XML: <Error><Code>, <Message>,
// <RequestId>); the request id also from x-amz-request-id when the body
// has none. Empty strings for what is absent; each value at most 256 bytes,
// control characters dropped (they go into logs and problem documents).
struct S3Error {
  unsigned status = 0;
  std::string code;
  std::string message;
  std::string request_id;
};
S3Error ParseS3Error(const http::Response& response);

// An ETag as S3 answers it ("\"9b2cf5...\"") without its quotes; a weak
// one's W/ kept. "" for none.
std::string UnquoteEtag(std::string_view etag);

// The x-amz-meta-fencing-token of an answer, when it is a plain decimal
// token.
std::optional<std::uint64_t> TokenOfObject(const http::Response& response);

// ListObjectsV2 within PREFIX (SPEC "S3 front door"): the client's query
// becomes the store's, and the store's ListBucketResult the client's, so
// that the client sees the keys under PREFIX as if they were the bucket's
// and nothing else. `key_prefix` is what every object key of the backend
// starts with: ObjectKey(prefix, ""), "PREFIX/" or "".
//
// Continuation tokens are rewritten both ways. The token a store hands out
// is opaque to S3's contract but not to every store: Ceph RGW's is the next
// key itself, PREFIX included. So the client gets ClientContinuationToken:
// base64 of "k" + the store's token less "PREFIX/" when it starts with it,
// else of "t" + the store's token as it is (AWS's opaque ones). Nothing of
// PREFIX is shown, one spelling per token, and a token the client made up
// cannot widen the listing: the store's `prefix` is always PREFIX/ + the
// client's, whatever the token says.
//
// encoding-type=url (boto3 and the AWS CLI ask for it on every listing) is
// honoured by fencepost, not by the store: the store is asked for plain
// XML, whose entities are decoded, PREFIX stripped from the raw key, and
// the client's keys, prefixes, delimiter and start-after percent-encoded
// (every byte outside A-Z a-z 0-9 - . _ ~ /) before they are XML-escaped.
// So stripping compares raw bytes, never two spellings of one key.

// The client's ListObjectsV2 query, checked, and the store's.
struct S3ListQuery {
  // Why the client's query is refused (S3's 400 InvalidArgument), in S3's
  // words; empty when it is taken, and then the fields below are set.
  std::string error;
  // The store's query, decoded: list-type=2, prefix = PREFIX/ + the
  // client's, delimiter, max-keys (above 1000 made 1000, as S3 does),
  // continuation-token (the store's own, StoreContinuationToken),
  // start-after = PREFIX/ + the client's, fetch-owner.
  std::vector<sigv4::QueryParam> store;
  bool url_encoding = false;       // the client asked encoding-type=url
  std::string continuation_token;  // the client's, as it sent it; "" none
};

// Reads `client_query` (the raw query after '?', as the client sent it).
// Refused: a malformed '%', a parameter named twice, list-type other than
// 2, max-keys not a number from 0 to 2147483647, fetch-owner other than
// true or false, encoding-type other than url, a continuation token that
// is not one ClientContinuationToken wrote, and any parameter ListObjectsV2
// does not take. Skipped: X-Amz-* (a presigned request's authentication,
// checked by the caller) and x-id=ListObjectsV2 (some SDKs add it).
S3ListQuery ParseListQuery(std::string_view client_query,
                           std::string_view key_prefix);

// GET of the bucket with `store_query` (S3ListQuery::store), canonical,
// built as S3Request builds the bucket's requests; sign it with SignS3.
http::Request S3ListRequest(const S3Bucket& bucket,
                            const std::vector<sigv4::QueryParam>& store_query);

// The token the client gets for the store's `store_token`, and back; nullopt
// when `client_token` is not one ClientContinuationToken wrote.
std::string ClientContinuationToken(std::string_view store_token,
                                    std::string_view key_prefix);
std::optional<std::string> StoreContinuationToken(std::string_view client_token,
                                                  std::string_view key_prefix);

// The longest listing the store may answer (1000 keys of 1024 bytes each
// written as character references fit, with room to spare).
inline constexpr std::size_t kMaxListingBytes = 16u << 20;

// The client's ListBucketResult for the store's `store_xml`, answered to
// `query`: Name is `bucket`; every Key, Prefix (top-level and in
// CommonPrefixes) and StartAfter without `key_prefix`; ContinuationToken the
// client's, NextContinuationToken ClientContinuationToken's; Delimiter,
// MaxKeys and IsTruncated as the store said; KeyCount the entries kept;
// EncodingType url when the client asked for it. A Contents entry keeps
// its other children (ETag, Size, LastModified, StorageClass, Owner, ...)
// as the store wrote them; other top-level elements are dropped. An entry
// not under `key_prefix`, or naming PREFIX/ itself, is dropped: never shown.
// nullopt, with why in `*error`, when `store_xml` is not a ListBucketResult
// this reader takes: larger than kMaxListingBytes, not well-formed as far as
// it reads, an unknown entity, a Contents without a Key, or the store's own
// EncodingType (never asked for). Also nullopt, with `*needs_url_encoding`
// (when given) set true and the name percent-encoded in `*error`, when the
// client did not ask encoding-type=url and a key, common prefix, Prefix,
// Delimiter or StartAfter holds what XML 1.0 cannot carry (a C0 control
// character other than tab, LF and CR, or bytes that are not UTF-8):
// dropping or replacing it would show another name, and a character
// reference to it (&#1;) is not XML either; every client that meets such
// keys can ask for url encoding (boto3 and the AWS CLI always do).
std::optional<std::string> RewriteListing(std::string_view store_xml,
                                          std::string_view key_prefix,
                                          const S3ListQuery& query,
                                          std::string_view bucket,
                                          std::string* error,
                                          bool* needs_url_encoding = nullptr);

// `text` as XML character data or an attribute value: & < > " escaped, a
// CR as &#13; (which a reader's line-end normalisation keeps), the other
// C0 control characters but tab and newline dropped.
std::string EscapeXml(std::string_view text);

}  // namespace fencepost::storage
