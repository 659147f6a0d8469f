"""One POST of a notice to the webhook, bounded in total time, redirects not followed.

The bound is one deadline over the whole exchange (connect, TLS, the body sent, the status line and headers
read), not a timeout per socket read: a webhook that dribbles its status line a byte at a time is cut at the
deadline as one that does not answer. The body of the answer is not read. A 3xx is an answer, not a delivery:
clients that follow a redirect turn the POST into a body-less GET, which a login page or a moved hook
answers 200 without the notice ever arriving. Proxies come from the environment (HTTPS_PROXY, NO_PROXY...),
as for any HTTP client.

Runs its own event loop (asyncio.run): call it from synchronous code, as the notice sensors are.
"""

from __future__ import annotations

import asyncio
import math
from urllib.parse import urlsplit

import aiohttp

JSON_HEADERS = {"Content-Type": "application/json"}


def post_json(url: str, body: bytes, timeout_s: float) -> str | None:
    """POSTs `body` to `url` within `timeout_s` all told. None when the POST itself was answered 2xx, else why
    not, in words that never carry the URL's path or query (where webhooks keep their tokens)."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return "not an http(s) URL"
    try:
        return asyncio.run(_post(url, body, timeout_s))
    except TimeoutError:
        return f"no answer within {timeout_s:g} s"
    except aiohttp.ClientConnectorError as exc:
        return f"cannot connect: {exc.os_error.strerror or type(exc.os_error).__name__}"
    except (aiohttp.ClientError, OSError, ValueError) as exc:
        return _without_url(f"{type(exc).__name__}: {exc}", url)


async def _post(url: str, body: bytes, timeout_s: float) -> str | None:
    # aiohttp rounds a timeout over `ceil_threshold` (5 s by default) up to a whole second of the loop's clock.
    timeout = aiohttp.ClientTimeout(total=timeout_s, ceil_threshold=math.inf)
    async with aiohttp.ClientSession(timeout=timeout, trust_env=True) as session:
        async with session.post(url, data=body, headers=JSON_HEADERS, allow_redirects=False) as response:
            if 200 <= response.status < 300:
                return None
            if 300 <= response.status < 400:
                return (
                    f"HTTP {response.status}, a redirect: not followed (a redirected POST arrives as a GET without "
                    "the notice); set the webhook URL to where it redirects"
                )
            return f"HTTP {response.status}"


def _without_url(text: str, url: str) -> str:
    """`text` with the URL, and its path and query on their own, cut out (an exception's message may quote them)."""
    parts = urlsplit(url)
    for secret in (url, parts.path, parts.query):
        if len(secret) > 1:
            text = text.replace(secret, "...")
    return text
