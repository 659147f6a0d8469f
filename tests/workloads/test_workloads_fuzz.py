"""A small seeded run of bench/trace_fuzz.py: no mutated trace of any format reads as garbage or crashes."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

HARNESS = Path(__file__).resolve().parents[2] / "bench" / "trace_fuzz.py"
CASES = 40  # per format: every mutation of each format at least once


def load_harness():
    spec = importlib.util.spec_from_file_location("trace_fuzz", HARNESS)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["trace_fuzz"] = module  # dataclasses look their module up while the class is made
    spec.loader.exec_module(module)
    return module


trace_fuzz = load_harness()


@pytest.mark.parametrize("trace_format", trace_fuzz.FORMATS)
def test_no_mutated_trace_reads_as_garbage_or_crashes(trace_format: str) -> None:
    tally = trace_fuzz.fuzz(CASES, seed=2026, formats=(trace_format,))[trace_format]
    findings = "\n".join(tally.findings)
    assert tally.seed_error == ""
    assert tally.outcomes["accepted garbage"] == 0, findings
    assert tally.outcomes["crash"] == 0, findings
    # The harness did its job: both kinds of mutation were made and told apart.
    assert tally.outcomes["clean error"] > 0 and tally.outcomes["accepted valid"] > 0
    assert sum(tally.outcomes.values()) == CASES


@pytest.mark.parametrize("trace_format", ["azure", "burstgpt"])
def test_csv_traces_written_differently_read_the_same(trace_format: str) -> None:
    # Blank lines, CRLF, a BOM, reordered or extra columns, quoted or padded cells: none is refused.
    tally = trace_fuzz.fuzz(CASES, seed=7, formats=(trace_format,))[trace_format]
    assert tally.benign_refused == 0, "\n".join(tally.findings)


def test_the_table_prints_every_format_and_outcome() -> None:
    results = trace_fuzz.fuzz(3, seed=1)
    lines = trace_fuzz.table_text(results).splitlines()
    assert lines[0].split() == [
        "format",
        "clean",
        "error",
        "accepted",
        "valid",
        "accepted",
        "garbage",
        "crash",
        "benign",
        "refused",
    ]
    assert [line.split()[0] for line in lines[1:]] == list(trace_fuzz.FORMATS)
