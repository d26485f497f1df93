"""A leader loop: campaign for a lease, write with its token while leading,
stop the moment leadership is lost, campaign again.

    python3 examples/python/leader.py orders/leader orders/state --writes 5

FENCEPOST_DATA and FENCEPOST_ADMIN name the server (default 127.0.0.1:7400
and :7401). Every write carries the token: once another leader is elected,
a write of this one is refused (StaleToken) even if it has not noticed yet.
"""

from __future__ import annotations

import argparse
import socket

import fencepost


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("lease")
    parser.add_argument("key")
    parser.add_argument("--ttl", type=float, default=10.0)
    parser.add_argument("--writes", type=int, default=0,
                        help="resign after this many writes (0: never)")
    parser.add_argument("--period", type=float, default=1.0)
    args = parser.parse_args()

    client = fencepost.Client.from_env()
    elector = fencepost.LeaderElector(client, args.lease, ttl=args.ttl)
    with elector.leadership() as token:
        print(f"elected with token {token} as {elector.holder}", flush=True)
        n = 0
        while args.writes == 0 or n < args.writes:
            n += 1
            body = f"{socket.gethostname()} wrote {n} with token {token}"
            result = client.put(args.key, body, token=token)
            print(f"wrote {n}: fence at {result.token}", flush=True)
            elector.sleep(args.period)  # raises LeadershipLost when lost
    print("resigned", flush=True)


if __name__ == "__main__":
    try:
        main()
    except fencepost.LeadershipLost as lost:
        print(f"lost leadership: {lost.reason}", flush=True)
        raise SystemExit(75)
    except KeyboardInterrupt:
        raise SystemExit(130)
