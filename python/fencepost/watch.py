"""Following ``GET /v1/watch``: the Server-Sent Events stream of the
changes under a prefix, reconnecting with Last-Event-ID."""

from __future__ import annotations

import http.client
import json
import socket
import threading
import urllib.parse
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, Optional

from fencepost._http import Port, collect_headers
from fencepost.errors import Problem, problem_from_response


@dataclass(frozen=True)
class Event:
    """One event of the stream. ``kind`` is ``fence``, ``lease``,
    ``rejection`` or ``reset``; ``data`` its JSON object (tokens as ints).
    After a ``reset`` the watcher missed changes: read the state again
    (``Client.fences(prefix)``) before going on."""
    kind: str
    id: Optional[int]
    data: dict[str, Any] = field(default_factory=dict)


class Watch:
    """An iterator over the events under a prefix, in commit order.

    When the stream ends or breaks (a restart, a network fault), or stays
    silent for ``idle_timeout`` seconds (the server sends a comment every
    15 s), it is opened again with the id of the last event yielded as
    ``Last-Event-ID``, after the server's ``retry`` delay (1 s): the server
    then sends the events missed meanwhile, or ``reset`` first when it no
    longer holds them. It retries for as long as it is iterated; an answer
    that will not change (400 for a bad prefix, 401) is raised as its
    Problem. ``close()`` (from any thread) ends the iteration.

    ``reconnects`` counts the streams opened again.
    """

    def __init__(self, port: Port, prefix: str, *,
                 last_event_id: Optional[int], idle_timeout: float) -> None:
        self._port = port
        self._target = "/v1/watch?prefix=" + urllib.parse.quote(
            prefix.encode("utf-8"), safe="")
        self.last_event_id = last_event_id
        self.reconnects = 0
        self._idle_timeout = idle_timeout
        self._retry = 1.0
        self._closed = threading.Event()
        self._lock = threading.Lock()
        self._conn: Optional[http.client.HTTPConnection] = None
        self._answer: Optional[http.client.HTTPResponse] = None
        self._opened = False

    def __iter__(self) -> Iterator[Event]:
        return self

    def __enter__(self) -> "Watch":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def connect(self) -> bool:
        """Opens the stream now rather than at the first ``next``: events
        committed after it returned True are seen. False when the server
        could not be reached (iterating retries)."""
        if self._answer is None and not self._closed.is_set():
            self._open()
        return self._answer is not None

    def close(self) -> None:
        """Ends the iteration (a blocked ``next`` returns StopIteration)."""
        self._closed.set()
        with self._lock:
            conn = self._conn
        if conn is not None and conn.sock is not None:
            try:
                conn.sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def __next__(self) -> Event:
        while not self._closed.is_set():
            if self._answer is None and not self._open():
                self._closed.wait(self._retry)
                continue
            event = self._read_event()
            if event is not None:
                return event
            self._drop()
            if not self._closed.is_set():
                self._closed.wait(self._retry)
        self._drop()
        raise StopIteration

    def _open(self) -> bool:
        conn = self._port.connect(self._idle_timeout)
        with self._lock:
            if self._closed.is_set():
                return False
            self._conn = conn
        fields = {"Accept": "text/event-stream"}
        if self.last_event_id is not None:
            fields["Last-Event-ID"] = str(self.last_event_id)
        try:
            conn.request("GET", self._target, headers=self._port.headers(fields))
            answer = conn.getresponse()
        except (OSError, http.client.HTTPException):
            self._drop()
            return False
        if answer.status != 200:
            body = answer.read()
            self._drop()
            problem = problem_from_response(answer.status, body,
                                            collect_headers(answer.msg))
            if _final(problem):
                raise problem
            return False
        if self._opened:
            self.reconnects += 1
        self._opened = True
        self._answer = answer
        return True

    def _read_event(self) -> Optional[Event]:
        """The next event, or None when the stream ended, broke or idled."""
        assert self._answer is not None
        kind, event_id = "message", None
        data: list[str] = []
        while True:
            try:
                raw = self._answer.readline()
            except (OSError, http.client.HTTPException, ValueError):
                return None
            if not raw:
                return None
            line = raw.decode("utf-8", "replace").rstrip("\r\n")
            if line == "":
                if not data and event_id is None and kind == "message":
                    continue
                return self._dispatch(kind, event_id, data)
            if line.startswith(":"):
                continue
            name, _, value = line.partition(":")
            value = value[1:] if value.startswith(" ") else value
            if name == "event":
                kind = value
            elif name == "data":
                data.append(value)
            elif name == "id" and value.isdigit():
                event_id = int(value)
            elif name == "retry" and value.isdigit():
                self._retry = min(int(value), 30000) / 1000

    def _dispatch(self, kind: str, event_id: Optional[int], data: list[str]
                  ) -> Event:
        if event_id is not None:
            self.last_event_id = event_id
        document: dict[str, Any] = {}
        try:
            parsed = json.loads("\n".join(data)) if data else {}
            if isinstance(parsed, dict):
                document = parsed
        except ValueError:
            document = {"data": "\n".join(data)}
        return Event(kind, event_id, document)

    def _drop(self) -> None:
        with self._lock:
            conn, self._conn = self._conn, None
        self._answer = None
        if conn is not None:
            conn.close()


def _final(problem: Problem) -> bool:
    """An answer that asking again will not change."""
    return 400 <= problem.status < 500 and problem.status not in (408, 429)
