"""A dashboard line printer: one line per fence, lease or rejection event
under PREFIX, following the stream across restarts.

    python3 examples/python/watch.py orders/ [--count N]
"""

from __future__ import annotations

import argparse

import fencepost


def line(event: fencepost.Event) -> str:
    d = event.data
    if event.kind == "fence":
        return f"fence     {d['fence']} -> token {d['token']}"
    if event.kind == "lease":
        return (f"lease     {d['name']} {d['change']} holder={d['holder']} "
                f"token {d['token']}")
    if event.kind == "rejection":
        return (f"rejected  {d['method']} {d['key']} token "
                f"{d['presented_token']} < {d['current_token']}")
    if event.kind == "reset":
        return "reset     (events were missed: read the fences again)"
    return f"{event.kind:<9} {d}"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("prefix", nargs="?", default="")
    parser.add_argument("--count", type=int, default=0,
                        help="exit after this many events (0: never)")
    args = parser.parse_args()
    client = fencepost.Client.from_env()
    with client.watch(args.prefix) as watch:
        watch.connect()
        print("watching", flush=True)
        for n, event in enumerate(watch, 1):
            print(line(event), flush=True)
            if n == args.count:
                break


if __name__ == "__main__":
    try:
        main()
    except KeyboardInterrupt:
        pass
