"""The SGLang twin: SGLang's HTTP API over a simulated DeepSeek-V3/R1 server (see docs/twin.md).

Rooms, lowest first; each imports only those before it (and endpoints/clock.py, and the two leaves bad_request and
toy_tokenizer): cost/ (what one forward step costs: cost_model, profiles, expert_parallel, cold_start,
run_variation, the fitted constants, step_batch); structured/ (the request's constraint, grammar compile with
SGLang's errors, the smallest conforming answer); engine/ (the step loop that owns the clock: requests, scheduler
with SGLang's admission and retraction, KV pool and radix cache, speculative decoding, disaggregation, faults,
metrics, GPU counters, the TTFT's parts by stage). Here, above the engine: server_args (SGLang's flags plus the
twin's), engine_builder (an engine from flags), virtual_bench (the engine in virtual time, no HTTP). Above those:
http/ (aiohttp routes, request parsing, native and OpenAI answer shapes, when bytes go out) and calibration/ (the fit
against published figures: published_points, calibration_tables, spec_fitted, phase_bench); the CLI on top.
endpoints/capacity/ (capacity at the SLO, the fleet plan) sits above this package and endpoints/router/; nothing here
imports either.
"""


def main(argv: list[str] | None = None) -> int:
    """Serve the twin; the CLI entry point (imported lazily so `import endpoints.sim` stays light)."""
    from endpoints.sim.cli import main as cli_main

    return cli_main(argv)
