"""GET /server_info before t0: the one non-replay HTTP call of a run (docs/endpoints.md, "SGLang's API").

An endpoint that cannot be reached at all is bad input (the run would only record connection errors);
one that answers but has no usable /server_info still gets replayed, with empty server facts.
Only the fields costbench reads are kept (common/server_info_fields.py), and secrets among them (by
name or by shape) are redacted here, before anything keeps them.
"""

from __future__ import annotations

from collections.abc import Mapping

import aiohttp
import orjson

from common.secret_redaction import redact_secrets, redact_text, redact_url
from common.server_info_fields import keep_read_fields

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
            async with session.get(
                url, headers=dict(headers), timeout=aiohttp.ClientTimeout(total=timeout_s)
            ) as response:
                body = await response.read()
                if response.status != 200:
                    problems.append(f"GET {path}: HTTP {response.status}")
                    continue
        except (aiohttp.ClientConnectionError, TimeoutError, OSError) as exc:
            why = redact_text(f"{type(exc).__name__}: {exc}")
            raise EndpointUnreachableError(f"{redact_url(base_url)} is unreachable: {why}") from None
        try:
            info = orjson.loads(body)
        except orjson.JSONDecodeError:
            problems.append(f"GET {path}: body is not JSON")
            continue
        if isinstance(info, dict):
            return redact_secrets(keep_read_fields(info)), None
        problems.append(f"GET {path}: body is not a JSON object")
    return {}, "; ".join(problems)


async def fetch_model_id(
    session: aiohttp.ClientSession, base_url: str, headers: Mapping[str, str], timeout_s: float = 30.0
) -> str | None:
    """The first model id of GET /v1/models (what OpenAI-compatible servers other than SGLang check
    `model` against), or None when the server does not say."""
    try:
        async with session.get(
            base_url + "/v1/models", headers=dict(headers), timeout=aiohttp.ClientTimeout(total=timeout_s)
        ) as response:
            if response.status != 200:
                return None
            listing = orjson.loads(await response.read())
    except (aiohttp.ClientError, TimeoutError, OSError, orjson.JSONDecodeError):
        return None
    data = listing.get("data") if isinstance(listing, dict) else None
    if isinstance(data, list) and data and isinstance(data[0], dict) and isinstance(data[0].get("id"), str):
        return data[0]["id"]
    return None
