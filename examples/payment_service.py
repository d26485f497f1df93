#!/usr/bin/env python3
"""A payment service for examples/payment_webhook.sh: it takes charges
(POST /charges, POST /slow-charges, which answers after 3 s) and counts
them by Idempotency-Key, so the example can show what reached it.

  payment_service.py PORT_FILE

It listens on an ephemeral port of 127.0.0.1 and writes the port to
PORT_FILE. GET /count?key=K answers how many charges came with key K.
"""

import http.server
import json
import sys
import threading
import time
import urllib.parse

counts: dict[str, int] = {}
lock = threading.Lock()


class Handler(http.server.BaseHTTPRequestHandler):
    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length", "0"))
        charge = json.loads(self.rfile.read(length) or b"{}")
        key = self.headers.get("Idempotency-Key", "")
        with lock:
            counts[key] = counts.get(key, 0) + 1
        if self.path.startswith("/slow-charges"):
            time.sleep(3)
        self.answer(201, {"id": "ch_" + key, "amount": charge.get("amount"),
                          "token": self.headers.get("Fencing-Token")})

    def do_GET(self) -> None:
        query = urllib.parse.parse_qs(urllib.parse.urlsplit(self.path).query)
        with lock:
            self.answer(200, {"count": counts.get(query["key"][0], 0)})

    def answer(self, status: int, document: dict[str, object]) -> None:
        body = json.dumps(document, separators=(",", ":")).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        try:
            self.wfile.write(body)
        except BrokenPipeError:
            pass  # the caller gave up waiting (the example's step 3)

    def log_message(self, *args: object) -> None:
        pass


server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
with open(sys.argv[1], "w") as port_file:
    port_file.write(str(server.server_address[1]))
server.serve_forever()
