#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "http/message.h"
#include "s3/error.h"
#include "s3/location.h"
#include "sigv4/canonical.h"
#include "sigv4/signer.h"

namespace fencepost::storage {

// The s3:// backend's requests as http::Request and its answers as
// http::Response: a thin adapter over s3/ (s3/location.h says where a
// bucket and a key go, s3/request.h signs, s3/error.h reads an error
// answer), so that the backend, the front door's tests and `fencepost
// probe s3://` spell requests alike. No I/O.

// A request to `location` for `object_key` ("" for the bucket itself) with
// `method` and `body`: the target (s3::RequestTarget of s3::ObjectPath),
// Host (s3::Location::Host), Content-Length when there is a body or the
// method is PUT, and keep-alive. The caller adds its own fields, then signs.
// `query` (decoded) goes into the target, as s3::RequestTarget spells it.
http::Request S3Request(const s3::Location& location,
                        boost::beast::http::verb method,
                        std::string_view object_key, std::string body,
                        const std::vector<sigv4::QueryParam>& query = {});

// GET of the bucket with `store_query` (s3::ListQuery::store), built as
// S3Request builds the bucket's requests; sign it with SignS3.
http::Request S3ListRequest(const s3::Location& location,
                            const std::vector<sigv4::QueryParam>& store_query);

// Signs `request` (built by S3Request or S3ListRequest, with every field
// it will carry) with s3::SignRequest at `time`, the body's hex SHA-256
// signed: adds x-amz-date, x-amz-content-sha256, x-amz-security-token
// (with a session token) and Authorization. Every field then on the
// request is signed, except the hop-by-hop Connection; Host is signed as
// s3::Location::Host, which S3Request wrote. The target's path and query
// (after '?'), percent-decoded, are what is signed. `payload_hash`, when
// given, is signed instead of the body's (a body sent apart: its hex
// SHA-256 when known, else UNSIGNED-PAYLOAD).
void SignS3(http::Request& request, const s3::Location& location,
            const sigv4::Credentials& credentials,
            std::chrono::system_clock::time_point time,
            std::string_view payload_hash = {});

// What an S3 error answer says (s3::ReadErrorAnswer of its status, body
// and x-amz-request-id).
s3::ErrorAnswer ParseS3Error(const http::Response& response);

// The x-amz-meta-fencing-token of an answer, when it is a plain decimal
// token.
std::optional<std::uint64_t> TokenOfObject(const http::Response& response);

}  // namespace fencepost::storage
