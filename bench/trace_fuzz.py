"""Fuzzing the trace readers: does any mutated file read as garbage, or crash a reader?

For each format (mooncake, azure, burstgpt, sharegpt, gateway, canonical) it makes a small valid seed
(the first rows of the bundled traces, made-up BurstGPT/ShareGPT/gateway records, a canonical Parquet
file written from the Mooncake seed), then N mutated copies. Every mutation is labelled by construction:
- breaking: the result is no valid trace (a cell dropped or added, rows merged, `1_000`, `+7` or
  non-ASCII digits, a negative or huge count, a NaN timestamp, a truncated line, a duplicate JSON key,
  a wrong JSON type, a null inside a list, a null inside prefix_blocks, ...);
- benign: the same trace written differently (blank lines, CRLF, a BOM, columns or keys reordered, an
  unknown column or field, ...);
- corrupt: bytes of a Parquet file overwritten; whether the content changed is known only by reading it.
Each copy is read through workloads.readers.reader_registry.read_trace and counted as:
- clean error: TraceFormatError (for a benign mutation that is a false refusal, counted apart too);
- accepted valid: benign (or harmlessly corrupt) and read with the seed's request count, token sums and
  arrival sum;
- accepted garbage: a breaking mutation read without error, or a benign/corrupt one whose content
  changed. Must be 0;
- crash: any other exception. Must be 0.

    .venv/bin/python bench/trace_fuzz.py [--per-format 300] [--seed 0] [--formats azure,burstgpt]
                                         [--findings FILE] [--dump DIR]

--findings appends one reproducible line per garbage or crash case; --dump writes those files.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import tempfile
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from workloads.canonical_parquet import write_canonical  # noqa: E402
from workloads.readers.mooncake_reader import read_mooncake  # noqa: E402
from workloads.readers.reader_registry import read_trace  # noqa: E402
from workloads.workload import TraceFormatError, Workload  # noqa: E402
from workloads.workload_builder import MAX_REQUEST_TOKENS  # noqa: E402

TRACES = REPO / "workloads" / "traces"
FORMATS = ("mooncake", "azure", "burstgpt", "sharegpt", "gateway", "canonical")
SUFFIX = {"mooncake": ".jsonl", "azure": ".csv", "burstgpt": ".csv", "sharegpt": ".json", "gateway": ".jsonl"}
SEED_ROWS = 30
OTHER_DIGITS = ("\u0660", "\u0966", "\uff10")  # Arabic-Indic, Devanagari, fullwidth zero
HUGE = ("2000000000", "2e9", str(MAX_REQUEST_TOKENS + 1), "99999999999999999999")
OUTCOMES = ("clean error", "accepted valid", "accepted garbage", "crash")

# A mutator turns the seed into (file bytes, what it did), or None when it does not apply to this seed.
Mutator = Callable[[random.Random], tuple[bytes, str] | None]


@dataclass(frozen=True, slots=True)
class Mutation:
    name: str
    label: str  # breaking | benign | corrupt
    make: Mutator


@dataclass(slots=True)
class Tally:
    outcomes: Counter[str] = field(default_factory=Counter)
    benign_refused: int = 0
    by_mutation: Counter[tuple[str, str, str]] = field(default_factory=Counter)  # (mutation, label, outcome)
    seed_error: str = ""  # the unmutated seed did not read: nothing was fuzzed
    findings: list[str] = field(default_factory=list)


def summary(workload: Workload) -> tuple[int, int, int, float]:
    """What a benign mutation must keep: request count, token sums and arrival sum."""
    table = workload.table
    return (
        table.num_rows,
        int(pc.sum(table["input_tokens"]).as_py()),
        int(pc.sum(table["output_tokens"]).as_py()),
        round(float(pc.sum(table["arrival_s"]).as_py()), 6),
    )


# --- CSV ----------------------------------------------------------------------------------------


class CsvSeed:
    """A CSV trace as a header and rows of cells; `read` names the columns the reader reads."""

    def __init__(self, header: list[str], rows: list[list[str]], counts: list[str], stamp: str, read: list[str]):
        self.header, self.rows = header, rows
        self.counts, self.stamp, self.read = counts, stamp, read

    def text(self, header: list[str] | None = None, rows: list[list[str]] | None = None) -> str:
        lines = [header or self.header, *(rows if rows is not None else self.rows)]
        return "".join(",".join(cells) + "\n" for cells in lines)

    def copy_rows(self) -> list[list[str]]:
        return [list(row) for row in self.rows]

    def set_cell(self, rng: random.Random, column: str, value: Callable[[str], str]) -> tuple[bytes, str]:
        rows = self.copy_rows()
        r, c = rng.randrange(len(rows)), self.header.index(column)
        old = rows[r][c]
        rows[r][c] = value(old)
        return self.text(rows=rows).encode(), f"row {r}: {column} {old!r} -> {rows[r][c]!r}"

    def mutations(self, absurd_stamps: tuple[str, ...], text_column: str | None) -> list[Mutation]:
        def count_cell(value: Callable[[str, random.Random], str]) -> Mutator:
            return lambda rng: self.set_cell(rng, rng.choice(self.counts), lambda old: value(old, rng))

        def stamp_cell(values: tuple[str, ...]) -> Mutator:
            return lambda rng: self.set_cell(rng, self.stamp, lambda old: rng.choice(values))

        def drop_cell(rng: random.Random) -> tuple[bytes, str]:
            rows = self.copy_rows()
            r, c = rng.randrange(len(rows)), rng.randrange(len(self.header))
            del rows[r][c]
            return self.text(rows=rows).encode(), f"row {r}: cell {c} dropped"

        def add_cell(rng: random.Random) -> tuple[bytes, str]:
            rows = self.copy_rows()
            r = rng.randrange(len(rows))
            rows[r].insert(rng.randrange(len(rows[r]) + 1), rng.choice(["7", "x", ""]))
            return self.text(rows=rows).encode(), f"row {r}: a cell added"

        def merge_rows(rng: random.Random) -> tuple[bytes, str]:
            lines = self.text().splitlines(keepends=True)
            r = rng.randrange(1, len(lines) - 1)
            lines[r] = lines[r].rstrip("\n")
            return "".join(lines).encode(), f"lines {r + 1} and {r + 2} merged"

        def truncate_line(rng: random.Random) -> tuple[bytes, str]:
            lines = self.text().splitlines(keepends=True)
            r = rng.randrange(1, len(lines))
            cut = rng.randrange(1, lines[r].rindex(","))  # inside the row, before its last delimiter
            lines[r] = lines[r][:cut] + ("\n" if r < len(lines) - 1 else "")
            return "".join(lines).encode(), f"line {r + 1} cut at {cut}"

        def not_utf8(rng: random.Random) -> tuple[bytes, str]:
            data = bytearray(self.text().encode())
            at = rng.randrange(data.index(b"\n") + 1, len(data) - 1)
            data[at:at] = rng.choice([b"\xff", b"\xc3", b"\xe2\x82"])
            return bytes(data), f"undecodable byte at {at}"

        def unclosed_quote(rng: random.Random) -> tuple[bytes, str]:
            rows = self.copy_rows()
            r, c = rng.randrange(len(rows)), rng.randrange(len(self.header))
            rows[r][c] = '"' + rows[r][c]
            return self.text(rows=rows).encode(), f"row {r}: quote opened in cell {c}"

        def header_duplicate(rng: random.Random) -> tuple[bytes, str] | None:
            others = [i for i, name in enumerate(self.header) if name not in self.read]
            if not others:
                return None
            header = list(self.header)
            header[rng.choice(others)] = rng.choice(self.read)
            return self.text(header=header).encode(), f"header {header}"

        def header_missing(rng: random.Random) -> tuple[bytes, str]:
            header = list(self.header)
            header.remove(rng.choice(self.read))
            return self.text(header=header).encode(), f"header {header}"

        def blank_lines(rng: random.Random) -> tuple[bytes, str]:
            lines = self.text().splitlines(keepends=True)
            for _ in range(rng.randint(1, 3)):
                lines.insert(rng.randrange(1, len(lines) + 1), rng.choice(["\n", "  \n", "\t\n"]))
            return "".join(lines).encode(), "blank lines"

        def reorder(rng: random.Random) -> tuple[bytes, str]:
            order = list(range(len(self.header)))
            while order == sorted(order):
                rng.shuffle(order)
            header = [self.header[i] for i in order]
            rows = [[row[i] for i in order] for row in self.rows]
            return self.text(header, rows).encode(), f"columns {header}"

        def extra_column(rng: random.Random) -> tuple[bytes, str]:
            at = rng.randrange(len(self.header) + 1)
            header = [*self.header[:at], "Note", *self.header[at:]]
            notes = ['"a, b"', '"two\nlines"', "x", ""]
            rows = [[*row[:at], rng.choice(notes), *row[at:]] for row in self.rows]
            return self.text(header, rows).encode(), f"column Note at {at} (quoted commas, newlines)"

        def quote_cells(rng: random.Random) -> tuple[bytes, str]:
            rows = [[f'"{cell}"' if rng.random() < 0.3 else cell for cell in row] for row in self.rows]
            return self.text(rows=rows).encode(), "cells quoted"

        def pad_counts(rng: random.Random) -> tuple[bytes, str]:
            at = [self.header.index(column) for column in self.counts]
            rows = [[f" {cell}\t" if i in at else cell for i, cell in enumerate(row)] for row in self.rows]
            return self.text(rows=rows).encode(), "counts padded with a space and a tab"

        def unknown_text(rng: random.Random) -> tuple[bytes, str] | None:
            if text_column is None:
                return None
            return self.set_cell(rng, text_column, lambda old: '"' + old + ', with ""quotes""\nand a newline"')

        mutations = [
            Mutation("cell dropped", "breaking", drop_cell),
            Mutation("cell added", "breaking", add_cell),
            Mutation("rows merged", "breaking", merge_rows),
            Mutation("truncated line", "breaking", truncate_line),
            Mutation("count 1_000", "breaking", count_cell(lambda old, rng: old[:1] + "_" + (old[1:] or "0"))),
            Mutation("count +7", "breaking", count_cell(lambda old, rng: "+" + old)),
            Mutation(
                "count non-ASCII digits",
                "breaking",
                count_cell(lambda old, rng: "".join(chr(ord(rng.choice(OTHER_DIGITS)) + int(d)) for d in old)),
            ),
            Mutation("count negative", "breaking", count_cell(lambda old, rng: "-" + str(int(old) + 1))),
            Mutation("count huge", "breaking", count_cell(lambda old, rng: rng.choice(HUGE))),
            Mutation(
                "count float", "breaking", count_cell(lambda old, rng: rng.choice([old + ".5", old + ".0", "1e3"]))
            ),
            Mutation("count empty", "breaking", count_cell(lambda old, rng: "")),
            Mutation("timestamp NaN/inf", "breaking", stamp_cell(("nan", "NaN", "inf", "-inf", "Infinity"))),
            Mutation("timestamp absurd", "breaking", stamp_cell(absurd_stamps)),
            Mutation("not UTF-8", "breaking", not_utf8),
            Mutation("unclosed quote", "breaking", unclosed_quote),
            Mutation("header duplicate", "breaking", header_duplicate),
            Mutation("header column missing", "breaking", header_missing),
            Mutation("blank lines", "benign", blank_lines),
            Mutation("CRLF", "benign", lambda rng: (self.text().replace("\n", "\r\n").encode(), "CRLF")),
            Mutation("BOM", "benign", lambda rng: (b"\xef\xbb\xbf" + self.text().encode(), "BOM")),
            Mutation("no final newline", "benign", lambda rng: (self.text().rstrip("\n").encode(), "no final newline")),
            Mutation("columns reordered", "benign", reorder),
            Mutation("unknown column", "benign", extra_column),
            Mutation("cells quoted", "benign", quote_cells),
            Mutation("counts padded", "benign", pad_counts),
            Mutation("quoted text in an unread cell", "benign", unknown_text),
        ]
        if "Model" in self.read:  # BurstGPT: a row names its model
            mutations.append(
                Mutation("Model empty", "breaking", lambda rng: self.set_cell(rng, "Model", lambda old: ""))
            )
        return mutations


def azure_seed() -> CsvSeed:
    lines = (TRACES / "azure_conv_2023.csv").read_text().splitlines()
    header, rows = lines[0].split(","), [line.split(",") for line in lines[1 : SEED_ROWS + 1]]
    return CsvSeed(header, rows, ["ContextTokens", "GeneratedTokens"], "TIMESTAMP", list(header))


def burstgpt_seed() -> CsvSeed:
    rng = random.Random(7)  # made-up rows in the 8-column shape, a few failed and empty ones
    header = "Timestamp,Session ID,Elapsed time,Model,Request tokens,Response tokens,Total tokens,Log Type"
    rows, t = [], 0.0
    for i in range(SEED_ROWS):
        t += rng.choice([0.5, 1, 2.25, 7])
        request = 0 if i == 11 else rng.randint(20, 3000)
        response = 0 if i in (5, 17) else rng.randint(1, 900)
        session = rng.choice(["", "s1", "s2", "s3"])
        model = rng.choice(["ChatGPT", "GPT-4"])
        log = rng.choice(["Conversation log", "API log"])
        rows.append(
            [
                f"{t:g}",
                session,
                str(rng.randint(1, 30)),
                model,
                str(request),
                str(response),
                str(request + response),
                log,
            ]
        )
    read = ["Timestamp", "Session ID", "Model", "Request tokens", "Response tokens"]
    return CsvSeed(header.split(","), rows, ["Request tokens", "Response tokens"], "Timestamp", read)


# --- JSON ---------------------------------------------------------------------------------------


def _dumps(value: object) -> str:
    return json.dumps(value, ensure_ascii=False)


def _get(obj: Any, path: tuple[str | int, ...]) -> Any:
    for key in path:
        obj = obj[key]
    return obj


def _set(obj: dict, path: tuple[str | int, ...], value: object) -> None:
    _get(obj, path[:-1])[path[-1]] = value


def _drop(obj: dict, path: tuple[str | int, ...]) -> None:
    del _get(obj, path[:-1])[path[-1]]


def _with_duplicate(record: object, path: tuple[str | int, ...], value: object) -> str:
    """The record as JSON text with the key at `path` written twice: first the original, then `value`."""
    marker = "\u0001dup\u0001"
    copy = json.loads(json.dumps(record))
    holder = _get(copy, path[:-1])
    key = str(path[-1])
    rebuilt = {}
    for name, item in holder.items():
        rebuilt[name] = item
        if name == key:
            rebuilt[marker] = value
    if len(path) == 1:
        copy = rebuilt
    else:
        _set(copy, path[:-1], rebuilt)
    return _dumps(copy).replace(_dumps(marker), _dumps(key))


@dataclass(frozen=True, slots=True)
class JsonField:
    """A field the reader reads, and values of the wrong type or range for it."""

    path: tuple[str | int, ...]
    wrong_types: tuple[object, ...]
    out_of_range: tuple[object, ...] = ()
    required: bool = True  # dropping it is breaking (an optional one has a documented meaning when absent)
    bad_literals: tuple[str, ...] = ("NaN", "Infinity", "+7", "1_000", "\u0663")  # not JSON at all


class JsonSeed:
    """A JSON Lines trace (one record a line) or a JSON document (one array of records)."""

    def __init__(self, records: list[dict], fields: Callable[[dict], list[JsonField]], lines: bool, lists: list[str]):
        self.records, self.fields, self.lines, self.lists = records, fields, lines, lists

    def text(self, records: list[str] | None = None) -> str:
        parts = records if records is not None else [_dumps(record) for record in self.records]
        if self.lines:
            return "".join(part + "\n" for part in parts)
        return "[\n" + ",\n".join(parts) + "\n]\n"

    def texts(self) -> list[str]:
        return [_dumps(record) for record in self.records]

    def pick(self, rng: random.Random) -> tuple[int, dict, JsonField]:
        index = rng.randrange(len(self.records))
        record = json.loads(json.dumps(self.records[index]))
        return index, record, rng.choice(self.fields(record))

    def replaced(self, index: int, text: str) -> bytes:
        texts = self.texts()
        texts[index] = text
        return self.text(texts).encode()

    def mutations(self) -> list[Mutation]:
        def set_value(values: Callable[[JsonField], tuple[object, ...]]) -> Mutator:
            def make(rng: random.Random) -> tuple[bytes, str] | None:
                index, record, spot = self.pick(rng)
                if not values(spot):
                    return None
                value = rng.choice(values(spot))
                _set(record, spot.path, value)
                return self.replaced(index, _dumps(record)), f"record {index}: {spot.path} = {value!r}"

            return make

        def literal(rng: random.Random) -> tuple[bytes, str]:
            index, record, spot = self.pick(rng)
            token = rng.choice(spot.bad_literals)
            marker = "\u0001lit\u0001"
            _set(record, spot.path, marker)
            return self.replaced(
                index, _dumps(record).replace(_dumps(marker), token)
            ), f"record {index}: {spot.path} = {token}"

        def duplicate(rng: random.Random) -> tuple[bytes, str]:
            index, record, spot = self.pick(rng)
            old = _get(record, spot.path)
            value = old + 1 if type(old) is int else [*old, 1] if isinstance(old, list) else f"{old}-other"
            text = _with_duplicate(record, spot.path, value)
            return self.replaced(index, text), f"record {index}: {spot.path} written twice, then {value!r}"

        def null_in_list(rng: random.Random) -> tuple[bytes, str] | None:
            index = rng.randrange(len(self.records))
            record = json.loads(json.dumps(self.records[index]))
            spots = [path for path in map(lambda p: tuple(p.split(".")), self.lists) if _has(record, path)]
            if not spots:
                return None
            path = rng.choice(spots)
            items = _get(record, path)
            items.insert(rng.randrange(len(items) + 1), None)
            return self.replaced(index, _dumps(record)), f"record {index}: null inside {path}"

        def drop_field(rng: random.Random) -> tuple[bytes, str] | None:
            index, record, spot = self.pick(rng)
            if not spot.required:
                return None
            _drop(record, spot.path)
            return self.replaced(index, _dumps(record)), f"record {index}: {spot.path} removed"

        def truncate(rng: random.Random) -> tuple[bytes, str]:
            texts = self.texts()
            index = rng.randrange(len(texts))
            cut = rng.randrange(1, len(texts[index]) - 1)
            texts[index] = texts[index][:cut]
            return self.text(texts).encode(), f"record {index} cut at {cut}"

        def not_object(rng: random.Random) -> tuple[bytes, str]:
            index = rng.randrange(len(self.records))
            value = rng.choice(["[1, 2]", '"text"', "7", "null"])
            return self.replaced(index, value), f"record {index} = {value}"

        def not_utf8(rng: random.Random) -> tuple[bytes, str]:
            data = bytearray(self.text().encode())
            at = rng.randrange(1, len(data) - 2)
            data[at:at] = rng.choice([b"\xff", b"\xc3\x28"])
            return bytes(data), f"undecodable byte at {at}"

        def blank_lines(rng: random.Random) -> tuple[bytes, str]:
            text = self.text()
            lines = text.splitlines(keepends=True)
            for _ in range(rng.randint(1, 3)):
                lines.insert(rng.randrange(0 if self.lines else 1, len(lines) + 1), rng.choice(["\n", "  \n"]))
            return "".join(lines).encode(), "blank lines"

        def unknown_field(rng: random.Random) -> tuple[bytes, str]:
            texts = self.texts()
            index = rng.randrange(len(texts))
            record = json.loads(texts[index])
            record["x_unknown"] = rng.choice([1, "text", None, [1, None], {"k": "v"}])
            texts[index] = _dumps(record)
            return self.text(texts).encode(), f"record {index}: unknown field x_unknown"

        def reorder_keys(rng: random.Random) -> tuple[bytes, str]:
            def shuffled(value: object) -> object:
                if isinstance(value, dict):
                    items = list(value.items())
                    rng.shuffle(items)
                    return {key: shuffled(item) for key, item in items}
                if isinstance(value, list):
                    return [shuffled(item) for item in value]
                return value

            return self.text([_dumps(shuffled(record)) for record in self.records]).encode(), "keys reordered"

        def spaced(rng: random.Random) -> tuple[bytes, str]:
            texts = [
                json.dumps(record, ensure_ascii=rng.random() < 0.5, separators=(" , ", " :  "))
                for record in self.records
            ]
            return self.text(texts).encode(), "whitespace and escapes changed"

        return [
            Mutation("duplicate key", "breaking", duplicate),
            Mutation("wrong type", "breaking", set_value(lambda spot: spot.wrong_types)),
            Mutation("out of range", "breaking", set_value(lambda spot: spot.out_of_range)),
            Mutation("not a JSON number", "breaking", literal),
            Mutation("null inside a list", "breaking", null_in_list),
            Mutation("field missing", "breaking", drop_field),
            Mutation("truncated record", "breaking", truncate),
            Mutation("not an object", "breaking", not_object),
            Mutation("not UTF-8", "breaking", not_utf8),
            Mutation("blank lines", "benign", blank_lines),
            Mutation("CRLF", "benign", lambda rng: (self.text().replace("\n", "\r\n").encode(), "CRLF")),
            Mutation("BOM", "benign", lambda rng: (b"\xef\xbb\xbf" + self.text().encode(), "BOM")),
            Mutation("unknown field", "benign", unknown_field),
            Mutation("keys reordered", "benign", reorder_keys),
            Mutation("whitespace", "benign", spaced),
        ]


def _has(record: object, path: tuple[str, ...]) -> bool:
    for key in path:
        if not isinstance(record, dict) or key not in record:
            return False
        record = record[key]
    return isinstance(record, list) and bool(record)


NOT_INT: tuple[object, ...] = ("12", True, None, 1.5, 12.0, [1], {})
NOT_INT_OR_ABSENT = tuple(value for value in NOT_INT if value is not None)  # null: the field is absent


def mooncake_seed() -> JsonSeed:
    with (TRACES / "mooncake_conversation.jsonl").open() as handle:
        records = [json.loads(next(handle)) for _ in range(SEED_ROWS)]

    def fields(record: dict) -> list[JsonField]:
        return [
            JsonField(("timestamp",), NOT_INT, (-1, -record["timestamp"] - 1, 10**15)),
            JsonField(("input_length",), NOT_INT, (-5, 0)),
            JsonField(("output_length",), NOT_INT, (-1, 2_000_000_000, MAX_REQUEST_TOKENS)),
            JsonField(("hash_ids",), ("1,2", 5, None, {}, [str(h) for h in record["hash_ids"]])),
        ]

    return JsonSeed(records, fields, lines=True, lists=["hash_ids"])


def gateway_seed() -> JsonSeed:
    system = {"role": "system", "content": "You are the support assistant of an example shop. Answer briefly."}
    questions = ["Where is my order?", "Can I change my address?", "Do you ship abroad?", "What is the returns policy?"]
    records = []
    for i in range(16):
        session = f"conv-{i % 5}"
        messages = [system, {"role": "user", "content": questions[i % 4] + f" (ticket {i})"}]
        usage: dict = {"prompt_tokens": 30 + 3 * i, "completion_tokens": 20 + i}
        if i % 3 == 0:
            usage["completion_tokens_details"] = {"reasoning_tokens": 5 + i}
        response: dict = {"usage": usage} if i != 9 else {"error": {"message": "upstream timeout"}}
        records.append(
            {
                "timestamp": f"2025-03-01T12:{i // 6:02d}:{(i * 7) % 60:02d}.{i}Z",
                "session_id": session,
                "request": {"model": "deepseek-v3", "messages": messages, "max_tokens": 256},
                "response": response,
            }
        )

    def fields(record: dict) -> list[JsonField]:
        spots = [
            JsonField(
                ("timestamp",),
                (True, None, [], {}),
                ("2025-13-01T00:00:00Z", "yesterday", "NaN", -5, "1970-01-01T00:00:00Z"),
            ),
            JsonField(("request", "messages"), ("hello", 5, None, {}, [])),
            JsonField(("session_id",), (True, [], {}), required=False),
        ]
        usage = record["response"].get("usage")
        if usage is not None:
            counts = (-1, 2_000_000_000)
            spots += [
                JsonField(("response", "usage", "prompt_tokens"), NOT_INT_OR_ABSENT, (*counts, 0), required=False),
                JsonField(("response", "usage", "completion_tokens"), NOT_INT_OR_ABSENT, counts, required=False),
            ]
            if "completion_tokens_details" in usage:
                path = ("response", "usage", "completion_tokens_details", "reasoning_tokens")
                spots.append(JsonField(path, NOT_INT_OR_ABSENT, counts, required=False))
        return spots

    return JsonSeed(records, fields, lines=True, lists=["request.messages"])


def sharegpt_seed() -> JsonSeed:
    topics = ["prefix caches", "batching", "KV cache size", "speculative decoding", "quantization"]
    records = []
    for i, topic in enumerate(topics):
        turns = []
        for k in range(1 + i % 3):
            turns.append({"from": "human", "value": f"Question {k} about {topic}: why does it matter?"})
            turns.append({"from": "gpt", "value": f"Answer {k}: {topic} changes the cost of a request " * (k + 1)})
        records.append({"id": f"conv-{i}", "conversations": turns})

    def fields(record: dict) -> list[JsonField]:
        turn = random.Random(record["id"]).randrange(len(record["conversations"]))
        return [
            JsonField(("conversations",), ("text", 5, None, {})),
            JsonField(("conversations", turn, "value"), (5, None, ["text"], {})),
            JsonField(("conversations", turn, "from"), (5, None, []), ("robot", "")),
        ]

    return JsonSeed(records, fields, lines=False, lists=["conversations"])


# --- canonical Parquet --------------------------------------------------------------------------


class CanonicalSeed:
    """A canonical Parquet file written from the Mooncake seed, with sessions, turns and reasoning set."""

    def __init__(self, workdir: Path) -> None:
        source = workdir / "seed.jsonl"
        source.write_text(mooncake_seed().text())
        workload = read_mooncake(source)
        table = workload.table
        rows = table.num_rows
        sessions = [f"s{i % 4}" for i in range(rows)]
        turns = [sessions[: i + 1].count(sessions[i]) - 1 for i in range(rows)]
        table = table.set_column(1, "session_id", pa.array(sessions, pa.string()))
        table = table.set_column(2, "turn", pa.array(turns, pa.int32()))
        reasoning = pc.cast(pc.divide(table["output_tokens"], 2), pa.int32())
        table = table.set_column(8, "reasoning_tokens", reasoning)
        self.workload = Workload(**{**_fields(workload), "table": table.cast(workload.table.schema)})
        self.path = write_canonical(self.workload, workdir / "seed.parquet")
        self.table = pq.read_table(self.path)  # with the costbench.* metadata

    def written(self, table: pa.Table, **options: Any) -> bytes:
        sink = pa.BufferOutputStream()
        pq.write_table(table, sink, **options)
        return sink.getvalue().to_pybytes()

    def with_value(
        self, column: str, value: object, rng: random.Random, kind: pa.DataType | None = None
    ) -> tuple[bytes, str]:
        values = self.table[column].to_pylist()
        at = rng.randrange(len(values))
        values[at] = value
        field = self.table.schema.field(column)
        array = pa.array(values, kind or field.type)
        table = self.table.set_column(
            self.table.schema.get_field_index(column), field.with_type(array.type).with_nullable(True), array
        )
        return self.written(table), f"row {at}: {column} = {value!r}"

    def mutations(self) -> list[Mutation]:
        def null_in_blocks(rng: random.Random) -> tuple[bytes, str]:
            values = self.table["prefix_blocks"].to_pylist()
            at = rng.randrange(len(values))
            values[at].insert(rng.randrange(len(values[at]) + 1), None)
            array = pa.array(values, pa.list_(pa.int64()))
            table = self.table.set_column(self.table.schema.get_field_index("prefix_blocks"), "prefix_blocks", array)
            return self.written(table), f"row {at}: null inside prefix_blocks"

        def value(column: str, choices: tuple[object, ...], kind: pa.DataType | None = None) -> Mutator:
            return lambda rng: self.with_value(column, rng.choice(choices), rng, kind)

        def duplicate_id(rng: random.Random) -> tuple[bytes, str]:
            ids = self.table["request_id"].to_pylist()
            at, other = rng.sample(range(len(ids)), 2)
            ids[at] = ids[other]
            column = self.table.schema.get_field_index("request_id")
            table = self.table.set_column(column, self.table.schema.field(column), pa.array(ids, pa.string()))
            return self.written(table), f"row {at}: request_id = {ids[other]!r}, as row {other}"

        def drop_column(rng: random.Random) -> tuple[bytes, str]:
            name = rng.choice(["request_id", "arrival_s", "input_tokens", "output_tokens"])
            return self.written(self.table.drop_columns([name])), f"column {name} removed"

        def bad_metadata(rng: random.Random) -> tuple[bytes, str]:
            key, text = rng.choice(
                [("block_size", "abc"), ("block_size", "0"), ("block_size", "-512"), ("excluded_rows", "x")]
            )
            metadata = {**self.table.schema.metadata, f"costbench.{key}".encode(): text.encode()}
            return self.written(self.table.replace_schema_metadata(metadata)), f"metadata costbench.{key} = {text!r}"

        def truncate(rng: random.Random) -> tuple[bytes, str]:
            data = self.path.read_bytes()
            cut = rng.randrange(8, len(data) - 1)
            return data[:cut], f"file cut at byte {cut} of {len(data)}"

        def overwrite(rng: random.Random) -> tuple[bytes, str]:
            data = bytearray(self.path.read_bytes())
            spots = sorted(rng.sample(range(4, len(data) - 8), rng.randint(1, 4)))
            for at in spots:
                data[at] ^= rng.randrange(1, 256)
            return bytes(data), f"bytes {spots} overwritten"

        def reorder(rng: random.Random) -> tuple[bytes, str]:
            names = list(self.table.column_names)
            rng.shuffle(names)
            return self.written(self.table.select(names)), f"columns {names}"

        def extra_column(rng: random.Random) -> tuple[bytes, str]:
            table = self.table.append_column("note", pa.array(["x"] * self.table.num_rows))
            return self.written(table), "unknown column note"

        def layout(rng: random.Random) -> tuple[bytes, str]:
            options: dict[str, Any] = rng.choice(
                [{"row_group_size": 7}, {"compression": "none"}, {"use_dictionary": False}, {"compression": "zstd"}]
            )
            return self.written(self.table, **options), f"written with {options}"

        return [
            Mutation("null inside prefix_blocks", "breaking", null_in_blocks),
            Mutation("turn negative", "breaking", value("turn", (-1, -7))),
            Mutation("reasoning_tokens negative", "breaking", value("reasoning_tokens", (-1, -100))),
            Mutation("null in a required column", "breaking", value("input_tokens", (None,))),
            Mutation("arrival NaN/inf/negative", "breaking", value("arrival_s", (float("nan"), float("inf"), -1.0))),
            Mutation("input_tokens huge", "breaking", value("input_tokens", (2_000_000_000, MAX_REQUEST_TOKENS + 1))),
            Mutation("tokens not whole", "breaking", value("output_tokens", (12.5,), pa.float64())),
            Mutation("request_id duplicate", "breaking", duplicate_id),
            Mutation("column missing", "breaking", drop_column),
            Mutation("metadata not valid", "breaking", bad_metadata),
            Mutation("file truncated", "breaking", truncate),
            Mutation("bytes overwritten", "corrupt", overwrite),
            Mutation("columns reordered", "benign", reorder),
            Mutation("unknown column", "benign", extra_column),
            Mutation("other Parquet layout", "benign", layout),
        ]


def _fields(workload: Workload) -> dict:
    return {name: getattr(workload, name) for name in Workload.__dataclass_fields__}


# --- the run ------------------------------------------------------------------------------------


def format_mutations(trace_format: str, workdir: Path) -> tuple[list[Mutation], bytes]:
    """The format's mutations and its seed file."""
    if trace_format == "canonical":
        canonical = CanonicalSeed(workdir)
        return canonical.mutations(), canonical.path.read_bytes()
    if trace_format == "azure":
        csv = azure_seed()
        return csv.mutations(
            ("1970-01-01 00:00:00", "2999-01-01 00:00:00", "2023-02-30 10:00:00", "2025-11-16 18:15:46"), None
        ), csv.text().encode()
    if trace_format == "burstgpt":
        csv = burstgpt_seed()
        return csv.mutations(("-5", "99999999999", "1e9", "34560001"), "Log Type"), csv.text().encode()
    json_seed = {"mooncake": mooncake_seed, "gateway": gateway_seed, "sharegpt": sharegpt_seed}[trace_format]()
    return json_seed.mutations(), json_seed.text().encode()


def fuzz_format(trace_format: str, cases: int, seed: int, workdir: Path, dump: Path | None = None) -> Tally:
    mutations, seed_bytes = format_mutations(trace_format, workdir)
    path = workdir / f"case{SUFFIX.get(trace_format, '.parquet')}"
    path.write_bytes(seed_bytes)
    tally = Tally()
    try:
        expected_workload = read_trace(path, trace_format)
    except Exception as exc:  # noqa: BLE001 - a reader that cannot read its own seed is reported, not fuzzed
        tally.seed_error = f"{type(exc).__name__}: {exc}"
        tally.findings.append(f"- {trace_format}: the valid seed does not read: {tally.seed_error[:300]}")
        return tally
    expected, expected_hash = summary(expected_workload), expected_workload.content_hash
    made = attempt = 0
    while made < cases:
        rng = random.Random(f"{seed}:{trace_format}:{attempt}")
        mutation = mutations[attempt % len(mutations)]
        attempt += 1
        result = mutation.make(rng)
        if result is None:
            if attempt > 10 * cases + len(mutations):
                break
            continue
        data, detail = result
        made += 1
        path.write_bytes(data)
        error = ""
        try:
            workload = read_trace(path, trace_format)
        except TraceFormatError as exc:
            outcome, error = "clean error", str(exc)
            tally.benign_refused += mutation.label == "benign"
        except Exception as exc:  # noqa: BLE001 - anything else is what this harness looks for
            outcome, error = "crash", f"{type(exc).__name__}: {exc}"
        else:
            same = summary(workload) == expected
            if mutation.label == "corrupt":
                same = workload.content_hash == expected_hash
            outcome = "accepted valid" if mutation.label != "breaking" and same else "accepted garbage"
            if outcome == "accepted garbage":
                error = f"read {summary(workload)} where the seed reads {expected}"
        tally.outcomes[outcome] += 1
        tally.by_mutation[(mutation.name, mutation.label, outcome)] += 1
        if mutation.label == "benign" and outcome == "clean error":
            tally.findings.append(_finding(trace_format, seed, attempt - 1, mutation, detail, "benign refused", error))
        if outcome in ("accepted garbage", "crash"):
            tally.findings.append(_finding(trace_format, seed, attempt - 1, mutation, detail, outcome, error))
            if dump is not None:
                dump.mkdir(parents=True, exist_ok=True)
                (dump / f"{trace_format}-{attempt - 1}{path.suffix}").write_bytes(data)
    return tally


def _finding(trace_format: str, seed: int, case: int, mutation: Mutation, detail: str, outcome: str, error: str) -> str:
    return (
        f"- {trace_format} / {mutation.name} ({mutation.label}) -> {outcome}: {detail[:160]}; {error[:200]} "
        f"[repro: bench/trace_fuzz.py --seed {seed} --formats {trace_format} --dump DIR, case {case}]"
    )


def fuzz(per_format: int, seed: int, formats: tuple[str, ...] = FORMATS, dump: Path | None = None) -> dict[str, Tally]:
    with tempfile.TemporaryDirectory(prefix="trace-fuzz-") as folder:
        results = {}
        for trace_format in formats:
            workdir = Path(folder) / trace_format
            workdir.mkdir()
            results[trace_format] = fuzz_format(trace_format, per_format, seed, workdir, dump)
        return results


def table_text(results: dict[str, Tally]) -> str:
    columns = (*OUTCOMES, "benign refused")
    lines = [f"{'format':10s}" + "".join(f"{name:>18s}" for name in columns)]
    for trace_format, tally in results.items():
        if tally.seed_error:
            lines.append(f"{trace_format:10s}  seed does not read: {tally.seed_error[:120]}")
            continue
        counts = [tally.outcomes[name] for name in OUTCOMES] + [tally.benign_refused]
        lines.append(f"{trace_format:10s}" + "".join(f"{count:>18d}" for count in counts))
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--per-format", type=int, default=300, help="mutated files per format (default 300)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--formats", default=",".join(FORMATS), help="comma-separated (default: all six)")
    parser.add_argument("--findings", type=Path, help="append garbage, crash and benign-refused cases here")
    parser.add_argument("--dump", type=Path, help="write the garbage and crash files to this folder")
    parser.add_argument("--by-mutation", action="store_true", help="also print the outcomes of each mutation")
    args = parser.parse_args(argv)
    formats = tuple(name.strip() for name in args.formats.split(",") if name.strip())
    unknown = [name for name in formats if name not in FORMATS]
    if unknown:
        parser.error(f"unknown format(s) {', '.join(unknown)}: known are {', '.join(FORMATS)}")
    results = fuzz(args.per_format, args.seed, formats, args.dump)
    print(f"trace fuzz: {args.per_format} mutated files per format, seed {args.seed}")
    print(table_text(results))
    if args.by_mutation:
        for trace_format, tally in results.items():
            print(f"\n{trace_format}:")
            for (name, label, outcome), count in sorted(tally.by_mutation.items()):
                print(f"  {name:32s} {label:9s} {outcome:17s} {count:5d}")
    findings = [line for tally in results.values() for line in tally.findings]
    if args.findings is not None and findings:
        with args.findings.open("a") as handle:
            handle.write(f"\n## trace_fuzz --per-format {args.per_format} --seed {args.seed}\n")
            handle.write("\n".join(findings) + "\n")
    bad = sum(
        tally.outcomes["accepted garbage"] + tally.outcomes["crash"] + bool(tally.seed_error)
        for tally in results.values()
    )
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
