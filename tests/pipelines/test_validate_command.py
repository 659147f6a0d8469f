"""`costbench validate` (run by `make validate`): a trace that does not resolve is named before a Monday depends
on it, each scenario on its own line, while the bundled files pass."""

from __future__ import annotations

from pathlib import Path

import yaml

from pipelines.cli import main

REPO = Path(__file__).resolve().parents[2]


def _scenarios(tmp_path: Path, traces: dict[str, str]) -> Path:
    """The bundled scenarios with some traces replaced (name -> trace path)."""
    raw = yaml.safe_load((REPO / "workloads" / "scenarios.yaml").read_text())
    for entry in raw["scenarios"]:
        if entry["name"] in traces:
            entry["trace"] = traces[entry["name"]]
            if "{week}" in entry["trace"]:  # a weekly capture: the same seconds of each week's file
                entry.pop("weekly_window", None)
                entry["start_s"] = 0
    path = tmp_path / "scenarios.yaml"
    path.write_text(yaml.safe_dump(raw, sort_keys=False))
    return path


def test_the_bundled_files_pass(capsys):
    assert main(["validate"]) == 0
    assert "every trace resolves" in capsys.readouterr().out


def test_every_trace_that_does_not_resolve_is_named(tmp_path, capsys):
    captures = tmp_path / "captures"
    captures.mkdir()
    (captures / "2026-11-16.parquet").write_bytes(b"")  # a capture of the pattern exists: resolves
    path = _scenarios(tmp_path, {
        "chat-v3-h200": str(tmp_path / "nowhere" / "{week}.parquet"),  # a weekly capture whose folder is missing
        "reasoning-r1-h200-canary": "workloads/traces/azure_conv_2032.csv",  # a typo in a fixed path
    })  # fmt: skip
    assert main(["validate", "--scenarios", str(path)]) == 2
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) == 2
    assert "scenario 'chat-v3-h200'" in lines[0] and "nowhere does not exist" in lines[0]
    assert "scenario 'reasoning-r1-h200-canary': trace" in lines[1] and "azure_conv_2032.csv is not a file" in lines[1]
    fixed = _scenarios(tmp_path, {"chat-v3-h200": str(captures / "{week}.parquet")})
    assert main(["validate", "--scenarios", str(fixed)]) == 0
