#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "sigv4/canonical.h"

namespace fencepost::s3 {

// ListObjectsV2 within PREFIX (SPEC "S3 front door"), as the s3:// backend
// answers the front door's listings: the client's query becomes the
// store's, and the store's ListBucketResult the client's, so that the
// client sees the keys under PREFIX as if they were the bucket's and
// nothing else. `key_prefix` is what every object key of the backend
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
struct ListQuery {
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
ListQuery ParseListQuery(std::string_view client_query,
                         std::string_view key_prefix);

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
                                          const ListQuery& query,
                                          std::string_view bucket,
                                          std::string* error,
                                          bool* needs_url_encoding = nullptr);

}  // namespace fencepost::s3
