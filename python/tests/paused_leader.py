"""A Python leader that a test pauses (test_split_brain.py).

It leads with a LeaderElector and writes "A TOKEN" to KEY every INTERVAL.
When PAUSE_FILE appears it removes it, prints "pausing", stops itself
(SIGSTOP) as a GC pause would, between its check and its write, and once
continued sends that write with its token. With --log-checks, after each
check() that passed it prints when the check began and the lease's
held_until (both monotonic): a check that began after held_until must
have raised. Prints:
  elected TOKEN
  checked BEGAN HELD_UNTIL (with --log-checks)
  late-write refused CURRENT | late-write accepted
  lost TOKEN MONOTONIC REASON
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
    parser.add_argument("--ttl", type=float, required=True)
    parser.add_argument("--pause-file", required=True)
    parser.add_argument("--interval", type=float, default=0.05)
    parser.add_argument("--log-checks", action="store_true")
    args = parser.parse_args()
    client = fencepost.Client.from_env(timeout=5.0)

    def work(token: int) -> None:
        print(f"elected {token}", flush=True)
        while True:
            began = time.monotonic()
            elector.check()
            if args.log_checks:
                lease = elector.lease
                assert lease is not None
                print(f"checked {began!r} {lease.held_until!r}", flush=True)
            if os.path.exists(args.pause_file):
                os.remove(args.pause_file)
                print("pausing", flush=True)
                # Sent to this thread, the stop takes it before the kill
                # returns; sent to the process, another thread may take it
                # while this one goes on to send the write.
                signal.pthread_kill(threading.get_ident(), signal.SIGSTOP)
                try:
                    client.put(args.key, f"A {token}", token=token)
                    print("late-write accepted", flush=True)
                except fencepost.StaleToken as e:
                    print(f"late-write refused {e.current_token}", flush=True)
                    return
            client.put(args.key, f"A {token}", token=token)
            elector.sleep(args.interval)

    def lost(token: int, reason: str) -> None:
        print(f"lost {token} {time.monotonic()!r} {reason}", flush=True)
        elector.stop()

    elector = fencepost.LeaderElector(client, args.name, ttl=args.ttl,
                                      on_elected=work, on_lost=lost)
    elector.run()


if __name__ == "__main__":
    main()
