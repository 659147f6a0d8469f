"""Structured output in workloads (docs/workloads.md, "Structured output"): a scenario gives a stable share
of its requests a response format, the canonical Parquet keeps it, a capture keeps a request's schema while
dropping its text, and a format that is not one fails before anything runs, naming the file and line."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import orjson
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import yaml

from replay_sglang_peer import make_workload
from workloads.canonical_parquet import read_canonical, write_canonical
from workloads.gateway_capture import capture_gateway_log
from workloads.prompts.response_format import (
    FormatKind,
    StructuredOutput,
    load_response_format,
    parse_response_format,
    with_structured_output,
)
from workloads.scenarios import ScenarioError, load_scenarios
from workloads.workload import TraceFormatError

COSTBENCH = str(Path(sys.executable).parent / "costbench")
TICKET = {
    "type": "object",
    "properties": {"priority": {"enum": ["low", "high"]}, "summary": {"type": "string", "maxLength": 80}},
    "required": ["priority", "summary"],
    "additionalProperties": False,
}
TICKET_FORMAT = {"type": "json_schema", "json_schema": {"name": "ticket", "schema": TICKET, "strict": True}}
SCENARIO = {
    "name": "tickets",
    "trace": "traces/t.jsonl",
    "format": "mooncake",
    "start_s": 0,
    "duration_s": 5,
    "speedup": 1,
    "endpoint": "r1",
    "slo": {"ttft_ms": 2000, "tpot_ms": 100},
}


def _scenarios_file(tmp_path: Path, structured: dict) -> Path:
    path = tmp_path / "scenarios.yaml"
    path.write_text(yaml.safe_dump({"scenarios": [{**SCENARIO, "structured_output": structured}]}, sort_keys=False))
    return path


def _line_of(path: Path, text: str) -> int:
    return next(n for n, line in enumerate(path.read_text().splitlines(), 1) if text in line)


def test_a_scenario_gives_the_same_share_of_requests_the_format_every_time(tmp_path):
    path = _scenarios_file(tmp_path, {"share": 0.3, "response_format": TICKET_FORMAT, "constrain": False})
    structured = load_scenarios(path, tmp_path)["tickets"].structured_output
    assert structured is not None and (structured.share, structured.constrain) == (0.3, False)
    workload = make_workload([i * 0.01 for i in range(2000)])
    once = with_structured_output(workload, structured).table
    chosen = [rid for rid, f in zip(once["request_id"].to_pylist(), once["response_format"].to_pylist()) if f]
    assert 0.26 < len(chosen) / 2000 < 0.34  # a hash share, not an exact count
    again = with_structured_output(make_workload([i * 0.01 for i in range(2000)]), structured).table
    assert again.equals(once)  # the same requests, every week, in every process
    assert set(once.filter(once["response_format"].is_valid())["constrained"].to_pylist()) == {False}
    assert once.filter(once["response_format"].is_null())["constrained"].null_count == 2000 - len(chosen)
    # A larger share keeps the smaller share's requests: raising it adds requests, it does not reshuffle them.
    wider = with_structured_output(workload, StructuredOutput(0.6, structured.response_format, True)).table
    wider_chosen = {rid for rid, f in zip(wider["request_id"].to_pylist(), wider["response_format"].to_pylist()) if f}
    assert set(chosen) < wider_chosen
    # A request that already asks for a format (a captured one) keeps its own.
    own = parse_response_format({"type": "regex", "regex": "[0-9]+"}).text
    table = workload.table.set_column(
        workload.table.schema.get_field_index("response_format"),
        "response_format",
        pa.array([own] * 2000, pa.string()),
    )
    kept = with_structured_output(type(workload)(**{**_fields(workload), "table": table}), structured).table
    assert set(kept["response_format"].to_pylist()) == {own}


def _fields(workload) -> dict:
    return {name: getattr(workload, name) for name in workload.__dataclass_fields__}


def test_the_format_survives_a_canonical_parquet_round_trip_and_older_files_read_as_free_form(tmp_path):
    structured = StructuredOutput(0.5, parse_response_format(TICKET_FORMAT), constrain=True)
    plain = make_workload([0.0, 0.5, 1.0, 1.5, 2.0, 2.5])
    workload = with_structured_output(plain, structured)
    back = read_canonical(write_canonical(workload, tmp_path / "w.parquet"))
    assert back.table.equals(workload.table) and back.content_hash == workload.content_hash
    stored = [f for f in back.table["response_format"].to_pylist() if f is not None]
    assert stored and all(load_response_format(f).kind is FormatKind.JSON_SCHEMA for f in stored)
    assert orjson.loads(stored[0]) == TICKET_FORMAT  # exactly the OpenAI shape, canonical JSON
    assert back.content_hash != plain.content_hash
    # A file written before the columns existed: its requests are free-form, and it hashes as before.
    old = tmp_path / "old.parquet"
    pq.write_table(
        read_canonical(write_canonical(plain, old)).table.drop_columns(["response_format", "constrained"]), old
    )
    older = read_canonical(old)
    assert older.table["response_format"].null_count == older.num_requests == 6
    assert older.content_hash == plain.content_hash


def test_a_capture_keeps_the_schema_and_drops_the_text(tmp_path):
    log = tmp_path / "gateway.jsonl"
    usage = {"usage": {"prompt_tokens": 20, "completion_tokens": 30}}
    lines = [
        {"timestamp": 1, "request": {"messages": [{"role": "user", "content": "secret order 4711"}],
                                     "response_format": TICKET_FORMAT}, "response": usage},
        {"timestamp": 2, "request": {"prompt": "my phone is 555", "regex": "(yes|no)"}, "response": usage},
        {"timestamp": 3, "request": {"prompt": "free text", "response_format": {"type": "text"}}, "response": usage},
        {"timestamp": 4, "request": {"prompt": "any json", "response_format": {"type": "json_object"}}, "response": usage},
    ]  # fmt: skip
    log.write_text("".join(json.dumps(line) + "\n" for line in lines))
    capture_gateway_log(log, tmp_path / "c.parquet")
    rows = read_canonical(tmp_path / "c.parquet").table.to_pylist()
    assert [r["prompt"] for r in rows] == [None] * 4
    formats = [r["response_format"] and orjson.loads(r["response_format"]) for r in rows]
    assert formats == [TICKET_FORMAT, {"type": "regex", "regex": "(yes|no)"}, None, {"type": "json_object"}]
    assert [r["constrained"] for r in rows] == [True, True, None, True]  # the application sent them to the server
    stored = (tmp_path / "c.parquet").read_bytes()
    assert b"secret order" not in stored and b"555" not in stored


@pytest.mark.parametrize(
    ("structured", "key", "reason"),
    [
        (
            {"share": 0.5, "response_format": {"type": "json_schema",
                                               "json_schema": {"name": "t", "schema": {"type": "objekt"}}}},
            "response_format",
            "not valid JSON Schema (Draft 2020-12) at $.type: 'objekt' is not valid under any of the given schemas",
        ),
        (
            {"share": 0.5, "response_format": {"type": "regex", "regex": "(yes|no"}},
            "response_format",
            "regex '(yes|no' does not compile: missing ), unterminated subpattern at position 0",
        ),
    ],
)  # fmt: skip
def test_a_bad_format_in_a_scenario_fails_the_file_naming_its_line(tmp_path, structured, key, reason):
    path = _scenarios_file(tmp_path, structured)
    with pytest.raises(ScenarioError) as error:
        load_scenarios(path, tmp_path)
    line = _line_of(path, f"{key}:")
    assert str(error.value) == f"{path}:{line}: scenarios[0].structured_output.{key}: {reason} (scenario 'tickets')"


def test_a_schema_file_that_is_not_json_is_named_with_its_own_line(tmp_path):
    (tmp_path / "ticket.json").write_text('{\n  "type": "object",\n  "properties": {,}\n}\n')
    path = _scenarios_file(tmp_path, {"share": 1, "schema_file": "ticket.json"})
    with pytest.raises(ScenarioError) as error:
        load_scenarios(path, tmp_path)
    line = _line_of(path, "schema_file:")
    assert str(error.value) == (
        f"{path}:{line}: scenarios[0].structured_output.schema_file: {tmp_path / 'ticket.json'}:3: not JSON: "
        "Expecting property name enclosed in double quotes (scenario 'tickets')"
    )
    (tmp_path / "ticket.json").write_text(json.dumps(TICKET))
    good = load_scenarios(path, tmp_path)["tickets"].structured_output
    assert good is not None and orjson.loads(good.response_format.text)["json_schema"]["name"] == "ticket"


def test_a_captured_request_with_a_bad_schema_fails_the_capture_with_its_line_and_writes_nothing(tmp_path):
    usage = {"usage": {"prompt_tokens": 20, "completion_tokens": 30}}
    bad = {"type": "json_schema", "json_schema": {"name": "t", "schema": {"type": "object", "required": "priority"}}}
    log = tmp_path / "gateway.jsonl"
    log.write_text(
        json.dumps({"timestamp": 1, "request": {"prompt": "a"}, "response": usage})
        + "\n"
        + json.dumps({"timestamp": 2, "request": {"prompt": "b", "response_format": bad}, "response": usage})
        + "\n"
    )
    out = tmp_path / "out.parquet"
    with pytest.raises(TraceFormatError) as error:
        capture_gateway_log(log, out)
    assert str(error.value) == (
        f"{log}:2: request.response_format: not valid JSON Schema (Draft 2020-12) at $.required: "
        "'priority' is not of type 'array'"
    )
    # As the user runs it: one line on stderr, exit status 2, nothing written.
    done = subprocess.run([COSTBENCH, "capture", str(log), "-o", str(out)], capture_output=True, text=True)
    assert done.returncode == 2 and done.stderr.strip() == f"costbench: error: {error.value}"
    assert not out.exists() and list(tmp_path.iterdir()) == [log]


def test_a_canonical_file_with_a_bad_format_fails_naming_its_row(tmp_path):
    workload = make_workload([0.0, 1.0, 2.0])
    table = workload.table.set_column(
        workload.table.schema.get_field_index("response_format"),
        "response_format",
        pa.array([None, None, '{"type": "regex", "regex": "[a-"}'], pa.string()),
    )
    pq.write_table(table, tmp_path / "w.parquet")
    with pytest.raises(TraceFormatError) as error:
        read_canonical(tmp_path / "w.parquet")
    assert error.value.reason.startswith("row 3: regex '[a-' does not compile")


def test_the_documented_example_is_a_valid_structured_output(tmp_path):
    page = (Path(__file__).resolve().parents[2] / "docs/workloads.md").read_text()
    example = page.split("```yaml\nstructured_output:\n", 1)[1].split("```", 1)[0]
    structured = yaml.safe_load("structured_output:\n" + example)["structured_output"]
    loaded = load_scenarios(_scenarios_file(tmp_path, structured), tmp_path)["tickets"].structured_output
    assert loaded is not None and (loaded.share, loaded.constrain, loaded.min_valid_rate) == (0.3, True, 0.99)
    assert loaded.response_format.kind is FormatKind.JSON_SCHEMA
