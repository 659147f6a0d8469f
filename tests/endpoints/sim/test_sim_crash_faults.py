"""--fault-crash-after N over real HTTP on 127.0.0.1: exactly N answers go out, whatever the load, then the
twin exits with status 70; every later request fails without an HTTP status (its connection is dropped)."""

from __future__ import annotations

import asyncio
import random
import re
import subprocess
import sys
from pathlib import Path

import aiohttp
import orjson
import pytest

from endpoints.sim.engine.faults import CRASH_EXIT_STATUS

REPO = Path(__file__).resolve().parents[3]
N = 60
SENT = 100


def _bodies(pattern: str) -> list[tuple[str, bytes]]:
    """(route, body) for SENT requests. "same-step": identical native requests that all finish in one engine
    step (the old completion-time count answered all 100). "mixed": native streamed and whole, OpenAI chat
    and completions, of varied lengths, arriving over time, so some finish together and some alone."""
    if pattern == "same-step":
        body = {"input_ids": list(range(100, 164)), "sampling_params": {"max_new_tokens": 4, "ignore_eos": True}}
        return [("/generate", orjson.dumps(body))] * SENT
    rng = random.Random(1)
    bodies = []
    for i in range(SENT):
        new_tokens = rng.randint(2, 40)
        if i % 4 == 0:
            body = {"messages": [{"role": "user", "content": "x" * rng.randint(40, 4000)}], "max_tokens": new_tokens}
            bodies.append(("/v1/chat/completions", orjson.dumps({**body, "stream": i % 8 == 0})))
        elif i % 4 == 1:
            body = {"prompt": "y" * rng.randint(40, 4000), "max_tokens": new_tokens, "stream": True}
            bodies.append(("/v1/completions", orjson.dumps(body)))
        else:
            body = {"input_ids": list(range(100, 100 + rng.randint(32, 2000))), "stream": i % 4 == 2,
                    "sampling_params": {"max_new_tokens": new_tokens, "ignore_eos": True}}  # fmt: skip
            bodies.append(("/generate", orjson.dumps(body)))
    return bodies


async def _send_all(url: str, bodies: list[tuple[str, bytes]], gap_s: float) -> list[str]:
    """Each request's outcome: "ok" (200 and a complete body), or what went wrong."""

    async def one(session: aiohttp.ClientSession, index: int, route: str, body: bytes) -> str:
        await asyncio.sleep(index * gap_s)
        try:
            async with session.post(url + route, data=body, timeout=aiohttp.ClientTimeout(total=30)) as response:
                text = await response.read()
        except (aiohttp.ClientError, ConnectionError) as exc:
            return f"failed: {type(exc).__name__}"
        if response.status != 200:
            return f"http {response.status}"
        streamed = response.headers.get("Content-Type", "").startswith("text/event-stream")
        complete = text.endswith(b"data: [DONE]\n\n") if streamed else bool(orjson.loads(text))
        return "ok" if complete else "truncated"

    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0)) as session:
        return await asyncio.gather(*(one(session, i, route, body) for i, (route, body) in enumerate(bodies)))


@pytest.mark.timeout(60)
@pytest.mark.parametrize(("pattern", "gap_s"), [("same-step", 0.0), ("mixed", 0.02)])
def test_crash_after_n_answers_exactly_n_of_many_concurrent_requests(pattern, gap_s):
    command = [sys.executable, "-m", "endpoints.sim", "--host", "127.0.0.1", "--port", "0", "--tp-size", "8",
               "--sim-warmup-s", "0", "--fault-crash-after", str(N)]  # fmt: skip
    process = subprocess.Popen(command, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        line = process.stdout.readline()
        found = re.search(r"listening on (http://127\.0\.0\.1:\d+)", line)
        assert found, line + process.stderr.read()
        outcomes = asyncio.run(_send_all(found.group(1), _bodies(pattern), gap_s))
        assert process.wait(timeout=10) == CRASH_EXIT_STATUS
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    assert outcomes.count("ok") == N, sorted(set(outcomes))
    # The others were dropped by the crash: no HTTP status, no half-answer passed off as a whole one.
    assert all(o.startswith("failed: ") for o in outcomes if o != "ok"), sorted(set(outcomes))
