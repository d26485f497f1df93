"""A read-modify-write counter with If-Match: increments KEY N times, each
time reading the value and its ETag and writing value + 1 only if nobody
wrote in between (412 PreconditionFailed: read again and retry).

    python3 examples/python/counter.py counters/visits 100 --token 1

Run several at once: no increment is lost.
"""

from __future__ import annotations

import argparse
from typing import Optional

import fencepost


def increment(client: fencepost.Client, key: str, token: int) -> int:
    while True:
        etag: Optional[str]
        try:
            current = client.get(key)
            value, etag = int(current.text()), current.etag
        except fencepost.NotFound:
            value, etag = 0, None
        try:
            if etag is None:
                client.put(key, str(value + 1), token=token,
                           if_none_match=True)
            else:
                client.put(key, str(value + 1), token=token, if_match=etag)
            return value + 1
        except fencepost.PreconditionFailed:
            continue  # another writer came first: read again


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("key")
    parser.add_argument("times", type=int)
    parser.add_argument("--token", type=int, default=1)
    args = parser.parse_args()
    client = fencepost.Client.from_env()
    value = 0
    for _ in range(args.times):
        value = increment(client, args.key, args.token)
    print(f"{args.key} = {value}")


if __name__ == "__main__":
    main()
