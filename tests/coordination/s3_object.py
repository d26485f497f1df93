#!/usr/bin/python3
"""An independent S3 client for the tests' checks: Debian's boto3 (1.26).

Reads the store from the environment that tests/coordination/rgw.sh writes
(S3_ENDPOINT, S3_REGION, S3_BUCKET, AWS_ACCESS_KEY_ID,
AWS_SECRET_ACCESS_KEY); --endpoint URL sends to another endpoint (a relay in
front of the store). Path-style requests, one attempt each (no retries),
bounded by timeouts. Each command prints ONE JSON line and exits 0 when the
store answered (whatever its status), 1 when it did not (then "status" is 0
and "error" says why), 2 on a usage error.

  s3_object.py get KEY      {"status", "etag", "metadata", "content_type",
                             "content_length", "body_b64"}
  s3_object.py head KEY     the same without "body_b64"
  s3_object.py put KEY [--metadata NAME=VALUE]... [--content-type TYPE]
                   [--if-match TAG] [--if-none-match TAG]    (body: stdin)
                            {"status", "etag"}
  s3_object.py delete KEY [--if-match TAG]                   {"status"}
  s3_object.py list PREFIX  {"status", "keys": [...]} (every page)

An S3 error adds "error" (its code, e.g. "NoSuchKey", "PreconditionFailed")
and every answer "request_id". KEY is taken byte for byte as given (UTF-8,
spaces, '+', '%'). ETags are printed as the store sent them (quoted); a
precondition TAG is sent exactly as given (RGW 16.2 compares If-Match with
the ETag WITHOUT its quotes). Debian's boto3 has no IfMatch/IfNoneMatch
parameters: the headers are added just before signing.
"""

import argparse
import base64
import json
import os
import sys

import boto3
import botocore.config
import botocore.exceptions


def key_arg(text):
    # The bytes given on the command line, whatever the locale made of them.
    return os.fsencode(text).decode("utf-8")


def client(endpoint):
    config = botocore.config.Config(
        s3={"addressing_style": "path"},
        connect_timeout=5,
        read_timeout=30,
        retries={"total_max_attempts": 1},
    )
    return boto3.session.Session().client(
        "s3",
        endpoint_url=endpoint or os.environ["S3_ENDPOINT"],
        region_name=os.environ.get("S3_REGION", "us-east-1"),
        aws_access_key_id=os.environ["AWS_ACCESS_KEY_ID"],
        aws_secret_access_key=os.environ["AWS_SECRET_ACCESS_KEY"],
        config=config,
    )


def add_headers(s3, operation, headers):
    """Adds `headers` to the request of `operation` before it is signed."""
    headers = {k: v for k, v in headers.items() if v is not None}
    if not headers:
        return

    def before_sign(request, **_):
        for name, value in headers.items():
            request.headers[name] = value

    s3.meta.events.register("before-sign.s3." + operation, before_sign)


def answer(response, **fields):
    meta = response.get("ResponseMetadata", {})
    out = {"status": meta.get("HTTPStatusCode", 0)}
    request_id = meta.get("RequestId")
    if request_id:
        out["request_id"] = request_id
    out.update(fields)
    return out


def object_fields(response):
    return {
        "etag": response.get("ETag", ""),
        "metadata": response.get("Metadata", {}),
        "content_type": response.get("ContentType", ""),
        "content_length": response.get("ContentLength", 0),
    }


def run(args, s3, bucket):
    if args.command == "get":
        response = s3.get_object(Bucket=bucket, Key=args.key)
        body = response["Body"].read()
        return answer(response, **object_fields(response),
                      body_b64=base64.b64encode(body).decode("ascii"))
    if args.command == "head":
        response = s3.head_object(Bucket=bucket, Key=args.key)
        return answer(response, **object_fields(response))
    if args.command == "put":
        metadata = {}
        for item in args.metadata:
            name, sep, value = item.partition("=")
            if not sep:
                raise SystemExit(usage("--metadata takes NAME=VALUE"))
            metadata[name] = value
        add_headers(s3, "PutObject", {"If-Match": args.if_match,
                                      "If-None-Match": args.if_none_match})
        extra = {"ContentType": args.content_type} if args.content_type else {}
        response = s3.put_object(Bucket=bucket, Key=args.key,
                                 Body=sys.stdin.buffer.read(),
                                 Metadata=metadata, **extra)
        return answer(response, etag=response.get("ETag", ""))
    if args.command == "delete":
        add_headers(s3, "DeleteObject", {"If-Match": args.if_match})
        return answer(s3.delete_object(Bucket=bucket, Key=args.key))
    keys = []
    response = {}
    for page in s3.get_paginator("list_objects_v2").paginate(
            Bucket=bucket, Prefix=args.key):
        response = page
        keys.extend(item["Key"] for item in page.get("Contents", []))
    return answer(response, keys=keys)


def usage(message):
    print(json.dumps({"status": 0, "error": "usage: " + message}))
    return 2


def main():
    parser = argparse.ArgumentParser(add_help=True)
    parser.add_argument("command",
                        choices=["get", "head", "put", "delete", "list"])
    parser.add_argument("key", type=key_arg)
    parser.add_argument("--endpoint", default=None)
    parser.add_argument("--metadata", action="append", default=[])
    parser.add_argument("--content-type", default=None)
    parser.add_argument("--if-match", default=None)
    parser.add_argument("--if-none-match", default=None)
    args = parser.parse_args()
    s3 = client(args.endpoint)
    bucket = os.environ["S3_BUCKET"]
    try:
        out, code = run(args, s3, bucket), 0
    except botocore.exceptions.ClientError as e:
        out, code = answer(e.response), 0
        out["error"] = e.response.get("Error", {}).get("Code", "")
        if out["status"] == 404 and out["error"] in ("", "404"):
            out["error"] = "NotFound"  # HEAD: no body, so no code
    except (botocore.exceptions.BotoCoreError, OSError) as e:
        out, code = {"status": 0, "error": "%s: %s" % (type(e).__name__, e)}, 1
    print(json.dumps(out))
    return code


if __name__ == "__main__":
    sys.exit(main())
