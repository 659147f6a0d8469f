"""Structured output in the replay (docs/replay.md, "Structured output"): each client sends a request's
format the way SGLang takes it, or only in the prompt, and every answer with a format is checked after its
reasoning and recorded with the first error. End to end against the twin over real HTTP."""

from __future__ import annotations

import numpy as np
import orjson
import pytest

from replay.answer_check import AnswerCheck, answer_text
from replay.clients import openai_chat_client, openai_completions_client, sglang_client
from replay.clients.client_protocol import SendOptions
from replay.prepared_request import PreparedRequest
from replay.recording.requests_reader import read_requests
from replay.runner import ReplayConfig, run_replay
from replay_sglang_peer import make_workload
from twin_process import running_sim
from workloads.prompts.response_format import (
    JSON_MARKER,
    REGEX_MARKER,
    StructuredOutput,
    parse_response_format,
    with_structured_output,
)

TICKET = {
    "type": "object",
    "properties": {"priority": {"enum": ["low", "high"]}, "summary": {"type": "string"}},
    "required": ["priority", "summary"],
}
TICKET_FORMAT = parse_response_format(
    {"type": "json_schema", "json_schema": {"name": "ticket", "schema": TICKET, "strict": True}}
)
YES_NO = parse_response_format({"type": "regex", "regex": "(yes|no)"})
JSON_OBJECT = parse_response_format({"type": "json_object"})
OPTIONS = SendOptions(base_url="http://127.0.0.1:1", run_id="t", request_timeout_s=5.0)
R1 = ("--model-path", "deepseek-ai/DeepSeek-R1", "--reasoning-parser", "deepseek-r1")


def _request(response_format, constrained: bool, prompt: str | None = None) -> PreparedRequest:
    ids = np.arange(100, 132, dtype=np.int32)
    return PreparedRequest(
        "r1", None, None, 0.0, ids, 64, prompt=prompt, answer_check=AnswerCheck.of(response_format), constrained=constrained
    )  # fmt: skip


def _bodies(request: PreparedRequest) -> dict[str, dict]:
    return {
        "native": orjson.loads(sglang_client.build_body(request, OPTIONS)),
        "chat": orjson.loads(openai_chat_client.build_body(request, OPTIONS)),
        "completions": orjson.loads(openai_completions_client.build_body(request, OPTIONS)),
    }


def test_constrained_requests_send_the_format_as_sglang_takes_it():
    schema = _bodies(_request(TICKET_FORMAT, True))
    assert orjson.loads(schema["native"]["sampling_params"]["json_schema"]) == TICKET  # a JSON string
    assert "input_ids" in schema["native"] and "text" not in schema["native"]
    for route in ("chat", "completions"):
        assert schema[route]["response_format"] == {
            "type": "json_schema",
            "json_schema": {"name": "ticket", "schema": TICKET, "strict": True},
        }
        assert "regex" not in schema[route]
    regex = _bodies(_request(YES_NO, True))
    assert regex["native"]["sampling_params"]["regex"] == "(yes|no)"
    assert "json_schema" not in regex["native"]["sampling_params"]
    assert regex["chat"]["regex"] == regex["completions"]["regex"] == "(yes|no)"  # SGLang's extra field
    assert "response_format" not in regex["chat"]
    json_object = _bodies(_request(JSON_OBJECT, True))
    assert json_object["native"]["sampling_params"]["json_schema"] == '{"type": "object"}'
    assert json_object["chat"]["response_format"] == {"type": "json_object"}


def test_prompt_only_requests_carry_the_schema_in_the_prompt_and_no_constraint():
    marker = JSON_MARKER + orjson.dumps(TICKET, option=orjson.OPT_SORT_KEYS).decode()
    chat_prompt = orjson.dumps([{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Help"}])
    bodies = _bodies(_request(TICKET_FORMAT, False, prompt=chat_prompt.decode()))
    native, chat, completions = bodies["native"], bodies["chat"], bodies["completions"]
    assert "input_ids" not in native and native["text"] == "Be brief.\nHelp" + marker
    assert set(native["sampling_params"]) == {"max_new_tokens", "ignore_eos", "temperature"}
    assert chat["messages"] == [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Help" + marker},
    ]
    assert completions["prompt"] == "Be brief.\nHelp" + marker
    for body in (chat, completions):
        assert not {"response_format", "regex", "json_schema"} & set(body)
    regex = _bodies(_request(YES_NO, False))
    assert regex["completions"]["prompt"].endswith(REGEX_MARKER + "(yes|no)")
    assert regex["native"]["text"].endswith(REGEX_MARKER + "(yes|no)")


def test_the_answer_is_the_text_after_reasoning_and_the_first_error_is_kept():
    assert answer_text('thinking about it</think>\n\n{"a": 1}\n') == '{"a": 1}'
    assert answer_text(' {"a": 1}') == '{"a": 1}'  # no inline reasoning: the whole text
    ticket = AnswerCheck.of(TICKET_FORMAT)
    assert ticket.first_error('{"priority": "low", "summary": "late parcel"}') is None
    assert ticket.first_error('{"priority": "urgent", "summary": "x"}') == (
        "$.priority: 'urgent' is not one of ['low', 'high']"
    )
    assert ticket.first_error('{"priority": "low"}') == "$: 'summary' is a required property"
    assert ticket.first_error('Sure! {"priority": "low"}').startswith("not JSON: ")
    assert ticket.first_error('{"priority": "low", "summ').startswith("not JSON: ")  # truncated
    assert AnswerCheck.of(JSON_OBJECT).first_error("[1, 2]") == "not a JSON object: a list"
    assert AnswerCheck.of(YES_NO).first_error("yes") is None
    assert AnswerCheck.of(YES_NO).first_error("yes, sure").startswith("the answer does not match the regex")


def _structured_workload():
    """12 requests of R1 traffic: a stable third constrained to the ticket schema, another share prompt-only,
    the rest free-form."""
    workload = make_workload(
        [i * 0.05 for i in range(12)], input_tokens=48, output_tokens=60, reasoning_tokens=[12] * 12
    )
    workload = with_structured_output(workload, StructuredOutput(0.35, TICKET_FORMAT, constrain=True))
    return with_structured_output(workload, StructuredOutput(0.8, TICKET_FORMAT, constrain=False))


def _check_records(rows: list[dict]) -> None:
    ok = [r for r in rows if r["status"] == "ok"]
    assert len(ok) == len(rows) == 12, [(r["error_kind"], r["error_message"]) for r in rows]
    constrained = [r for r in rows if r["constrained"] is True]
    prompt_only = [r for r in rows if r["constrained"] is False]
    free = [r for r in rows if r["response_format_type"] is None]
    assert constrained and prompt_only and free
    assert all(r["response_format_type"] == "json_schema" for r in constrained + prompt_only)
    assert [(r["answer_valid"], r["answer_error"]) for r in constrained] == [(True, None)] * len(constrained)
    assert all(r["answer_valid"] is None and r["answer_error"] is None and r["constrained"] is None for r in free)
    # Without the constraint the twin wraps or truncates a share of answers: recorded, with why.
    invalid = [r for r in prompt_only if r["answer_valid"] is False]
    assert invalid and all(r["answer_error"].startswith("not JSON: ") for r in invalid)
    assert all(r["answer_error"] is None for r in prompt_only if r["answer_valid"])


@pytest.mark.timeout(60)
@pytest.mark.parametrize("backend", ["sglang", "openai-chat", "openai-completions"])
def test_answers_are_checked_against_their_schema_end_to_end(tmp_path, twin_r1, backend):
    workload = _structured_workload()
    config = ReplayConfig(url=twin_r1, backend=backend, require_reasoning=True, request_timeout_s=30)
    run_replay(workload, config, tmp_path)
    rows = read_requests(tmp_path).to_pylist()
    _check_records(rows)
    for row in rows:
        assert row["completion_tokens"] == 60  # the constraint does not change the enforced length


@pytest.mark.timeout(60)
def test_native_answers_are_read_from_incremental_streams_too(tmp_path):
    workload = _structured_workload()
    with running_sim(*R1, "--sim-unconstrained-failure-rate", "0.5", "--incremental-streaming-output") as (url, _):
        run_replay(workload, ReplayConfig(url=url, require_reasoning=True, request_timeout_s=30), tmp_path)
    _check_records(read_requests(tmp_path).to_pylist())


@pytest.mark.timeout(60)
def test_a_constrained_answer_cut_short_by_its_length_is_recorded_invalid(tmp_path, twin_r1):
    """4 answer tokens cannot hold the smallest ticket: the constraint cannot save a too-short budget."""
    workload = make_workload([0.0], input_tokens=48, output_tokens=16, reasoning_tokens=[12])
    workload = with_structured_output(workload, StructuredOutput(1.0, TICKET_FORMAT, constrain=True))
    run_replay(workload, ReplayConfig(url=twin_r1, require_reasoning=True, request_timeout_s=30), tmp_path)
    (row,) = read_requests(tmp_path).to_pylist()
    assert (row["status"], row["finish_reason"], row["constrained"], row["answer_valid"]) == (
        "ok",
        "length",
        True,
        False,
    )
    assert row["answer_error"].startswith("not JSON: ")


@pytest.fixture(scope="module")
def twin_r1():
    with running_sim(*R1, "--sim-unconstrained-failure-rate", "0.5") as (url, _):
        yield url
