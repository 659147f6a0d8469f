"""Loopback HTTP for the checks: JSON bodies and the `data:` payloads of SSE streams, as sent."""

from __future__ import annotations

import json

import requests

TIMEOUT_S = 60.0


def post_json(base_url: str, path: str, body: dict) -> tuple[int, dict]:
    response = requests.post(base_url + path, json=body, timeout=TIMEOUT_S)
    return response.status_code, response.json()


def post_sse(base_url: str, path: str, body: dict) -> list[str]:
    """Every `data:` payload of the stream, in order, `[DONE]` included (one `data:` line per event, as
    SGLang and the twin send them)."""
    with requests.post(base_url + path, json=body, stream=True, timeout=TIMEOUT_S) as response:
        assert response.status_code == 200, response.text
        assert response.headers["Content-Type"].startswith("text/event-stream")
        payloads = []
        for line in response.iter_lines(decode_unicode=True):
            assert isinstance(line, str)  # decoded: requests reads text/event-stream as text
            if line.startswith("data: "):
                payloads.append(line[len("data: ") :])
        return payloads


def json_events(payloads: list[str]) -> list[dict]:
    assert payloads and payloads[-1] == "[DONE]", f"the stream did not end with [DONE]: {payloads[-1:]}"
    return [json.loads(p) for p in payloads[:-1]]
