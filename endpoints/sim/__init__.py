"""The SGLang twin: SGLang's HTTP API over a simulated DeepSeek-V3/R1 server (see docs/twin.md).

Layers, each its own module: clock (real or virtual time), cost_model (roofline step time),
radix_cache and kv_pool (prefix cache in a fixed KV pool), scheduler (continuous batching with
optimistic admission and retraction), engine (the step loop on the clock), server (aiohttp routes),
native_view / openai_view (answer shapes), response_stream (when bytes go out, faults),
server_args and faults (SGLang's flags plus the twin's), virtual_bench (bench_serving in virtual time).
Structured output: output_constraint (the request's constraint), grammar_backend (compile, SGLang's errors,
cache), answer_skeleton (the smallest conforming answer), structured_answer (its tokens), structured_request
(the server's glue).
"""


def main(argv: list[str] | None = None) -> int:
    """Serve the twin; the CLI entry point (imported lazily so `import endpoints.sim` stays light)."""
    from endpoints.sim.cli import main as cli_main

    return cli_main(argv)
