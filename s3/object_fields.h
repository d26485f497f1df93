#pragma once

#include <string>
#include <string_view>

// What S3 keeps with an object besides its bytes, as the s3:// backend
// writes it and the front door takes it from its clients.
namespace fencepost::s3 {

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

// An ETag as S3 answers it ("\"9b2cf5...\"") without its quotes; a weak
// one's W/ kept. "" for none.
std::string UnquoteEtag(std::string_view etag);

}  // namespace fencepost::s3
