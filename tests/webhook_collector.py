"""A webhook on loopback that keeps every body it accepted: the receiving end of the notice tests. It can also
answer the first POSTs with an error, or hang, as a webhook that is down does."""

from __future__ import annotations

import socket
import threading
from collections.abc import Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class Webhook:
    """A started server: `delivered` holds the bodies it answered 204 to, in order; `posts` counts every POST."""

    def __init__(self, port: int = 0, statuses: Sequence[int] = (), hang: bool = False) -> None:
        self.delivered: list[bytes] = []
        self.posts = 0
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
                status = errors.pop(0) if errors else 204
                if status == 204:
                    owner.delivered.append(body)
                self.send_response(status)
                self.send_header("Content-Length", "0")
                self.end_headers()

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


def start_webhook(port: int = 0, statuses: Sequence[int] = (), hang: bool = False) -> Webhook:
    """A started webhook on 127.0.0.1 (stop it when done); `port` 0 takes a free one."""
    return Webhook(port, statuses, hang)


def closed_port() -> int:
    """A loopback port nothing listens on (a POST to it is refused), free to start a webhook on later."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]
