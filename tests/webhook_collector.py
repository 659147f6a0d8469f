"""A webhook on loopback that keeps every POSTed body: the receiving end of the notice tests."""

from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, HTTPServer


def start_webhook() -> tuple[HTTPServer, list[bytes]]:
    """A started server (shut it down when done) and the list its POST bodies land in, in order."""
    bodies: list[bytes] = []

    class _Collector(BaseHTTPRequestHandler):
        def do_POST(self):  # noqa: N802 (http.server's name)
            bodies.append(self.rfile.read(int(self.headers["Content-Length"])))
            self.send_response(204)
            self.end_headers()

        def log_message(self, *args):
            pass

    server = HTTPServer(("127.0.0.1", 0), _Collector)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, bodies
