"""watch(): the SSE stream, Last-Event-ID, reset, and a server restart
under a watching client."""

from __future__ import annotations

import queue
import threading
import time

import fencepost
from conftest import Server


def follow(watch: fencepost.Watch) -> "queue.Queue[fencepost.Event]":
    events: "queue.Queue[fencepost.Event]" = queue.Queue()

    def run() -> None:
        for event in watch:
            events.put(event)

    threading.Thread(target=run, daemon=True).start()
    return events


def next_of(events: "queue.Queue[fencepost.Event]", kind: str,
            timeout: float = 15) -> fencepost.Event:
    deadline = time.monotonic() + timeout
    while True:
        event = events.get(timeout=max(0.01, deadline - time.monotonic()))
        if event.kind == kind:
            return event


def wait_open(client: fencepost.Client, events: "queue.Queue[fencepost.Event]",
              key: str) -> None:
    """Writes to a marker fence until the watch sees it: then it is open."""
    token = 1
    while True:
        client.bump(key, token=token)
        try:
            event = events.get(timeout=0.2)
            assert event.kind == "fence" and event.data["fence"] == key
            return
        except queue.Empty:
            token += 1


def test_events_of_every_kind(client: fencepost.Client) -> None:
    with client.watch("w/") as watch:
        events = follow(watch)
        wait_open(client, events, "w/open")
        client.put("w/a", "x", token=2**64 - 2)
        fence = next_of(events, "fence")
        assert fence.data == {"fence": "w/a", "token": 2**64 - 2,
                              "updated_at": fence.data["updated_at"]}
        assert fence.id is not None and watch.last_event_id == fence.id
        try:
            client.put("w/a", "y", token=1)
        except fencepost.StaleToken:
            pass
        rejection = next_of(events, "rejection")
        assert (rejection.data["presented_token"],
                rejection.data["current_token"]) == (1, 2**64 - 2)
        assert rejection.id is not None and rejection.id > fence.id
        client.put("x/outside", "z", token=1)  # not under the prefix
        client.acquire_lease("w/l", "h", 1.0)
        lease = next_of(events, "lease")
        assert (lease.data["change"], lease.data["holder"]) == ("granted", "h")
    assert watch.reconnects == 0


def test_last_event_id_resumes_after_it(client: fencepost.Client) -> None:
    with client.watch("r/") as watch:
        events = follow(watch)
        wait_open(client, events, "r/open")
        client.bump("r/1", token=5)
        first = next_of(events, "fence")
    client.bump("r/2", token=6)
    client.bump("r/3", token=7)
    with client.watch("r/", last_event_id=first.id) as again:
        events = follow(again)
        names = [next_of(events, "fence").data["fence"] for _ in range(2)]
    assert names == ["r/2", "r/3"]


def test_a_server_restart_under_a_watching_client(server: Server) -> None:
    client = server.client()
    with client.watch("s/") as watch:
        events = follow(watch)
        wait_open(client, events, "s/open")
        client.bump("s/before", token=3)
        before = next_of(events, "fence")
        server.restart()
        # Back with the id from before the restart: the server no longer
        # holds what followed it, and says so first.
        reset = next_of(events, "reset")
        assert reset.id is not None and reset.id > 0
        client.bump("s/after", token=4)
        after = next_of(events, "fence")
        assert after.data["fence"] == "s/after" and after.data["token"] == 4
        assert watch.reconnects >= 1
        assert before.id is not None
    # close() ended the iteration.
    assert list(watch) == []
