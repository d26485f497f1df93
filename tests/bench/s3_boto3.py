#!/usr/bin/python3
"""The boto3 phase of the S3 benchmark (tests/bench/s3.sh).

One client, sequential put_object calls of SIZE bytes, so that the latency
of one call is clean: to RGW straight (direct, the store's credentials from
AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY) and through fencepost's S3
front door (door, a key of --s3-client-credentials: the first line of
DOOR_CREDENTIALS, "ACCESS_KEY_ID SECRET"). Both send the same object, the
token in Metadata={"fencing-token": TOKEN}. The calls alternate between the
two (direct then door, then door then direct, ...) so that a neighbour's
load hits both alike; the first WARMUP pairs are not counted. With
--door-tmpfs URL, a third target (door-tmpfs, the same client key) joins
the rotation: the front door of a fencepost whose fences live on tmpfs, a
diagnosis that splits the door's cost into the fence's fdatasync and the
rest.

  s3_boto3.py ENDPOINT DOOR_ENDPOINT BUCKET DOOR_CREDENTIALS [options]
  options: --count N (1000) --warmup N (50) --size B (4096) --keys K (64)
           --prefix P (boto3) --region R (us-east-1) --token T (1)
           --door-tmpfs URL

Prints one line per target:
  mode=boto3-direct count=N failed=N p50_ms=X p99_ms=X max_ms=X mean_ms=X
  all_ok=N all_failed=N
(all_*: the warm-up's calls too, what the servers counted); the first
failures on stderr. Each object is PREFIX-TARGET/kI. botocore's retries are
off: a failure is counted, not hidden. Exit status 0 even when calls failed:
the script checks the counts.
"""

import argparse
import os
import sys
import time

import boto3
import botocore.config
import botocore.exceptions


def parse():
    parser = argparse.ArgumentParser()
    parser.add_argument("endpoint")
    parser.add_argument("door_endpoint")
    parser.add_argument("bucket")
    parser.add_argument("door_credentials")
    parser.add_argument("--count", type=int, default=1000)
    parser.add_argument("--warmup", type=int, default=50)
    parser.add_argument("--size", type=int, default=4096)
    parser.add_argument("--keys", type=int, default=64)
    parser.add_argument("--prefix", default="boto3")
    parser.add_argument("--region", default="us-east-1")
    parser.add_argument("--token", default="1")
    parser.add_argument("--door-tmpfs")
    return parser.parse_args()


def client(endpoint, region, key_id, secret):
    config = botocore.config.Config(
        s3={"addressing_style": "path"},
        retries={"mode": "standard", "total_max_attempts": 1})
    return boto3.client("s3", endpoint_url=endpoint, region_name=region,
                        aws_access_key_id=key_id,
                        aws_secret_access_key=secret, config=config)


class Target:
    def __init__(self, name, s3):
        self.name = name
        self.s3 = s3
        self.latencies_ms = []
        self.failed = 0
        self.warmup_ok = 0
        self.warmup_failed = 0

    def put(self, args, body, n, counted):
        key = "%s-%s/k%d" % (args.prefix, self.name, n % args.keys)
        start = time.perf_counter()
        try:
            self.s3.put_object(Bucket=args.bucket, Key=key, Body=body,
                               ContentType="application/octet-stream",
                               Metadata={"fencing-token": args.token})
            ok = True
        except (botocore.exceptions.BotoCoreError,
                botocore.exceptions.ClientError) as e:
            ok = False
            if self.failed + self.warmup_failed < 5:
                print("s3_boto3: %s %s: %s" % (self.name, key, e),
                      file=sys.stderr)
        ms = (time.perf_counter() - start) * 1000
        if not counted:
            if ok:
                self.warmup_ok += 1
            else:
                self.warmup_failed += 1
        elif ok:
            self.latencies_ms.append(ms)
        else:
            self.failed += 1

    def line(self):
        lat = sorted(self.latencies_ms)

        def pct(p):
            return lat[min(len(lat) - 1, int(p * len(lat)))] if lat else 0.0

        mean = sum(lat) / len(lat) if lat else 0.0
        return ("mode=boto3-%s count=%d failed=%d p50_ms=%.3f p99_ms=%.3f "
                "max_ms=%.3f mean_ms=%.3f all_ok=%d all_failed=%d" % (
                    self.name, len(lat), self.failed, pct(0.50), pct(0.99),
                    lat[-1] if lat else 0.0, mean,
                    len(lat) + self.warmup_ok,
                    self.failed + self.warmup_failed))


def main():
    args = parse()
    with open(args.door_credentials) as f:
        door_key_id, door_secret = f.readline().split()
    direct = Target("direct", client(args.endpoint, args.region,
                                     os.environ["AWS_ACCESS_KEY_ID"],
                                     os.environ["AWS_SECRET_ACCESS_KEY"]))
    door = Target("door", client(args.door_endpoint, args.region, door_key_id,
                                 door_secret))
    targets = [direct, door]
    if args.door_tmpfs:
        targets.append(Target("door-tmpfs", client(args.door_tmpfs,
                                                   args.region, door_key_id,
                                                   door_secret)))
    body = b"v" * args.size
    for i in range(args.warmup + args.count):
        # Each target first, second, ... in turn.
        shift = i % len(targets)
        for target in targets[shift:] + targets[:shift]:
            target.put(args, body, i, i >= args.warmup)
    for target in targets:
        print(target.line())


if __name__ == "__main__":
    main()
