"""How much load one replay process can generate honestly, and what each request and token costs it.

Drives a zero-latency loopback peer (below, `LoopbackPeer`: NOT SGLang and NOT the twin, just a
minimal HTTP/1.1 server in its own process that answers native /generate with N SSE token events as
fast as it can) at rising request rates, and prints per rate the schedule lag the client achieved
(p50/p99/max, sent − scheduled − held) and the client's CPU per request. Then it streams long
responses to measure the client's CPU per streamed token (SSE framing + event decode + record).
Prints the highest rate at which p99 lag stays <= 1 ms and <= 5 ms.

    python bench/replay_overhead.py            # about 1-2 minutes
    python bench/replay_overhead.py --quick    # under ~20 s
"""

from __future__ import annotations

import argparse
import asyncio
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import orjson

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

# ---------------------------------------------------------------------------------------------------
# The loopback peer (runs in a child process so its CPU is not the client's).

_MAX_NEW = re.compile(rb'"max_new_tokens":\s*(\d+)')
_HEAD = (
    b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n"
    b"Connection: keep-alive\r\n\r\n"
)
_INFO = orjson.dumps({"version": "loopback-peer", "note": "bench peer, not SGLang"})


def _chunk(data: bytes) -> bytes:
    return b"%x\r\n%s\r\n" % (len(data), data)


class LoopbackPeer(asyncio.Protocol):
    """Answers POST /generate with max_new_tokens SSE events (SGLang's native shape, incremental text)."""

    def connection_made(self, transport) -> None:
        self.transport = transport
        self.buffer = b""

    def data_received(self, data: bytes) -> None:
        self.buffer += data
        while True:
            end = self.buffer.find(b"\r\n\r\n")
            if end < 0:
                return
            head = self.buffer[:end]
            length_match = re.search(rb"(?i)content-length:\s*(\d+)", head)
            length = int(length_match.group(1)) if length_match else 0
            if len(self.buffer) < end + 4 + length:
                return
            body = self.buffer[end + 4 : end + 4 + length]
            self.buffer = self.buffer[end + 4 + length :]
            if head.startswith(b"GET"):
                self.transport.write(
                    b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s"
                    % (len(_INFO), _INFO)
                )
                continue
            self._generate(body)

    def _generate(self, body: bytes) -> None:
        match = _MAX_NEW.search(body)
        n = int(match.group(1)) if match else 16
        prompt = body.count(b",") + 1  # input_ids are the only long comma list in the body
        out = [_HEAD]
        for k in range(1, n + 1):
            meta = b'{"id":"x","finish_reason":%s,"prompt_tokens":%d,"completion_tokens":%d,"cached_tokens":0}' % (
                b'{"type":"length","length":%d}' % n if k == n else b"null",
                prompt,
                k,
            )
            event = b'data: {"text":" tok","output_ids":[%d],"meta_info":%s}\n\n' % (k, meta)
            if k == n:
                event += b"data: [DONE]\n\n"
            out.append(_chunk(event))
        out.append(b"0\r\n\r\n")
        self.transport.write(b"".join(out))


def serve_peer() -> None:
    async def main() -> None:
        loop = asyncio.get_running_loop()
        server = await loop.create_server(LoopbackPeer, "127.0.0.1", 0, backlog=4096)
        print(f"loopback peer on http://127.0.0.1:{server.sockets[0].getsockname()[1]}", flush=True)
        await server.serve_forever()

    asyncio.run(main())


# ---------------------------------------------------------------------------------------------------
# The client side: the real replay (runner, scheduler, native client, SSE reader, part sink).


def _workload(n: int, rate_rps: float, input_tokens: int, output_tokens: int):
    from tests.replay_sglang_peer import make_workload

    return make_workload([i / rate_rps for i in range(n)], input_tokens=input_tokens, output_tokens=output_tokens)


def _measure(url: str, n: int, rate_rps: float, input_tokens: int, output_tokens: int) -> dict:
    from replay.recording.requests_reader import read_requests
    from replay.replay_config import ReplayConfig
    from replay.runner import run_replay
    from replay.schedule.request_selection import select_requests

    workload = _workload(n, rate_rps, input_tokens, output_tokens)
    config = ReplayConfig(url=url, request_timeout_s=60, flush_every_records=1024)
    cpu_prepare = time.thread_time()
    select_requests(workload, config)  # what run_replay does before t0; subtracted below
    cpu_prepare = time.thread_time() - cpu_prepare
    with tempfile.TemporaryDirectory() as out:
        cpu0, wall0 = time.process_time(), time.perf_counter()
        run = run_replay(workload, config, Path(out))
        cpu_s = time.process_time() - cpu0 - cpu_prepare
        wall_s = time.perf_counter() - wall0
        table = read_requests(Path(out), ["status", "completion_tokens"])
    ok = table.column("status").to_pylist().count("ok")
    tokens = sum(t or 0 for t in table.column("completion_tokens").to_pylist())
    return {
        "rate_rps": rate_rps, "n": n, "ok": ok, "wall_s": wall_s, "cpu_s": cpu_s, "tokens": tokens,
        "p50_ms": run.schedule_lag_p50_ms, "p99_ms": run.schedule_lag_p99_ms, "max_ms": run.schedule_lag_max_ms,
    }  # fmt: skip


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="a smaller run, under ~20 s")
    parser.add_argument("--serve-peer", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve_peer:
        serve_peer()
        return 0

    rates = [250, 500, 1000, 1500] if args.quick else [250, 500, 750, 1000, 1250, 1500, 2000, 3000]
    seconds = 1.5 if args.quick else 4.0
    peer = subprocess.Popen([sys.executable, __file__, "--serve-peer"], stdout=subprocess.PIPE, text=True)
    try:
        assert peer.stdout is not None  # stdout=PIPE
        match = re.search(r"(http://\S+)", peer.stdout.readline())
        assert match is not None, "the peer printed no URL"
        url = match.group(1)
        print(f"peer: zero-latency loopback SSE peer (bench-only, not SGLang) at {url}")
        print(f"requests: 64 input ids, 16 output tokens each; {seconds:g} s per rate; constant arrivals\n")
        print(
            f"{'rate req/s':>10} {'ok':>6} {'lag p50 ms':>11} {'p99 ms':>8} {'max ms':>8} "
            f"{'CPU us/req':>11} {'achieved':>9}"
        )
        _measure(url, 50, 500.0, 64, 16)  # warm-up: imports and first connections are not per-request costs
        results = []
        for rate in rates:
            r = _measure(url, int(rate * seconds), float(rate), 64, 16)
            results.append(r)
            print(f"{rate:>10} {r['ok']:>6} {r['p50_ms']:>11.3f} {r['p99_ms']:>8.3f} {r['max_ms']:>8.2f} "
                  f"{r['cpu_s'] / r['n'] * 1e6:>11.0f} {r['n'] / r['wall_s']:>9.0f}")  # fmt: skip
        for bound in (1.0, 5.0):
            good = [r["rate_rps"] for r in results if r["ok"] == r["n"] and r["p99_ms"] <= bound]
            best = f"{max(good):g} req/s" if good else f"none of the tried rates (lowest {rates[0]})"
            print(f"highest rate with p99 schedule lag <= {bound:g} ms: {best}")

        n_long, out_long = (40, 500) if args.quick else (100, 1000)
        r = _measure(url, n_long, 20.0, 64, out_long)
        per_token_us = r["cpu_s"] / r["tokens"] * 1e6
        print(f"\nstreaming: {n_long} requests x {out_long} tokens (one SSE event per token)")
        print(
            f"client CPU per streamed token: {per_token_us:.2f} us  ->  "
            f"{1e6 / per_token_us:,.0f} tokens/s parsed on one core"
        )
        print("targets (issue): >= 1,000 req/s at p99 lag <= 5 ms; >= 50,000 streamed tokens/s on one core")
    finally:
        peer.terminate()
        peer.wait(10)
    return 0


if __name__ == "__main__":
    sys.exit(main())
