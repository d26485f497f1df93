"""Client against the real binary: every method, every exception the
server can be made to answer here, and the mapping of every problem type."""

from __future__ import annotations

import http.client
import re
import socket
import subprocess
from pathlib import Path

import pytest

import fencepost
from conftest import REPO, Server


def test_put_get_delete_carry_etag_token_and_content_type(
        client: fencepost.Client) -> None:
    created = client.put("orders/1", "hello", token=5,
                         content_type="text/plain")
    assert (created.status, created.created, created.token) == (201, True, 5)
    assert created.etag and created.etag.startswith('"')
    value = client.get("orders/1")
    assert value.value == b"hello" and value.text() == "hello"
    assert (value.etag, value.token) == (created.etag, 5)
    assert value.content_type == "text/plain"
    replaced = client.put("orders/1", b"\x00\xff", token=6)
    assert (replaced.status, replaced.token) == (200, 6)
    assert replaced.etag != created.etag
    assert client.get("orders/1").content_type == "application/octet-stream"
    deleted = client.delete("orders/1", token=6)
    assert (deleted.status, deleted.token) == (204, 6)
    with pytest.raises(fencepost.NotFound) as missing:
        client.get("orders/1")
    assert missing.value.status == 404 and missing.value.key == "orders/1"
    assert client.fence("orders/1").token == 6  # the fence stays


def test_keys_are_percent_encoded_once(client: fencepost.Client) -> None:
    key = "dir/ä b&c?d#e%f+g"
    client.put(key, "x", token=1)
    assert client.get(key).value == b"x"
    assert [f.name for f in client.fences("dir/")] == [key]


def test_stale_token_names_the_current_token(client: fencepost.Client) -> None:
    client.put("k", "new", token=34)
    with pytest.raises(fencepost.StaleToken) as stale:
        client.put("k", "old", token=33)
    assert stale.value.current_token == 34
    assert stale.value.presented_token == 33
    assert stale.value.status == 409
    with pytest.raises(fencepost.StaleToken):
        client.delete("k", token=33)
    assert client.get("k").value == b"new"


def test_a_fenced_read_refuses_a_replaced_leader(
        client: fencepost.Client) -> None:
    client.put("read/k", "B's", token=8)
    with pytest.raises(fencepost.StaleToken) as stale:
        client.get("read/k", token=7)
    assert stale.value.current_token == 8
    assert stale.value.presented_token == 7
    assert client.get("read/k", token=8).value == b"B's"
    # At or above the fence the read is answered; the fence does not move.
    assert client.get("read/k", token=9).token == 8
    assert client.fence("read/k").token == 8
    assert client.get("read/k").value == b"B's"  # no token: open
    with pytest.raises(fencepost.StaleToken):
        client.get_if_changed("read/k", None, token=7)


def test_tokens_are_exact_uint64(client: fencepost.Client) -> None:
    top = fencepost.MAX_TOKEN
    client.put("big", "v", token=top - 1)
    assert client.get("big").token == top - 1
    assert client.bump("big", token=top).token == top
    assert client.fence("big").token == top
    with pytest.raises(fencepost.StaleToken) as stale:
        client.put("big", "v", token=top - 1)
    assert stale.value.current_token == top
    for bad in (-1, top + 1):
        with pytest.raises(ValueError):
            client.put("big", "v", token=bad)
    with pytest.raises(TypeError):
        client.put("big", "v", token="7")  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        client.put("big", "v", token=True)


def test_preconditions(client: fencepost.Client) -> None:
    first = client.put("c", "1", token=1, if_none_match=True)
    with pytest.raises(fencepost.PreconditionFailed) as exists:
        client.put("c", "2", token=1, if_none_match=True)
    assert exists.value.current_etag == first.etag
    second = client.put("c", "2", token=1, if_match=first.etag)
    with pytest.raises(fencepost.PreconditionFailed) as moved:
        client.put("c", "3", token=1, if_match=first.etag)
    assert moved.value.current_etag == second.etag
    with pytest.raises(fencepost.PreconditionFailed):
        client.delete("c", token=1, if_match=first.etag)
    client.put("c", "3", token=1, if_match="*")
    assert client.get_if_changed("c", client.get("c").etag) is None
    changed = client.get_if_changed("c", first.etag)
    assert changed is not None and changed.value == b"3"
    client.delete("c", token=1, if_match="*")
    with pytest.raises(fencepost.PreconditionFailed) as gone:
        client.put("c", "4", token=1, if_match="*")
    assert gone.value.current_etag is None
    # The token is checked first.
    client.put("c", "5", token=9)
    with pytest.raises(fencepost.StaleToken):
        client.put("c", "6", token=1, if_match='"nope"')


def test_batch(client: fencepost.Client) -> None:
    client.put("b/2", "old", token=1)
    etag = client.get("b/2").etag
    result = client.batch([fencepost.PutOp("b/1", b"one"),
                           fencepost.PutOp("b/2", "two", if_match=etag),
                           fencepost.DeleteOp("b/3")], token=7)
    assert result.token == 7
    assert [(r.key, r.status) for r in result.results] == [
        ("b/1", 201), ("b/2", 200), ("b/3", 204)]
    assert result.results[0].etag == client.get("b/1").etag
    with pytest.raises(fencepost.StaleToken) as stale:
        client.batch([fencepost.PutOp("b/1", "x")], token=6)
    assert (stale.value.key, stale.value.current_token) == ("b/1", 7)
    with pytest.raises(fencepost.PreconditionFailed):
        client.batch([fencepost.PutOp("b/9", "x"),
                      fencepost.PutOp("b/1", "x", if_none_match=True)],
                     token=7)
    with pytest.raises(fencepost.NotFound):
        client.get("b/9")  # nothing of a refused batch applied
    with pytest.raises(fencepost.BadRequest):
        client.batch([fencepost.PutOp("b/1", "x"),
                      fencepost.DeleteOp("b/1")], token=7)


def test_fences_bump_and_listing(client: fencepost.Client) -> None:
    with pytest.raises(fencepost.NotFound):
        client.fence("f/none")
    names = [f"f/{i:02}" for i in range(5)]
    for i, name in enumerate(names):
        assert client.bump(name, token=10 + i).token == 10 + i
    with pytest.raises(fencepost.StaleToken) as stale:
        client.bump("f/04", token=3)
    assert stale.value.current_token == 14
    listed = list(client.fences("f/", page_size=2))
    assert [f.name for f in listed] == names
    assert [f.token for f in listed] == [10, 11, 12, 13, 14]
    assert list(client.fences("g/")) == []


def test_leases(client: fencepost.Client) -> None:
    with pytest.raises(fencepost.NotFound):
        client.lease("l/a")
    granted = client.acquire_lease("l/a", "alice", 5.0)
    assert (granted.holder, granted.ttl_ms, granted.transitions) == (
        "alice", 5000, 0)
    renewed = client.acquire_lease("l/a", "alice", 5.0)
    assert renewed.token == granted.token
    with pytest.raises(fencepost.LeaseHeld) as held:
        client.acquire_lease("l/a", "bob", 5.0)
    assert held.value.holder == "alice"
    assert held.value.expires_in_ms is not None
    assert 0 < held.value.expires_in_ms <= 5000
    with pytest.raises(fencepost.LeaseNotHeld):
        client.release_lease("l/a", "bob", granted.token)
    with pytest.raises(fencepost.LeaseNotHeld):
        client.release_lease("l/a", "alice", granted.token + 1)
    assert client.fence("l/a").token == granted.token
    client.release_lease("l/a", "alice", granted.token)
    assert client.lease("l/a").holder is None
    bob = client.acquire_lease("l/a", "bob", 5.0)
    assert bob.token == granted.token + 1 and bob.transitions == 1
    client.acquire_lease("l/b", "carol", 5.0)
    assert [lease.name for lease in client.leases("l/", page_size=1)] == [
        "l/a", "l/b"]
    with pytest.raises(fencepost.BadRequest):
        client.acquire_lease("l/c", "dave", 0.01)  # ttl_ms below 100


def test_wait_fence(client: fencepost.Client) -> None:
    client.bump("w", token=4)
    assert client.wait_fence("w", 3, timeout=5).token == 4  # type: ignore
    assert client.wait_fence("w", 4, timeout=0.2) is None
    assert client.wait_fence("w/none", 0, timeout=0.2) is None


def test_bad_key_missing_and_invalid_token_method(
        client: fencepost.Client) -> None:
    with pytest.raises(fencepost.BadKey):
        client.put("a//b", "x", token=1)
    with pytest.raises(fencepost.BadKey):
        client.get("a/../b")
    # A token the client would refuse to send goes out raw.
    with pytest.raises(fencepost.MissingToken) as missing:
        raise_for(client.send("data", "PUT", "/m", {}, b"x"))
    assert missing.value.status == 428
    with pytest.raises(fencepost.InvalidToken):
        raise_for(client.send("data", "PUT", "/m", {"Fencing-Token": "-1"},
                              b"x"))
    with pytest.raises(fencepost.MethodNotAllowed):
        raise_for(client.send("data", "PATCH", "/m", {"Fencing-Token": "1"},
                              b"x"))
    with pytest.raises(fencepost.HeadersTooLarge):
        raise_for(client.send("data", "GET", "/m", {"X-Big": "y" * 20000}))


def raise_for(response: fencepost.Response) -> None:
    if response.status >= 400:
        raise fencepost.problem_from_response(response.status, response.body,
                                              response.headers)


def test_body_too_large(start_server: type[Server]) -> None:
    server = start_server("--max-body", "1000")  # type: ignore[call-arg]
    with server.client() as client:
        with pytest.raises(fencepost.BodyTooLarge):
            client.put("big", b"x" * 5000, token=1)
        with pytest.raises(fencepost.BodyTooLarge):
            client.put("big", b"x" * 4_000_000, token=1)
        client.put("small", b"x" * 1000, token=1)  # the client still works


def test_unauthorized_without_the_bearer_token(
        start_server: type[Server], tmp_path: Path) -> None:
    token_file = tmp_path / "token"
    token_file.write_text("s3cret\n")
    server = start_server(  # type: ignore[call-arg]
        "--auth-token-file", str(token_file))
    with server.client() as anonymous:
        with pytest.raises(fencepost.Unauthorized) as refused:
            anonymous.put("k", "v", token=1)
        assert refused.value.status == 401
        with pytest.raises(fencepost.Unauthorized):
            anonymous.acquire_lease("l", "h", 1.0)
    with server.client(auth_token="s3cret") as client:
        client.put("k", "v", token=1)
        assert client.get("k").value == b"v"
        client.acquire_lease("l", "h", 1.0)


def test_tls_with_the_ca(start_server: type[Server], tmp_path: Path) -> None:
    key, cert = tmp_path / "key.pem", tmp_path / "cert.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt",
         "ec_paramgen_curve:P-256", "-nodes", "-days", "2", "-subj",
         "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1",
         "-keyout", str(key), "-out", str(cert)],
        check=True, capture_output=True)
    server = start_server(  # type: ignore[call-arg]
        "--tls-cert", str(cert), "--tls-key", str(key))
    assert server.data_url.startswith("https://")
    with server.client(tls_ca=str(cert)) as client:
        client.put("t", "v", token=1)
        assert client.get("t").value == b"v"
        assert client.fence("t").token == 1
    with server.client() as untrusting:
        with pytest.raises(fencepost.Unreachable, match="TLS|certificate"):
            untrusting.get("t")


def test_unreachable_and_timeouts(client: fencepost.Client) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    closed = fencepost.Client(f"http://127.0.0.1:{port}",
                              f"http://127.0.0.1:{port}", timeout=2)
    with pytest.raises(fencepost.Unreachable):
        closed.put("k", "v", token=1)
    with pytest.raises(fencepost.Unreachable):
        closed.lease("l")
    # A listener that never answers: the timeout.
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen()
        url = f"http://127.0.0.1:{silent.getsockname()[1]}"
        slow = fencepost.Client(url, url, timeout=0.3)
        with pytest.raises(fencepost.Unreachable, match="timed out"):
            slow.get("k")


def test_a_reset_while_connecting_is_unreachable(
        monkeypatch: pytest.MonkeyPatch) -> None:
    # A server closing its listener can reset a connection before it is
    # established: an Unreachable, as for a refused one (a lease's renewal
    # thread counts on it), not an error of the client itself.
    def reset(self: object) -> None:
        raise ConnectionResetError(104, "Connection reset by peer")
    monkeypatch.setattr(http.client.HTTPConnection, "connect", reset)
    client = fencepost.Client("http://127.0.0.1:1", "http://127.0.0.1:1",
                              timeout=2)
    with pytest.raises(fencepost.Unreachable, match="reset"):
        client.acquire_lease("l", "me", 1.0, timeout=1.0)
    with pytest.raises(fencepost.Unreachable, match="reset"):
        client.put("k", "v", token=1)


def test_bad_urls() -> None:
    for bad in ("ftp://h", "http://h/path", "http://u@h", "http://h:0",
                "http://h?x", "http://"):
        with pytest.raises(ValueError):
            fencepost.Client(bad, "http://127.0.0.1:1")


def test_kept_alive_connections_survive_server_closes(
        server: Server) -> None:
    with server.client() as client:
        client.put("ka", "1", token=1)
        server.restart()  # every kept-alive connection is closed
        assert client.get("ka").value == b"1"
        client.put("ka", "2", token=1)  # not an Unreachable
        assert client.get("ka").value == b"2"


SLUGS = re.compile(r'"([a-z-]+)",\s*\n?\s*"')


def test_every_problem_type_of_the_server_has_its_class() -> None:
    source = (REPO / "proxy" / "problem.cc").read_text()
    # The server's one list of problem types (kProblems).
    slugs = set(re.findall(
        r'\{ProblemType::k\w+,\s*http::status::\w+,\s*"([a-z-]+)"', source))
    assert "stale-token" in slugs and "store-error" in slugs
    assert len(slugs) == source.count("{ProblemType::k"), "a row not read"
    assert slugs <= set(fencepost.PROBLEM_CLASSES), (
        slugs - set(fencepost.PROBLEM_CLASSES))
    for slug, cls in fencepost.PROBLEM_CLASSES.items():
        body = (b'{"type":"urn:fencepost:problem:' + slug.encode() +
                b'","status":409,"detail":"x","key":"k","current_token":'
                b'18446744073709551615,"current_etag":"\\"3\\"",'
                b'"holder":"h","expires_in_ms":5}')
        problem = fencepost.problem_from_response(409, body,
                                                  {"retry-after": "2"})
        assert type(problem) is cls and problem.type.endswith(slug)
    stale = fencepost.problem_from_response(
        409, b'{"type":"urn:fencepost:problem:stale-token",'
             b'"current_token":18446744073709551615}')
    assert isinstance(stale, fencepost.StaleToken)
    assert stale.current_token == fencepost.MAX_TOKEN
    held = fencepost.problem_from_response(
        503, b'{"type":"urn:fencepost:problem:fence-held"}',
        {"retry-after": "2"})
    assert isinstance(held, fencepost.FenceHeld) and held.retry_after == 2


def test_the_class_comes_from_the_type_only() -> None:
    # A message naming another problem does not change the class.
    other = fencepost.problem_from_response(
        409, b'{"type":"urn:fencepost:problem:lease-held",'
             b'"title":"stale-token","detail":"stale token"}')
    assert type(other) is fencepost.LeaseHeld
    unknown = fencepost.problem_from_response(
        418, b'{"type":"urn:fencepost:problem:teapot"}')
    assert type(unknown) is fencepost.Problem and unknown.status == 418
    plain = fencepost.problem_from_response(502, b"<html>bad gateway</html>")
    assert type(plain) is fencepost.Problem and plain.type is None
