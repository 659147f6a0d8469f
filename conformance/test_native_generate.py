"""Native /generate against SGLang's own request and response code.

Requests: every body the replay client builds passes SGLang's HTTP contract gate (api_contract, the schema
`sglang serve` refuses bad bodies with), parses as GenerateReqInput the way FastAPI parses it, normalizes
(normalize_batch_and_arguments) and yields SamplingParams that verify, with the length, ignore_eos and
streaming it means, and no field SGLang drops (but the twin-only reasoning length, sent only to the twin).
Responses: every chunk and body the twin sends decodes as SGLang's GenerateResponse contract; every
meta_info key is one SGLang's contract or its tokenizer manager / request timing code writes (but the twin-only
TTFT parts, on the final chunk only, which the replay client reads only from the twin).
"""

from __future__ import annotations

import dataclasses
import importlib.util
from pathlib import Path

import orjson
import pytest
from pydantic import TypeAdapter
from replay_bodies import TWIN_FIELD, options, prepared
from sglang.api.v1.api_types import GenerateMetaInfo, GenerateResponse
from sglang.srt.entrypoints.api_contract import generate_contract_error
from sglang.srt.managers.io_struct import GenerateReqInput
from sglang.srt.sampling.sampling_params import SamplingParams
from twin_http import json_events, post_json, post_sse

from replay.clients import sglang_client

VOCAB_SIZE = 129280  # DeepSeek-V3/R1


def test_every_request_the_replay_client_sends_is_one_sglang_takes_as_meant(record_property):
    problems, n = [], 0
    fields = {f.name for f in dataclasses.fields(GenerateReqInput)}
    for to_twin in (False, True):
        for require_reasoning in (False, True):
            n += 1
            body = orjson.loads(sglang_client.build_body(prepared(None), options(to_twin, require_reasoning)))
            if (error := generate_contract_error(body)) is not None:
                problems.append(f"contract gate: {error}")
            request = TypeAdapter(GenerateReqInput).validate_python(body)
            request.normalize_batch_and_arguments()
            sampling = SamplingParams(**request.sampling_params)
            sampling.normalize(None)
            sampling.verify(VOCAB_SIZE)
            meant = (24, True, True, require_reasoning)
            read = (sampling.max_new_tokens, sampling.ignore_eos, request.stream, request.require_reasoning)
            if read != meant:
                problems.append(f"read as {read}, meant {meant}")
            dropped = set(body) - fields
            if dropped != ({TWIN_FIELD} if to_twin else set()):
                problems.append(f"fields SGLang ignores: {sorted(dropped)}")
    record_property("checked", f"{n} bodies: contract gate, GenerateReqInput, SamplingParams.verify")
    assert not problems, "\n".join(problems)


# Where SGLang writes meta_info beyond its contract (read as text: the tokenizer manager imports fastapi).
META_WRITERS = ("sglang.srt.managers.tokenizer_manager", "sglang.srt.observability.req_time_stats")


def _sglang_meta_keys() -> tuple[set[str], str]:
    """meta_info keys SGLang writes: its contract's, and the source of the code that sets the others."""
    sources = "".join(Path(_origin(m)).read_text() for m in META_WRITERS)
    return set(GenerateMetaInfo.__struct_fields__), sources


def _origin(module: str) -> str:
    """The source file of an installed module, found without importing it."""
    spec = importlib.util.find_spec(module)
    assert spec is not None and spec.origin is not None, module
    return spec.origin


def _check_meta(meta: dict, final: bool, where: str, problems: list[str]) -> None:
    contract, sources = _sglang_meta_keys()
    if (sglang_client.TWIN_TTFT_PARTS_KEY in meta) != final:
        problems.append(f"{where}: the twin's TTFT parts {'missing from' if final else 'on'} a chunk")
    for key in meta:
        if key == sglang_client.TWIN_TTFT_PARTS_KEY:
            continue  # twin-only (docs/twin.md, "Where the time to first token goes")
        if key not in contract and f'"{key}"' not in sources:
            problems.append(f"{where}: meta_info.{key} is written nowhere in SGLang")
    if ("e2e_latency" in meta) != final:
        problems.append(
            f"{where}: e2e_latency {'missing from' if final else 'on'} a {'final' if final else 'partial'} chunk"
        )
    if final and meta["finish_reason"] != {"type": "length", "length": 24}:
        problems.append(f"{where}: finish_reason {meta['finish_reason']}")


@pytest.mark.parametrize("stream", [True, False])
def test_every_answer_the_twin_sends_decodes_as_sglangs_generate_response(stream, twin_r1, record_property):
    body = {**orjson.loads(sglang_client.build_body(prepared(None), options(True))), "stream": stream}
    if stream:
        chunks = json_events(post_sse(twin_r1.base_url, "/generate", body))
    else:
        status, answer = post_json(twin_r1.base_url, "/generate", body)
        assert status == 200, answer
        chunks = [answer]
    problems = []
    for i, chunk in enumerate(chunks):
        decoded = GenerateResponse.from_json_value(chunk)
        if decoded.meta_info is None or decoded.meta_info.completion_tokens != chunk["meta_info"]["completion_tokens"]:
            problems.append(f"chunk {i}: meta_info did not decode")
        _check_meta(chunk["meta_info"], i == len(chunks) - 1, f"chunk {i}", problems)
    last = chunks[-1]["meta_info"]
    if (last["completion_tokens"], last["reasoning_tokens"]) != (24, 10):
        problems.append(f"counts: {last}")
    record_property("checked", f"{len(chunks)} {'chunks' if stream else 'body'}: GenerateResponse, meta_info keys")
    assert not problems, "\n".join(problems)
