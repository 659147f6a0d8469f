"""AIConfigurator's side of bench/aiconfigurator_compare.py: NVIDIA's predictor asked the same questions as the twin,
in its own environment (build/aic-venv, built by `make aiconfigurator-compare` from
bench/aiconfigurator_requirements.txt). It imports nothing of costbench's, and downloads nothing: the model's
config and the per-kernel timings come inside the aiconfigurator-core wheel.

    build/aic-venv/bin/python bench/aiconfigurator_predict.py --job - < job.json > answers.json

The job (JSON on stdin) holds `estimates`, one aggregated SGLang server each (system, ISL, OSL, concurrency,
parallelism, MTP), answered by AIConfigurator's `cli_estimate` (the `aiconfigurator cli estimate` command), and
`plan`, answered by the aggregated half of `aiconfigurator cli default` (`build_default_tasks`, the task's sweep,
then `pick_default` for the best configuration on the GPUs and `pick_load_match` for the GPUs a target rate needs),
with the mixed and decode-only steps behind the named configuration's answer (recorded through `Task.predictor`).
The answers go to stdout as one JSON document; AIConfigurator's own output and logging go to stderr.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
from typing import Any

MODEL = "deepseek-ai/DeepSeek-R1"  # R1 and R1-0528 share the architecture; the wheel bundles this config
BACKEND = "sglang"


def _estimate(job: dict[str, Any]) -> dict[str, Any]:
    from aiconfigurator.cli.api import cli_estimate

    nextn = int(job.get("nextn", 0))
    result = cli_estimate(
        MODEL,
        job["system"],
        mode="agg",
        backend_name=BACKEND,
        isl=int(job["isl"]),
        osl=int(job["osl"]),
        batch_size=int(job["batch_size"]),
        tp_size=int(job["tp"]),
        attention_dp_size=int(job.get("dp", 1)),
        moe_tp_size=int(job["moe_tp"]),
        moe_ep_size=int(job["moe_ep"]),
        nextn=nextn,
        nextn_accepted=job.get("nextn_accepted") if nextn else None,
    )
    return {
        "key": job["key"],
        "backend_version": result.backend_version,
        "ttft_ms": float(result.ttft),
        "tpot_ms": float(result.tpot),
        "requests_per_s": float(result.raw["seq/s"]),
        "kv_warning": result.kv_cache_warning,
    }


def _row(row: Any) -> dict[str, Any]:
    return {
        "parallel": str(row["parallel"]),
        "batch_per_rank": int(row["bs"]),
        "concurrency": int(row["concurrency"]),
        "ttft_ms": float(row["ttft"]),
        "tpot_ms": float(row["tpot"]),
        "requests_per_s": float(row["seq/s"]),
        "gpus": int(row["num_total_gpus"]),
    }


class _StepRecorder:
    """AIConfigurator's own predictor (its documented `Task.predictor` seam), keeping each aggregated point's
    scheduling figures: the mixed and decode-only steps its analytic model counts and how long each takes."""

    def __init__(self) -> None:
        from aiconfigurator.sdk.predictor import DEFAULT_PREDICTOR

        self._inner = DEFAULT_PREDICTOR
        self.steps: dict[tuple[str, int, int], dict[str, float]] = {}

    def predict_agg_worker(self, **kwargs: Any) -> Any:
        summary = self._inner.predict_agg_worker(**kwargs)
        result = summary.get_result_dict() or {}
        scheduling = (summary.get_per_ops_data() or {}).get("scheduling")
        if result and scheduling:
            key = (str(result["parallel"]), int(result["bs"]), int(result["ctx_tokens"]))
            self.steps[key] = {name: float(value) for name, value in scheduling.items()}
        return summary

    def predict_disagg_worker(self, **kwargs: Any) -> Any:
        return self._inner.predict_disagg_worker(**kwargs)


def _steps(recorder: _StepRecorder, row: Any) -> dict[str, float] | None:
    """The scheduling figures behind one row of the sweep: its mixed step (prompt tokens plus the rank's running
    requests' next tokens, one forward) and decode-only step, and how many of each one request's life counts."""
    found = recorder.steps.get((str(row["parallel"]), int(row["bs"]), int(row["ctx_tokens"])))
    if found is None:
        return None
    return {
        "mixed_step_ms": found["mix_step_latency_ms"],
        "decode_step_ms": found["genonly_step_latency_ms"],
        "mixed_steps": found["num_mix_steps"],
        "decode_steps": found["num_genonly_steps"],
        "mixed_prompt_tokens": found["mix_context_tokens"],
        "mixed_decode_requests": found["mix_decode_requests"],
    }


def _plan(job: dict[str, Any]) -> dict[str, Any]:
    from aiconfigurator.cli.main import build_default_tasks
    from aiconfigurator.sdk.picking import pick_default, pick_load_match

    gpus, ttft_ms, tpot_ms = int(job["gpus"]), float(job["ttft_ms"]), float(job["tpot_ms"])
    tasks = build_default_tasks(
        MODEL,
        gpus,
        job["system"],
        backend=BACKEND,
        isl=int(job["isl"]),
        osl=int(job["osl"]),
        ttft=ttft_ms,
        tpot=tpot_ms,
        serving_mode="agg",
    )
    recorder = _StepRecorder()
    task = tasks["agg"]
    task.predictor = recorder
    swept = task.run()  # every configuration on up to `gpus` GPUs; TTFT already held to the SLO
    best = pick_default(swept, gpus, "agg", target_tpot=tpot_ms)["best_config_df"]
    load = pick_load_match(swept, "agg", target_tpot=tpot_ms, target_request_rate=float(job["target_rps"]))
    planned = load["best_config_df"]
    inside = swept[(swept["parallel"] == job["parallel"]) & (swept["tpot"] <= tpot_ms)]
    named = None
    if len(inside):
        row = inside.sort_values("seq/s").iloc[-1]
        named = {**_row(row), "ctx_tokens": int(row["ctx_tokens"]), "steps": _steps(recorder, row)}
    return {
        "best": _row(best.iloc[0]) if len(best) else None,
        "named": named,
        "configurations": len(swept),
        "plan": None
        if planned.empty
        else {
            **_row(planned.iloc[0]),
            "replicas": int(planned.iloc[0]["replicas_needed"]),
            "total_gpus": int(planned.iloc[0]["total_gpus_needed"]),
        },
    }


def answer(job: dict[str, Any]) -> dict[str, Any]:
    """Every estimate and the plan of `job`; a question AIConfigurator refuses is answered with its error."""
    from importlib.metadata import version

    estimates = []
    for one in job.get("estimates", []):
        try:
            estimates.append(_estimate(one))
        except Exception as exc:  # its refusal is the answer, recorded as data
            estimates.append({"key": one["key"], "error": f"{type(exc).__name__}: {exc}"})
    plan: dict[str, Any] | None = None
    if job.get("plan"):
        try:
            plan = _plan(job["plan"])
        except Exception as exc:
            plan = {"error": f"{type(exc).__name__}: {exc}"}
    return {"aiconfigurator": version("aiconfigurator"), "estimates": estimates, "plan": plan}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--job", help="'-': read the job from stdin (without it: say how this is run, and exit)")
    args = parser.parse_args(argv)
    if args.job != "-":
        print("bench/aiconfigurator_compare.py runs this in build/aic-venv (make aiconfigurator-compare)")
        return 0
    os.environ.setdefault("HF_HUB_OFFLINE", "1")  # nothing here may reach a model hub
    job = json.load(sys.stdin)
    with contextlib.redirect_stdout(sys.stderr):  # stdout carries the answers only
        answers = answer(job)
    json.dump(answers, sys.stdout)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
