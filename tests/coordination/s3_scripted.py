#!/usr/bin/env python3
"""An S3 endpoint that answers what Ceph RGW cannot be made to answer on
demand: AWS's 503 SlowDown, 409 ConditionalRequestConflict and 500
InternalError, by the object key a PUT or DELETE names. Everything else a
real store decides is tested against RGW; this covers only those answers.

    s3_scripted.py            prints "PORT\n" once listening on 127.0.0.1

A PUT or DELETE of a key containing
    slowdown  -> 503 SlowDown, Retry-After: 3
    conflict  -> 409 ConditionalRequestConflict
    internal  -> 500 InternalError
    denied    -> 403 AccessDenied
    dropped   -> the first time: read whole, recorded, and the connection
                 closed without an answer (as a store that applied it and
                 then lost the connection); after that 503 SlowDown
and any other -> 200 with an ETag (PUT) or 204 (DELETE). HEAD of the bucket
is 200, of an object 404; GET of an object 404 NoSuchKey. Every error body is
S3's XML with a RequestId. GET /_writes answers the PUTs and DELETEs seen so
far, one "METHOD PATH" a line. Signatures are not checked. Stops on SIGTERM.
"""

import http.server
import sys
import threading

ERRORS = {
    "slowdown": (503, "SlowDown", "Please reduce your request rate."),
    "conflict": (409, "ConditionalRequestConflict",
                 "A conflicting conditional operation is in progress."),
    "internal": (500, "InternalError", "We encountered an internal error."),
    "denied": (403, "AccessDenied", "Access Denied"),
}

writes = []
lock = threading.Lock()
counter = [0]


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def answer(self, status, body=b"", headers=()):
        self.send_response(status)
        for name, value in headers:
            self.send_header(name, value)
        if status not in (204, 304):
            self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD" and status not in (204, 304):
            self.wfile.write(body)

    def error(self, status, code, message):
        with lock:
            counter[0] += 1
            request_id = "tx%08d-scripted" % counter[0]
        body = ("<?xml version=\"1.0\" encoding=\"UTF-8\"?><Error><Code>%s"
                "</Code><Message>%s</Message><RequestId>%s</RequestId>"
                "</Error>" % (code, message, request_id)).encode()
        headers = [("Content-Type", "application/xml"),
                   ("x-amz-request-id", request_id)]
        if status == 503:
            headers.append(("Retry-After", "3"))
        self.answer(status, body, headers)

    def body(self):
        length = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(length)

    def is_bucket(self):
        return self.path.strip("/").count("/") == 0

    def do_HEAD(self):
        self.answer(200 if self.is_bucket() else 404)

    def do_GET(self):
        if self.path == "/_writes":
            with lock:
                text = "".join(line + "\n" for line in writes).encode()
            self.answer(200, text, [("Content-Type", "text/plain")])
            return
        self.error(404, "NoSuchKey", "The specified key does not exist.")

    def write(self, ok_status):
        self.body()
        with lock:
            first = (self.command + " " + self.path) not in writes
            writes.append(self.command + " " + self.path)
        if "dropped" in self.path:
            if first:
                self.close_connection = True
                return
            self.error(*ERRORS["slowdown"])
            return
        for word, (status, code, message) in ERRORS.items():
            if word in self.path:
                self.error(status, code, message)
                return
        self.answer(ok_status, b"", [("ETag", "\"0123456789abcdef\"")])

    def do_PUT(self):
        self.write(200)

    def do_DELETE(self):
        self.write(204)


def main():
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    print(server.server_address[1], flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    return 0


if __name__ == "__main__":
    import signal
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    sys.exit(main())
