"""One HTTP request to an endpoint from blocking code (provisioning, the probes, cache preparation), bounded.

Bounded in total time: `timeout_s` covers connecting, the headers and the whole body, not each read, so a
server that dribbles its answer a byte a second is abandoned at `timeout_s` however many bytes it has. And
in bytes: at most `max_bytes` of a body is read, the rest never (docs/endpoints.md, "Bounds on what an
endpoint sends"). An answer past either bound is no answer: `status` None, and `problem` says which bound.

aiohttp on an event loop of the call's own (each caller is a thread without a running loop: the probes'
thread, asyncio.to_thread, provisioning before the replay's loop exists), so a timeout covers every step,
which urllib's per-read socket timeout does not.
"""

from __future__ import annotations

import asyncio
import os
from dataclasses import dataclass

import aiohttp

from common.bounded_body import read_at_most

ANSWER_MAX_BYTES = 4 * 1024 * 1024  # a health check, /readiness, /flush_cache, a DCGM exporter's page


@dataclass(frozen=True, slots=True)
class HttpAnswer:
    status: int | None  # None: no whole HTTP answer within the bounds
    content_type: str
    body: bytes
    problem: str | None  # why there was no answer


def http_get(
    url: str,
    headers: dict[str, str],
    timeout_s: float = 10.0,
    method: str = "GET",
    max_bytes: int = ANSWER_MAX_BYTES,
) -> HttpAnswer:
    return asyncio.run(_request(url, headers, timeout_s, method, max_bytes))


async def _request(url: str, headers: dict[str, str], timeout_s: float, method: str, max_bytes: int) -> HttpAnswer:
    status: int | None = None
    try:
        async with asyncio.timeout(timeout_s):
            async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=None)) as session:
                async with session.request(method, url, headers=headers) as response:
                    status = response.status
                    content_type = response.headers.get("Content-Type", "")
                    body, more = await read_at_most(response, max_bytes)
    except TimeoutError:
        then = f"answered HTTP {status}, then " if status is not None else ""
        return HttpAnswer(None, "", b"", f"{then}no whole answer within {timeout_s:g} s")
    except aiohttp.ClientConnectorError as exc:
        return HttpAnswer(None, "", b"", _os_problem(exc.os_error))
    except (aiohttp.ClientError, OSError, ValueError) as exc:  # ValueError: a URL aiohttp cannot use
        return HttpAnswer(None, "", b"", f"{type(exc).__name__}: {exc}")
    if more:
        problem = f"answered HTTP {status} with a body larger than {max_bytes / 2**20:g} MiB, not read"
        return HttpAnswer(None, content_type, b"", problem)
    return HttpAnswer(status, content_type, body, None)


def _os_problem(error: OSError) -> str:
    """`ConnectionRefusedError: Connection refused`, as the system names it (asyncio's own text names the call)."""
    code = error.errno
    text = os.strerror(code) if isinstance(code, int) and code > 0 else (error.strerror or str(error))
    return f"{type(error).__name__}: {text}"
