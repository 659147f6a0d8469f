"""A webhook on loopback that keeps every body it accepted: the receiving end of the notice tests. It can also
answer the first POSTs with an error or a redirect, hang, or dribble its status line a byte at a time, as a webhook
that is down, moved or overloaded does."""

from __future__ import annotations

import socket
import threading
from collections.abc import Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class Webhook:
    """A started server: `delivered` holds the bodies it answered 204 to, in order; `posts` counts every POST,
    `gets` every GET (a redirect followed by the client arrives as one, and is answered 200)."""

    def __init__(
        self, port: int = 0, statuses: Sequence[int] = (), hang: bool = False, dribble_s: float | None = None
    ) -> None:
        self.delivered: list[bytes] = []
        self.posts = 0
        self.gets = 0
        errors = list(statuses)  # the answers to the first POSTs; every later one gets 204
        released = threading.Event()  # a hanging POST waits for stop(), so no handler thread outlives the test
        owner = self

        class _Collector(BaseHTTPRequestHandler):
            def do_POST(self):  # noqa: N802 (http.server's name)
                body = self.rfile.read(int(self.headers["Content-Length"]))
                owner.posts += 1
                if hang:
                    released.wait()
                    return
                if dribble_s is not None:  # a byte of the status line every dribble_s, until stop()
                    for byte in b"HTTP/1.1 204 No Content\r\n" * 1000:
                        if released.wait(dribble_s):
                            return
                        self.wfile.write(bytes([byte]))
                        self.wfile.flush()
                status = errors.pop(0) if errors else 204
                if status == 204:
                    owner.delivered.append(body)
                self.send_response(status)
                if 300 <= status < 400:
                    self.send_header("Location", "/landing")
                self.send_header("Content-Length", "0")
                self.end_headers()

            def do_GET(self):  # noqa: N802 (http.server's name)
                owner.gets += 1
                self.send_response(200)
                self.send_header("Content-Length", "2")
                self.end_headers()
                self.wfile.write(b"ok")

            def log_message(self, *args):
                pass

        self._released = released
        self._server = ThreadingHTTPServer(("127.0.0.1", port), _Collector)
        self._server.daemon_threads = True
        self.port = self._server.server_port
        threading.Thread(target=self._server.serve_forever, daemon=True).start()

    def url(self, path: str = "/hook") -> str:
        return f"http://127.0.0.1:{self.port}{path}"

    def stop(self) -> None:
        self._released.set()
        self._server.shutdown()
        self._server.server_close()


def start_webhook(
    port: int = 0, statuses: Sequence[int] = (), hang: bool = False, dribble_s: float | None = None
) -> Webhook:
    """A started webhook on 127.0.0.1 (stop it when done); `port` 0 takes a free one."""
    return Webhook(port, statuses, hang, dribble_s)


def closed_port() -> int:
    """A loopback port nothing listens on (a POST to it is refused), free to start a webhook on later."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]
