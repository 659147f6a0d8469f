"""The prefix cache's state before a measured replay: flushed for a cold start, else left to the
replay's warm-up phase.

SGLang's /flush_cache answers 400 and flushes nothing while any request is running or waiting (a
health check, another client, the tail of a warm-up), so a cold start retries until the server is
idle or `retry_for_s` has passed. Every worker of a fleet is flushed: each has its own radix cache.
A cold-start scenario that cannot be flushed is an error: measuring it warm would be wrong data.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

from endpoints.probes.server_facts import auth_headers, http_get
from endpoints.running_endpoint import RunningEndpoint


class CacheFlushError(RuntimeError):
    pass


@dataclass(frozen=True, slots=True)
class CachePreparation:
    cold_start: bool
    flushed_urls: tuple[str, ...]  # empty for a warm start
    attempts: int  # POSTs sent, over all workers
    waited_s: float  # time spent waiting for busy servers
    note: str


def prepare_cache(
    endpoint: RunningEndpoint,
    cold_start: bool,
    retry_for_s: float = 120.0,
    sleep: Callable[[float], None] = time.sleep,
    now_s: Callable[[], float] = time.monotonic,
) -> CachePreparation:
    if not cold_start:
        return CachePreparation(False, (), 0, 0.0, "warm start: the replay's warm-up phase primes the cache")
    headers = auth_headers(endpoint.spec)
    urls = endpoint.metrics_urls or (endpoint.url,)
    attempts = 0
    started_s = now_s()
    for url in urls:
        pause_s = 0.25
        while True:
            attempts += 1
            answer = http_get(f"{url}/flush_cache", headers, timeout_s=30.0, method="POST")
            if answer.status == 200:
                break
            if answer.status != 400:
                why = answer.problem if answer.status is None else f"HTTP {answer.status}"
                raise CacheFlushError(f"endpoint {endpoint.spec.name!r}: POST {url}/flush_cache failed ({why})")
            if now_s() - started_s >= retry_for_s:
                raise CacheFlushError(
                    f"endpoint {endpoint.spec.name!r}: {url} stayed busy for {retry_for_s:g} s "
                    "(/flush_cache answers 400 while requests run); the cold start cannot be guaranteed"
                )
            sleep(pause_s)
            pause_s = min(pause_s * 2, 5.0)
    waited_s = now_s() - started_s
    return CachePreparation(True, tuple(urls), attempts, waited_s, f"flushed {len(urls)} server(s)")
