"""The SGLang twin: SGLang's HTTP API over a simulated DeepSeek-V3/R1 server (see docs/twin.md).

Rooms: http/ (aiohttp routes, request parsing, native and OpenAI answer shapes, when bytes go out);
engine/ (the step loop that owns the clock; requests, scheduler with SGLang's admission and retraction,
KV pool and radix cache, speculative decoding, faults, metrics); structured/ (the request's constraint,
grammar compile with SGLang's errors, the smallest conforming answer); calibration/ (the roofline cost model,
hardware and model profiles, fitted constants and the virtual-time benchmarks that check them). Here:
server_args (SGLang's flags plus the twin's) and the CLI.
"""


def main(argv: list[str] | None = None) -> int:
    """Serve the twin; the CLI entry point (imported lazily so `import endpoints.sim` stays light)."""
    from endpoints.sim.cli import main as cli_main

    return cli_main(argv)
