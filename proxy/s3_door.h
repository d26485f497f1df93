#pragma once

// clang-format off
// Boost 1.74's awaitable.hpp uses std::exchange without including <utility>.
#include <utility>
// clang-format on

#include <chrono>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "http/coro.h"
#include "proxy/core.h"
#include "proxy/http_types.h"
#include "proxy/problem.h"
#include "proxy/s3_auth.h"
#include "proxy/s3_body.h"
#include "proxy/s3_uploads.h"
#include "sigv4/secret.h"
#include "sigv4/verifier.h"
#include "storage/s3_backend.h"

namespace fencepost::proxy {

// The S3 front door (--s3-listen; SPEC "S3 front door"): a data port that
// speaks S3 for the s3:// backend's bucket, so that S3 clients (boto3, the
// AWS CLI, s3cmd, rclone) are fenced by adding one header. The bucket is
// named in the path (/BUCKET/KEY), or in the Host (BUCKET.DOMAIN, with
// Options::domain; the path is then /KEY); the signature is checked on the
// request as received either way.
//
// Every request is authenticated first (S3Auth: SigV4 by one of
// fencepost's own clients, its body checked and decoded).
//
// PUT, GET (with Range), HEAD and DELETE of /BUCKET/KEY are calls of the
// typed core (proxy/core.h) that the data port's routes make too: the
// fence is the key's, as on the data port, and every rule, count, event and
// log line is the same; the door renders the outcome as S3 does. The token
// comes from Fencing-Token or x-amz-meta-fencing-token (a header, or a
// presigned URL's query parameter). A PUT's fields that S3
// keeps with an object (s3::KeptWithObject: Content-Encoding,
// Cache-Control, x-amz-meta-*,
// ...) go with it and come back on GET and HEAD; a field S3 would act on
// that the door does not (x-amz-tagging, an x-amz-acl other than private,
// a storage class other than STANDARD, object lock, server-side
// encryption, ...) is refused with S3's error for it (501 NotImplemented,
// 400 InvalidStorageClass or InvalidArgument), never dropped. GET
// /BUCKET?list-type=2 is the store's listing within PREFIX; HEAD /BUCKET
// and GET /BUCKET?location answer for the bucket; POST /BUCKET?delete
// (DeleteObjects, proxy/s3_delete_objects.h) is a fenced delete of each
// key. A PUT with x-amz-copy-source (CopyObject, within the bucket) is a
// fenced write of its destination that the store makes; multipart uploads
// (proxy/s3_uploads.h) are fenced at their completion. A PutObject or
// UploadPart body over --max-body streams to the store through its check
// (StreamsBody, CheckedBody), and a GET of a large object streams back.
// Every other operation (UploadPartCopy, ACLs, versions, other buckets'
// names aside) is 501 NotImplemented.
//
// Errors are S3's error XML (Code, Message, Resource, RequestId) with an
// x-amz-request-id: 409 StaleFencingToken (the current token in the message
// and in Fencing-Token), 428 MissingFencingToken, 412 PreconditionFailed,
// 400 InvalidArgument, 413 EntityTooLarge, 404 NoSuchKey and NoSuchBucket,
// 403 AccessDenied, InvalidAccessKeyId, SignatureDoesNotMatch and
// RequestTimeTooSkewed, 503 SlowDown (a fence held closed, or overload)
// and the store's own codes as the store answered them.
//
// Thread safety: Handle on the server's one io thread.
class S3Door {
 public:
  struct Options {
    std::string bucket;  // the s3:// backend's bucket name
    // --s3-listen-domain (lower case; empty: path style only): a request
    // whose Host is BUCKET.domain names BUCKET, its path the key.
    std::string domain;
    S3Auth::Options auth;
  };

  // `backend` lists the bucket; `core` answers object requests. Both must
  // outlive the door.
  S3Door(Options options, storage::S3Backend& backend, Core& core);

  // The response is complete (Content-Length set). `body`: the body of a
  // request whose header alone was read (StreamsBody), else null.
  // `answer_body`: where a large object's body goes, streamed from the
  // store (null: held whole).
  Awaitable<Response> Handle(
      const Request& request, const std::string& client,
      BodySource* body = nullptr,
      std::unique_ptr<BodySource>* answer_body = nullptr);

  // Whether a request's body is streamed to the store as it arrives (a
  // PUT: PutObject or UploadPart, up to 5 GiB) instead of read whole.
  static bool StreamsBody(const Request& request);

  // A problem found before the door saw the request (a body over
  // --max-body, bad framing) in S3's terms: its error XML.
  static Response InS3Terms(const Request& request, const Problem& problem);

 private:
  // `problem` as S3's error document, with Retry-After and the current
  // Fencing-Token where it has them.
  static Response ErrorOf(const Request& request, const Problem& problem,
                          const std::string& request_id);
  // A request for the bucket itself (HEAD, ?location, a listing).
  Awaitable<Response> Bucket(S3Call& call);
  // GET /BUCKET?list-type=2: the store's listing within PREFIX.
  Awaitable<Response> List(const Request& request,
                           const std::string& request_id);
  // An object request (PUT, GET, HEAD, DELETE of /BUCKET/KEY, and
  // CopyObject) as a call of the core, its outcome in S3's terms.
  Awaitable<Response> Object(S3Call& call);
  // A PUT or DELETE of an object (Object's writes), fenced by the core.
  Awaitable<Response> Write(S3Call& call);
  // A PUT's write: its body, or the copy it asks for.
  std::optional<Problem> WhatToWrite(S3Call& call, WriteCall& write);

  Options options_;
  S3Auth auth_;
  storage::S3Backend& backend_;
  Core& core_;
  S3Uploads uploads_;
};

}  // namespace fencepost::proxy
