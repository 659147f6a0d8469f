"""GET /server_info before t0: the one non-replay HTTP call of a run (docs/endpoints.md, "SGLang's API").

An endpoint that cannot be reached at all is bad input (the run would only record connection errors);
one that answers but has no usable /server_info still gets replayed, with empty server facts.
Only the fields costbench reads are kept (common/server_info_fields.py), and secrets among them (by
name or by shape) are redacted here, before anything keeps them.

Both reads are bounded (docs/endpoints.md, "Bounds on what an endpoint sends"): in total time (the
session's `total` timeout covers the body), in bytes (ANSWER_MAX_BYTES; the rest is never read) and in
JSON nesting (common/server_info_fields.py). An answer past a bound is a problem like any unusable answer.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping

import aiohttp

from common.bounded_body import read_at_most
from common.server_info_fields import JsonTooDeepError, keep_read_fields, load_shallow_json
from redaction.secret_redaction import redact_secrets, redact_text, redact_url
from replay.clients.sse_reader import byte_size

# Newer SGLang serves /server_info; older builds only the now-deprecated alias.
SERVER_INFO_PATHS = ("/server_info", "/get_server_info")
ANSWER_MAX_BYTES = 1024 * 1024  # far above SGLang's /server_info, one internal_states entry per DP rank included
ANSWER_LIMIT_S = 30.0  # connecting, the headers and the whole body


class EndpointUnreachableError(ConnectionError):
    pass


async def fetch_server_info(
    session: aiohttp.ClientSession,
    base_url: str,
    headers: Mapping[str, str],
    timeout_s: float = ANSWER_LIMIT_S,
    max_bytes: int = ANSWER_MAX_BYTES,
) -> tuple[dict, str | None]:
    """(server_info, None) on success, ({}, why) when the server answered without usable facts.
    `timeout_s` bounds the whole of it, both paths and their bodies.

    Raises EndpointUnreachableError when no connection could be made, or no answer began in time.
    """
    problems: list[str] = []
    loop = asyncio.get_running_loop()
    deadline_s = loop.time() + timeout_s
    for path in SERVER_INFO_PATHS:
        remaining_s = deadline_s - loop.time()
        if remaining_s <= 0:
            break
        status: int | None = None
        try:
            async with session.get(
                base_url + path, headers=dict(headers), timeout=aiohttp.ClientTimeout(total=remaining_s)
            ) as response:
                status = response.status
                if status != 200:
                    problems.append(f"GET {path}: HTTP {status}")
                    continue
                body, more = await read_at_most(response, max_bytes)
        except (aiohttp.ClientError, TimeoutError, OSError) as exc:
            why = (
                f"no whole answer within {timeout_s:g} s"
                if isinstance(exc, TimeoutError)
                else f"{type(exc).__name__}: {exc}"
            )
            if status is None:
                raise EndpointUnreachableError(f"{redact_url(base_url)} is unreachable: {redact_text(why)}") from None
            problems.append(f"GET {path}: HTTP {status}, then {redact_text(why)}")
            continue
        if more:
            problems.append(f"GET {path}: body larger than {byte_size(max_bytes)}, not read")
            continue
        try:
            info = load_shallow_json(body)
        except JsonTooDeepError as exc:
            problems.append(f"GET {path}: {exc}")
            continue
        except ValueError:
            problems.append(f"GET {path}: body is not JSON")
            continue
        if isinstance(info, dict):
            return redact_secrets(keep_read_fields(info)), None
        problems.append(f"GET {path}: body is not a JSON object")
    return {}, "; ".join(problems)


async def fetch_model_id(
    session: aiohttp.ClientSession, base_url: str, headers: Mapping[str, str], timeout_s: float = ANSWER_LIMIT_S
) -> str | None:
    """The first model id of GET /v1/models (what OpenAI-compatible servers other than SGLang check
    `model` against), or None when the server does not say."""
    try:
        async with session.get(
            base_url + "/v1/models", headers=dict(headers), timeout=aiohttp.ClientTimeout(total=timeout_s)
        ) as response:
            if response.status != 200:
                return None
            body, more = await read_at_most(response, ANSWER_MAX_BYTES)
        listing = None if more else load_shallow_json(body)
    except (aiohttp.ClientError, TimeoutError, OSError, ValueError):
        return None
    data = listing.get("data") if isinstance(listing, dict) else None
    if isinstance(data, list) and data and isinstance(data[0], dict) and isinstance(data[0].get("id"), str):
        return data[0]["id"]
    return None
