#!/usr/bin/python3
"""boto3 (Debian's 1.26) addressing fencepost's S3 front door
virtual-hosted style, as a client behind a wildcard DNS name does:
Config(s3={"addressing_style": "virtual"}) and the endpoint
http://localhost:PORT, so every request is for fencepost.localhost:PORT and
signed with that Host. Nothing here resolves fencepost.localhost (glibc
without nss-myhostname does not), so a before-send hook hands each request,
signed as it is, to 127.0.0.1:PORT with its Host kept; presigned URLs are
sent the same way. The door serves --s3-listen-domain localhost.

    s3_hosted.py PORT ACCESS_KEY_ID SECRET

On orders/6: the split-brain story (33, 34, then 33 refused) with
put_object, a listing, get_object, then presigned GET and PUT (a stale
token refused, a fresh one taken). Prints what it saw; an error it did not
expect ends it with a traceback (exit 1).
"""

import re
import sys
import urllib.error
import urllib.parse
import urllib.request

import boto3
import botocore.config
import botocore.exceptions

port, key_id, secret = sys.argv[1:4]
hosts = set()


def to_loopback(url, headers):
    """`url` sent to 127.0.0.1:PORT, its Host in `headers`."""
    parts = urllib.parse.urlsplit(url)
    headers["Host"] = parts.netloc
    hosts.add(parts.hostname)
    return parts._replace(netloc="127.0.0.1:" + port).geturl()


def before_send(request, **_):
    request.url = to_loopback(request.url, request.headers)


def client(token=None):
    s3 = boto3.client(
        "s3", endpoint_url="http://localhost:" + port, region_name="us-east-1",
        aws_access_key_id=key_id, aws_secret_access_key=secret,
        config=botocore.config.Config(
            s3={"addressing_style": "virtual"}, signature_version="s3v4",
            retries={"total_max_attempts": 1}))
    if token is not None:
        s3.meta.events.register(
            "before-sign.s3.PutObject",
            lambda request, **_: request.headers.__setitem__(
                "Fencing-Token", str(token)))
    s3.meta.events.register("before-send.s3", before_send)
    return s3


def send(url, method="GET", body=None, headers=None):
    """A presigned URL's answer: (status, S3 code or body, Fencing-Token)."""
    headers = dict(headers or {})
    request = urllib.request.Request(to_loopback(url, headers), data=body,
                                     method=method, headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=30) as answer:
            return answer.status, answer.read(), answer.headers["Fencing-Token"]
    except urllib.error.HTTPError as e:
        code = re.search(r"<Code>(.*)</Code>", e.read().decode()).group(1)
        return e.code, code, e.headers["Fencing-Token"]


a, b = client(33), client(34)
a.put_object(Bucket="fencepost", Key="orders/6", Body=b"A: pending")
b.put_object(Bucket="fencepost", Key="orders/6", Body=b"B: shipped")
try:
    a.put_object(Bucket="fencepost", Key="orders/6", Body=b"A: cancelled")
except botocore.exceptions.ClientError as e:
    print("put 33:", e.response["Error"]["Code"])
listed = b.list_objects_v2(Bucket="fencepost")
print("listed:", [o["Key"] for o in listed.get("Contents", [])])
got = b.get_object(Bucket="fencepost", Key="orders/6")
print("get:", got["Body"].read(), got["Metadata"])

s3 = client()
get_url = s3.generate_presigned_url(
    "get_object", ExpiresIn=60, Params={"Bucket": "fencepost", "Key": "orders/6"})
print("presigned get:", urllib.parse.urlsplit(get_url).hostname,
      send(get_url)[:2])


def presigned_put(token, body):
    url = s3.generate_presigned_url(
        "put_object", ExpiresIn=60,
        Params={"Bucket": "fencepost", "Key": "orders/6",
                "Metadata": {"fencing-token": str(token)}})
    return send(url, "PUT", body, {"x-amz-meta-fencing-token": str(token)})


print("presigned put 33:", presigned_put(33, b"A: cancelled"))
print("presigned put 35:", presigned_put(35, b"B: delivered")[:2])
print("hosts:", sorted(hosts))
