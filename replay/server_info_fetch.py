"""GET /server_info before t0: the one non-replay HTTP call of a run (sglang-api.md §1.3).

An endpoint that cannot be reached at all is bad input (the run would only record connection errors);
one that answers but has no usable /server_info still gets replayed, with empty server facts.
"""

from __future__ import annotations

from collections.abc import Mapping

import aiohttp
import orjson

# Newer SGLang serves /server_info; older builds only the now-deprecated alias.
SERVER_INFO_PATHS = ("/server_info", "/get_server_info")


class EndpointUnreachableError(ConnectionError):
    pass


async def fetch_server_info(
    session: aiohttp.ClientSession,
    base_url: str,
    headers: Mapping[str, str],
    timeout_s: float = 30.0,
) -> tuple[dict, str | None]:
    """(server_info, None) on success, ({}, why) when the server answered without usable facts.

    Raises EndpointUnreachableError when no connection could be made.
    """
    problems: list[str] = []
    for path in SERVER_INFO_PATHS:
        url = base_url + path
        try:
            async with session.get(url, headers=dict(headers), timeout=aiohttp.ClientTimeout(total=timeout_s)) as response:
                body = await response.read()
                if response.status != 200:
                    problems.append(f"GET {path}: HTTP {response.status}")
                    continue
        except (aiohttp.ClientConnectionError, TimeoutError, OSError) as exc:
            raise EndpointUnreachableError(f"{base_url} is unreachable: {type(exc).__name__}: {exc}") from None
        try:
            info = orjson.loads(body)
        except orjson.JSONDecodeError:
            problems.append(f"GET {path}: body is not JSON")
            continue
        if isinstance(info, dict):
            return info, None
        problems.append(f"GET {path}: body is not a JSON object")
    return {}, "; ".join(problems)
