"""`costbench capture`: a gateway request log → a canonical Parquet workload that holds no prompt text.

What is kept: arrival offsets, the server's token counts (usage), reasoning lengths, per request the
dense ids of its chained prefix-block hashes (block_hasher.py), so prefix sharing survives and content
does not, and the request's response format: a schema (or regex) is the application's, written by its
developers and the same for every user, not user text, and the replay needs it to send what was sent.
What is dropped: the prompt text and messages, the model name, and the log's own session ids
(renamed s0, s1, ... by first appearance, since a conversation id can be a user identifier).
Sessions are taken from the log's session_id / conversation_id only; they are not inferred from prefixes.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pyarrow as pa

from workloads.canonical_parquet import write_canonical
from workloads.prompts.block_hasher import DEFAULT_BLOCK_TOKENS
from workloads.prompts.token_counter import load_token_counter
from workloads.readers.gateway_reader import read_gateway
from workloads.workload import WORKLOAD_SCHEMA, Workload


def without_text(workload: Workload) -> Workload:
    """The same workload with prompt = null everywhere and session ids renamed s0, s1, ..."""
    table = workload.table
    dense: dict[str, str] = {}
    sessions = [None if s is None else dense.setdefault(s, f"s{len(dense)}") for s in table["session_id"].to_pylist()]
    replacements = (("prompt", pa.nulls(table.num_rows, pa.string())), ("session_id", pa.array(sessions, pa.string())))
    for name, column in replacements:
        at = WORKLOAD_SCHEMA.get_field_index(name)
        table = table.set_column(at, WORKLOAD_SCHEMA.field(name), column)
    return replace(workload, table=table)


def capture_gateway_log(
    log_path: str | Path,
    out_path: str | Path,
    block_size: int = DEFAULT_BLOCK_TOKENS,
    tokenizer_path: str | Path | None = None,
) -> Workload:
    """Read `log_path`, strip its text and write `out_path`; returns the written (text-free) workload.

    Raises TraceFormatError for a bad log, ValueError for an unusable tokenizer or block size.
    Nothing is written unless the whole log reads.
    """
    counter = load_token_counter(tokenizer_path)
    captured = without_text(read_gateway(log_path, counter, block_size))
    write_canonical(captured, out_path)
    return captured
