"""Fenced side effects (SPEC "Fenced side effects") through the real binary
with --effect-target: Client.effect, the `fencepost effect` command, and
what `lease run` hands its command for one. The target is a small HTTP
server of the test's own that counts the calls per Idempotency-Key."""

from __future__ import annotations

import json
import socket
import subprocess
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Optional

import pytest
from conftest import Server, binary

import fencepost

FENCE = "orders/leader"


class Target:
    """The effect target: answers every POST, PUT, PATCH and DELETE with a
    JSON echo of the call ({"key", "count", "method", "path", "body",
    "token", "content_type"}), 200 unless the path says otherwise:
    /status/N answers N, /problem answers 409 with problem+json of
    fencepost's own types, /hold waits until ``release`` is set (``arrived``
    is set when it starts waiting)."""

    def __init__(self) -> None:
        self.counts: dict[str, int] = {}
        self.calls: list[dict[str, Any]] = []
        self.lock = threading.Lock()
        self.arrived = threading.Event()
        self.release = threading.Event()
        target = self

        class Handler(BaseHTTPRequestHandler):
            def answer(self) -> None:
                body = self.rfile.read(int(self.headers.get(
                    "Content-Length") or 0))
                key = self.headers.get("Idempotency-Key", "")
                with target.lock:
                    target.counts[key] = target.counts.get(key, 0) + 1
                    call = {"key": key, "count": target.counts[key],
                            "method": self.command, "path": self.path,
                            "body": body.decode("utf-8", "replace"),
                            "token": self.headers.get("Fencing-Token"),
                            "content_type": self.headers.get("Content-Type")}
                    target.calls.append(call)
                status, kind = 200, "application/json"
                answer = json.dumps(call).encode()
                if self.path.startswith("/hold"):
                    target.arrived.set()
                    target.release.wait(20)
                if self.path.startswith("/status/"):
                    status = int(self.path.split("/")[2].split("?")[0])
                if self.path.startswith("/problem"):
                    status, kind = 409, "application/problem+json"
                    answer = (b'{"type":"urn:fencepost:problem:stale-token",'
                              b'"status":409,"current_token":99}')
                try:
                    self.send_response(status)
                    self.send_header("Content-Type", kind)
                    self.send_header("Content-Length", str(len(answer)))
                    self.end_headers()
                    self.wfile.write(answer)
                except OSError:
                    pass  # fencepost gave up on a held call

            do_POST = do_PUT = do_PATCH = do_DELETE = answer

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever,
                                       daemon=True)
        self.thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def count(self, key: str) -> int:
        with self.lock:
            return self.counts.get(key, 0)

    def close(self) -> None:
        self.release.set()
        self.server.shutdown()
        self.server.server_close()


def refused_url() -> str:
    """An http:// URL on 127.0.0.1 where nothing listens."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{s.getsockname()[1]}"


@pytest.fixture
def target() -> Iterator[Target]:
    t = Target()
    try:
        yield t
    finally:
        t.close()


@pytest.fixture
def server(start_server: "type[Server]", target: Target) -> Server:
    return start_server(  # type: ignore[call-arg]
        "--effect-target", f"pay={target.url}",
        "--effect-target", f"gone={refused_url()}",
        "--upstream-timeout", "2")


@pytest.fixture
def client(server: Server) -> Iterator[fencepost.Client]:
    with server.client(timeout=10.0) as c:
        yield c


def test_sent_once_then_replayed(client: fencepost.Client,
                                 target: Target) -> None:
    first = client.effect("pay", "charges", b'{"amount": 100}', token=7,
                          fence_key=FENCE, idempotency_key="order-1",
                          content_type="application/json",
                          query={"currency": "EUR"})
    assert first.status == 200 and first.ok and not first.replayed
    assert first.content_type == "application/json"
    call = first.json()
    assert call == {"key": "order-1", "count": 1, "method": "POST",
                    "path": "/charges?currency=EUR",
                    "body": '{"amount": 100}', "token": "7",
                    "content_type": "application/json"}
    again = client.effect("pay", "charges", b'{"amount": 100}', token=7,
                          fence_key=FENCE, idempotency_key="order-1",
                          content_type="application/json",
                          query={"currency": "EUR"})
    assert again.replayed and again.status == 200
    assert again.body == first.body
    assert target.count("order-1") == 1
    # The call raised the fence as a write does.
    assert client.fence(FENCE).token == 7


def test_every_method_and_a_path_of_any_text(client: fencepost.Client,
                                             target: Target) -> None:
    for method in fencepost.EFFECT_METHODS:
        result = client.effect("pay", "/a b/ä", method=method, token=1,
                               fence_key=FENCE,
                               idempotency_key=f"m-{method}")
        assert result.json()["method"] == method
        assert result.json()["path"] == "/a%20b/%C3%A4"
        assert result.json()["body"] == ""


def test_a_key_used_for_another_request_is_refused(
        client: fencepost.Client, target: Target) -> None:
    client.effect("pay", "charges", b"100", token=3, fence_key=FENCE,
                  idempotency_key="k")
    for other in (dict(body=b"200"), dict(path="refunds"),
                  dict(method="PUT"), dict(query="x=1"),
                  dict(fence_key="orders/other")):
        call: dict[str, Any] = dict(path="charges", body=b"100",
                                    fence_key=FENCE)
        call.update(other)
        with pytest.raises(fencepost.IdempotencyKeyReused) as e:
            client.effect("pay", token=3, idempotency_key="k", **call)
        assert e.value.status == 422, other
    assert target.count("k") == 1


def test_a_stale_token_sends_nothing(client: fencepost.Client,
                                     target: Target) -> None:
    client.bump(FENCE, token=10)
    with pytest.raises(fencepost.StaleToken) as e:
        client.effect("pay", "charges", b"x", token=9, fence_key=FENCE,
                      idempotency_key="late")
    assert e.value.current_token == 10
    assert target.count("late") == 0
    # A new holder's call goes, and a replaced one's repeat of an answered
    # call is refused too: the token is decided first.
    assert client.effect("pay", token=10, fence_key=FENCE,
                         idempotency_key="new").status == 200
    client.bump(FENCE, token=11)
    with pytest.raises(fencepost.StaleToken):
        client.effect("pay", token=10, fence_key=FENCE,
                      idempotency_key="new")
    assert target.count("late") == 0 and target.count("new") == 1


def test_the_targets_own_answers_are_results_not_exceptions(
        client: fencepost.Client, target: Target) -> None:
    # problem+json of fencepost's own types from the target: still the
    # target's answer (it carries Effect-Replayed).
    problem = client.effect("pay", "problem", token=1, fence_key=FENCE,
                            idempotency_key="p")
    assert problem.status == 409 and not problem.ok and not problem.replayed
    assert problem.content_type == "application/problem+json"
    assert problem.json()["current_token"] == 99
    assert client.effect("pay", "problem", token=1, fence_key=FENCE,
                         idempotency_key="p").replayed
    failed = client.effect("pay", "status/500", token=1, fence_key=FENCE,
                           idempotency_key="s")
    assert failed.status == 500 and not failed.replayed
    assert target.count("p") == 1 and target.count("s") == 1


def test_fenceposts_own_refusals(server: Server,
                                 client: fencepost.Client) -> None:
    with pytest.raises(fencepost.NotFound):
        client.effect("nosuch", token=1, fence_key=FENCE,
                      idempotency_key="n")
    with pytest.raises(fencepost.BadKey):
        client.effect("pay", token=1, fence_key="a//b", idempotency_key="n")
    for missing in ("Fence-Key", "Idempotency-Key"):
        fields = {"Fencing-Token": "1", "Fence-Key": FENCE,
                  "Idempotency-Key": "n"}
        del fields[missing]
        answer = client.send("data", "POST", "/v1/effects/pay", fields, b"")
        problem = fencepost.problem_from_response(answer.status, answer.body)
        assert isinstance(problem, fencepost.MissingEffectHeader), missing
        assert answer.status == 428
    answer = client.send("data", "POST", "/v1/effects/pay",
                         {"Fence-Key": FENCE, "Idempotency-Key": "n"}, b"")
    assert isinstance(fencepost.problem_from_response(
        answer.status, answer.body), fencepost.MissingToken)
    # Refused before anything is sent.
    for bad in (dict(target="a/b"), dict(target=""),
                dict(method="GET"), dict(idempotency_key="has space"),
                dict(idempotency_key=""), dict(fence_key="a\nb")):
        call: dict[str, Any] = dict(target="pay", method="POST",
                                    idempotency_key="n", fence_key=FENCE)
        call.update(bad)
        with pytest.raises(ValueError):
            client.effect(call.pop("target"), token=1, **call)


def test_an_unreachable_target_is_not_sent_and_may_be_sent_again(
        client: fencepost.Client) -> None:
    for _ in range(2):
        with pytest.raises(fencepost.UpstreamFailed) as e:
            client.effect("gone", token=1, fence_key=FENCE,
                          idempotency_key="g")
        assert e.value.status == 502


def test_a_call_in_flight_and_one_whose_outcome_is_unknown(
        client: fencepost.Client, target: Target) -> None:
    results: list[Any] = []

    def first() -> None:
        try:
            results.append(client.effect("pay", "hold", token=1,
                                         fence_key=FENCE,
                                         idempotency_key="h"))
        except fencepost.FencepostError as e:
            results.append(e)

    thread = threading.Thread(target=first)
    thread.start()
    assert target.arrived.wait(10)
    with pytest.raises(fencepost.EffectInProgress):
        client.effect("pay", "hold", token=1, fence_key=FENCE,
                      idempotency_key="h")
    thread.join(20)
    # --upstream-timeout 2 passed with the target holding the call: sent,
    # no answer: 504 now and 409 effect-outcome-unknown from then on.
    assert len(results) == 1
    assert isinstance(results[0], fencepost.UpstreamOutcomeUnknown), results
    target.release.set()
    with pytest.raises(fencepost.EffectOutcomeUnknown) as e:
        client.effect("pay", "hold", token=1, fence_key=FENCE,
                      idempotency_key="h")
    assert e.value.target == "pay" and e.value.idempotency_key == "h"
    assert e.value.state == "unknown"
    assert target.count("h") == 1


def test_a_server_without_the_target_name_is_not_taken_for_an_answer(
        start_server: "type[Server]") -> None:
    plain = start_server()  # type: ignore[call-arg]
    with plain.client() as c:
        with pytest.raises(fencepost.Problem):
            c.effect("pay", token=1, fence_key=FENCE, idempotency_key="x")
        with pytest.raises(fencepost.BadResponse):
            c.effect("pay", method="PUT", token=1, fence_key=FENCE,
                     idempotency_key="x")


# -- the command ------------------------------------------------------


def run(server: Server, *args: str, stdin: bytes = b"",
        env: Optional[dict[str, str]] = None
        ) -> subprocess.CompletedProcess[bytes]:
    environment = server.env()
    environment.update(env or {})
    return subprocess.run([binary(), "effect", *args], input=stdin,
                          env=environment, capture_output=True, timeout=60)


def test_the_command_sends_once_and_says_when_it_replays(
        server: Server, target: Target, tmp_path: Any) -> None:
    env = {"FENCING_TOKEN": "5", "FENCEPOST_FENCE": FENCE}
    done = run(server, "pay/charges?x=1", "--idempotency-key", "c1",
               "--content-type", "text/plain", "-", stdin=b"hello", env=env)
    assert done.returncode == 0, done.stderr
    call = json.loads(done.stdout)
    assert call["path"] == "/charges?x=1" and call["body"] == "hello"
    assert call["token"] == "5" and call["content_type"] == "text/plain"
    assert b"Effect-Replayed" not in done.stderr
    again = run(server, "pay/charges?x=1", "--idempotency-key", "c1",
                "--content-type", "text/plain", "-", stdin=b"hello", env=env)
    assert again.returncode == 0, again.stderr
    assert again.stdout == done.stdout
    assert b"Effect-Replayed: true" in again.stderr
    assert target.count("c1") == 1
    # From a file, with flags instead of the environment; no FILE: no body.
    body = tmp_path / "body"
    body.write_bytes(b"from a file")
    done = run(server, "pay", "--token", "5", "--fence-key", FENCE,
               "--idempotency-key", "c2", "--method", "PUT", str(body))
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["body"] == "from a file"
    assert json.loads(done.stdout)["method"] == "PUT"
    done = run(server, "pay", "--idempotency-key", "c3", stdin=b"ignored",
               env=env)
    assert done.returncode == 0 and json.loads(done.stdout)["body"] == ""


def test_the_commands_exit_statuses(server: Server, target: Target) -> None:
    env = {"FENCING_TOKEN": "5", "FENCEPOST_FENCE": FENCE}
    # The target's 4xx is 1, its 5xx 3; its body is printed either way.
    done = run(server, "pay/status/404", "--idempotency-key", "t4", env=env)
    assert done.returncode == 1 and json.loads(done.stdout)["key"] == "t4"
    done = run(server, "pay/status/503", "--idempotency-key", "t5", env=env)
    assert done.returncode == 3 and json.loads(done.stdout)["key"] == "t5"
    # fencepost's refusals: a reused key 1, a stale token 1.
    done = run(server, "pay", "--idempotency-key", "t4", env=env)
    assert done.returncode == 1 and b"idempotency-key-reused" in done.stdout
    done = run(server, "pay", "--idempotency-key", "t6", "--token", "4",
               env=env)
    assert done.returncode == 1 and b"stale-token" in done.stdout
    assert target.count("t6") == 0
    # Unreachable target 3, unknown NAME 1.
    done = run(server, "gone", "--idempotency-key", "t7", env=env)
    assert done.returncode == 3, done.stderr
    done = run(server, "nosuch", "--idempotency-key", "t8", env=env)
    assert done.returncode == 1, done.stderr
    # Usage errors: 2, nothing sent.
    for args in (["pay"], ["pay", "--idempotency-key", "u", "--method", "GET"],
                 ["bad name", "--idempotency-key", "u"],
                 ["pay", "--idempotency-key", "u", "a", "b"]):
        done = run(server, *args, env=env)
        assert done.returncode == 2, (args, done.stderr)
    for unset in ("FENCING_TOKEN", "FENCEPOST_FENCE"):
        partial = dict(env)
        del partial[unset]
        done = run(server, "pay", "--idempotency-key", "u", env=partial)
        assert done.returncode == 2 and unset.encode() in done.stderr
    assert target.count("u") == 0
    # fencepost unreachable: 3.
    done = run(server, "pay", "--idempotency-key", "u", env=dict(
        env, FENCEPOST_DATA=refused_url()))
    assert done.returncode == 3, done.stderr


def test_lease_run_hands_its_command_what_an_effect_needs(
        server: Server, target: Target) -> None:
    env = {k: v for k, v in server.env().items()
           if k != "FENCEPOST_DATA"}
    done = subprocess.run(
        [binary(), "lease", "run", FENCE, "--ttl", "10s",
         "--data", server.data_url, "--",
         "sh", "-c", 'echo "$FENCEPOST_FENCE $FENCEPOST_DATA" >&2; '
         'exec "$0" effect pay/from-lease --idempotency-key l1',
         binary()],
        env=env, capture_output=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert f"{FENCE} {server.data_url}".encode() in done.stderr
    call = json.loads(done.stdout)
    assert call["path"] == "/from-lease" and call["key"] == "l1"
    with server.client() as c:
        assert call["token"] == str(c.lease(FENCE).token)
    assert target.count("l1") == 1


def test_answers_are_kept_for_the_retention_unknown_outcomes_until_forgotten(
        start_server: "type[Server]", target: Target) -> None:
    server = start_server(  # type: ignore[call-arg]
        "--effect-target", f"pay={target.url}", "--effect-retention", "1s",
        "--upstream-timeout", "1", "--upstream-settle", "0.1")
    with server.client(timeout=10.0) as client:
        client.effect("pay", token=1, fence_key=FENCE, idempotency_key="old")
        with pytest.raises(fencepost.UpstreamOutcomeUnknown):
            client.effect("pay", "hold", token=1, fence_key=FENCE,
                          idempotency_key="held")
        target.release.set()
        time.sleep(0.2)  # the unknown outcome held the fence for 0.1 s
        # The answered call is replayed until the sweep (every second here)
        # removes it once it is a second old; then it is a new call.
        deadline = time.monotonic() + 10
        while client.effect("pay", token=1, fence_key=FENCE,
                            idempotency_key="old").replayed:
            assert time.monotonic() < deadline, "never removed"
            time.sleep(0.2)
        assert target.count("old") == 2
        # The unknown outcome outlived it: still refused, never sent again.
        with pytest.raises(fencepost.EffectOutcomeUnknown):
            client.effect("pay", "hold", token=1, fence_key=FENCE,
                          idempotency_key="held")
        assert target.count("held") == 1


def test_observe_mode_never_sends_a_stale_or_tokenless_call(
        start_server: "type[Server]", target: Target) -> None:
    server = start_server(  # type: ignore[call-arg]
        "--effect-target", f"pay={target.url}", "--mode", "observe")
    with server.client(timeout=10.0) as client:
        client.bump(FENCE, token=5)
        with pytest.raises(fencepost.StaleToken):
            client.effect("pay", token=4, fence_key=FENCE,
                          idempotency_key="stale")
        answer = client.send("data", "POST", "/v1/effects/pay", {
            "Fence-Key": FENCE, "Idempotency-Key": "tokenless"}, b"", None)
        assert answer.status == 428
        assert target.count("stale") == 0 and target.count("tokenless") == 0


def test_no_dot_segment_leaves_the_targets_base_path(
        client: fencepost.Client, target: Target) -> None:
    # --effect-target pay=URL reaches URL's path and below, never above it
    # (a target's base path is how an operator narrows what may be called).
    for rest in ("/../admin", "/a/..", "/./x", "/%2e%2E/admin", "/.%2E",
                 "/a/%2e"):
        answer = client.send("data", "POST", "/v1/effects/pay" + rest, {
            "Fencing-Token": "1", "Fence-Key": FENCE,
            "Idempotency-Key": "dots"}, b"", None)
        assert answer.status == 400, rest
    assert target.count("dots") == 0


def test_the_calls_of_a_fence_go_in_its_turn(
        start_server: "type[Server]", target: Target) -> None:
    # A replaced leader's slow call is not overtaken by its successor's: the
    # successor's waits for its outcome, so the target runs them in order,
    # and an unknown outcome holds the fence closed for the settle time.
    server = start_server(  # type: ignore[call-arg]
        "--effect-target", f"pay={target.url}", "--upstream-timeout", "1",
        "--upstream-settle", "1")
    with server.client(timeout=10.0) as client:
        errors: list[Exception] = []

        def slow() -> None:
            try:
                client.effect("pay", "hold", token=7, fence_key=FENCE,
                              idempotency_key="A")
            except fencepost.FencepostError as e:
                errors.append(e)

        thread = threading.Thread(target=slow)
        thread.start()
        assert target.arrived.wait(10)
        started = time.monotonic()
        with pytest.raises(fencepost.FenceHeld) as held:
            client.effect("pay", token=8, fence_key=FENCE,
                          idempotency_key="B")
        # B waited for A's outcome (unknown after the 1 s timeout), then was
        # refused while A may still land.
        assert time.monotonic() - started >= 0.5
        assert held.value.status == 503
        thread.join(10)
        assert len(errors) == 1
        assert isinstance(errors[0], fencepost.UpstreamOutcomeUnknown)
        assert target.count("B") == 0
        target.release.set()
        time.sleep(1.2)  # the settle time
        assert client.effect("pay", token=8, fence_key=FENCE,
                             idempotency_key="B").status == 200
        assert [c["key"] for c in target.calls] == ["A", "B"]


def test_a_stale_token_is_refused_first_even_while_its_key_is_in_flight(
        client: fencepost.Client, target: Target) -> None:
    done = threading.Event()

    def first() -> None:
        try:
            client.effect("pay", "hold", token=7, fence_key=FENCE,
                          idempotency_key="F")
        except fencepost.FencepostError:
            pass
        done.set()

    threading.Thread(target=first, daemon=True).start()
    assert target.arrived.wait(10)
    client.bump(FENCE, token=10)
    for body in (b"", b"another"):
        with pytest.raises(fencepost.StaleToken):
            client.effect("pay", "hold", body, token=3, fence_key=FENCE,
                          idempotency_key="F")
    target.release.set()
    assert done.wait(10)


def test_forgetting_a_record_never_moves_the_fence(
        client: fencepost.Client, target: Target) -> None:
    client.effect("pay", token=8, fence_key=FENCE, idempotency_key="G")
    forgot = client.send("admin", "DELETE", "/v1/effects/pay/G",
                         {"Fencing-Token": "1000"}, None, None)
    assert forgot.status == 204
    assert client.fence(FENCE).token == 8
    assert client.effect("pay", token=8, fence_key=FENCE,
                         idempotency_key="G2").status == 200
