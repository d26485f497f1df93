"""One of the processes racing for a lease (test_race.py).

Each term appends "TOKEN HOLDER" lines to the shared log key with
read-modify-write (If-Match) writes carrying the term's token, then resigns.
With --pause-once, in its first term it stops itself (SIGSTOP) between
reading the log and writing it, as a leader paused by GC would; the test
continues it after the lease ran out. --safety-margin is the elector's
(a negative one, for the test's negative control, puts the worker's
deadline past the server's expiry). Writes one line per event to OUT:
  elected TOKEN MONOTONIC
  write TOKEN
  stale TOKEN CURRENT
  end TOKEN MONOTONIC_END
"""

from __future__ import annotations

import argparse
import os
import signal
import threading
import time

import fencepost


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--name", required=True)
    parser.add_argument("--key", required=True)
    parser.add_argument("--out", required=True)
    parser.add_argument("--stop-file", required=True)
    parser.add_argument("--ttl", type=float, default=1.0)
    parser.add_argument("--writes", type=int, default=4)
    parser.add_argument("--pause-once", action="store_true")
    parser.add_argument("--safety-margin", type=float, default=None)
    args = parser.parse_args()
    client = fencepost.Client.from_env(timeout=5.0)
    out = open(args.out, "a", buffering=1)
    lock = threading.Lock()
    paused = not args.pause_once

    def log(line: str) -> None:
        with lock:
            out.write(line + "\n")

    elector: fencepost.LeaderElector

    def work(token: int) -> None:
        nonlocal paused
        log(f"elected {token} {time.monotonic()!r}")
        lease = elector.lease
        assert lease is not None
        try:
            done = 0
            while done < args.writes:
                elector.check()
                try:
                    current = client.get(args.key)
                    body, etag = current.value, current.etag
                except fencepost.NotFound:
                    body, etag = b"", None
                line = f"{token} {elector.holder}\n".encode()
                if not paused and done == 1:
                    paused = True
                    log("pausing")
                    # To this thread: it stops before the write is sent.
                    signal.pthread_kill(threading.get_ident(), signal.SIGSTOP)
                try:
                    if etag is None:
                        client.put(args.key, body + line, token=token,
                                   if_none_match=True)
                    else:
                        client.put(args.key, body + line, token=token,
                                   if_match=etag)
                except fencepost.PreconditionFailed:
                    continue
                except fencepost.StaleToken as e:
                    log(f"stale {token} {e.current_token}")
                    return
                log(f"write {token}")
                done += 1
                elector.sleep(0.01)
        finally:
            log(f"end {token} {min(time.monotonic(), lease.held_until)!r}")

    elector = fencepost.LeaderElector(
        client, args.name, ttl=args.ttl, on_elected=work,
        retry_period=args.ttl / 3, safety_margin=args.safety_margin)
    elector.start()
    while not os.path.exists(args.stop_file):
        time.sleep(0.05)
    elector.stop(timeout=10)
    out.close()


if __name__ == "__main__":
    main()
