"""Prompt materialization: block hashes become exact, shared-where-the-trace-shares token ids."""

from __future__ import annotations

import pyarrow as pa
import pytest

from workloads.prompt_materializer import materialize_input_ids
from workloads.workload import WORKLOAD_SCHEMA, TraceFormat, Workload


def make_workload(rows: list[tuple[int, list[int] | None]], block_size: int) -> Workload:
    """rows: (input_tokens, prefix_blocks) in table order."""
    count = len(rows)
    table = pa.table(
        {
            "request_id": [f"r{i}" for i in range(count)],
            "session_id": pa.nulls(count, pa.string()),
            "turn": pa.nulls(count, pa.int32()),
            "arrival_s": [float(i) for i in range(count)],
            "input_tokens": pa.array([n for n, _ in rows], pa.int32()),
            "output_tokens": pa.array([1] * count, pa.int32()),
            "prefix_blocks": pa.array([b for _, b in rows], pa.list_(pa.int64())),
            "prompt": pa.nulls(count, pa.string()),
            "reasoning_tokens": pa.nulls(count, pa.int32()),
        },
        schema=WORKLOAD_SCHEMA,
    )
    return Workload("test", "test", TraceFormat.MOONCAKE, "ms", block_size, table)


def test_lengths_are_exact_whatever_the_block_count() -> None:
    workload = make_workload(
        [
            (8, [1, 2]),  # whole blocks
            (6, [1, 2]),  # last block cut
            (5, [1, 2, 3, 4]),  # more blocks than needed
            (11, [1]),  # fewer blocks than needed: the rest is the request's own
            (3, None),  # no blocks at all
        ],
        block_size=4,
    )
    ids = materialize_input_ids(workload)
    assert [len(x) for x in ids] == [8, 6, 5, 11, 3]
    assert all(type(token) is int for row in ids for token in row)


def test_equal_hashes_give_equal_ids_and_shared_prefixes_diverge_after() -> None:
    workload = make_workload([(12, [7, 8, 9]), (12, [7, 8, 10]), (6, [7, 8])], block_size=4)
    a, b, c = materialize_input_ids(workload)
    assert a[:8] == b[:8] == c[:6] + b[6:8]
    assert c == a[:6]
    assert a[8:] != b[8:]


def test_different_hashes_give_different_blocks() -> None:
    hashes = list(range(-100, 100)) + [2**63 - 1, -(2**63)]
    workload = make_workload([(16, [h]) for h in hashes], block_size=16)
    blocks = [tuple(row) for row in materialize_input_ids(workload)]
    assert len(set(blocks)) == len(hashes)


def test_ids_stay_inside_the_vocabulary_above_the_reserved_ids() -> None:
    workload = make_workload([(4096, list(range(8))), (2000, None)], block_size=512)
    for row in materialize_input_ids(workload, vocab_size=1000, reserved_ids=100):
        assert min(row) >= 100 and max(row) < 1000
    # With a range of 900 values over 6096 draws every value should show up at least once or nearly.
    assert len({t for row in materialize_input_ids(workload, vocab_size=1000, reserved_ids=100) for t in row}) > 850


def test_deterministic_across_calls_and_seeded() -> None:
    workload = make_workload([(10, [1, 2, 3]), (7, None), (9, [4, 5, 6])], block_size=4)
    first = materialize_input_ids(workload, seed=3)
    assert materialize_input_ids(workload, seed=3) == first
    other_seed = materialize_input_ids(workload, seed=4)
    assert all(x != y for x, y in zip(first, other_seed))


def test_rows_without_blocks_do_not_share_a_first_block() -> None:
    workload = make_workload([(64, None) for _ in range(200)], block_size=0)
    firsts = [tuple(row[:16]) for row in materialize_input_ids(workload)]
    assert len(set(firsts)) == 200


def test_a_request_without_blocks_does_not_collide_with_a_block_of_the_same_number() -> None:
    # Request salts and block hashes live in separate seed domains.
    workload = make_workload([(16, [0]), (16, None)], block_size=16)
    with_block, without = materialize_input_ids(workload)
    assert with_block != without


def test_rejects_a_vocabulary_without_room() -> None:
    workload = make_workload([(4, [1])], block_size=4)
    with pytest.raises(ValueError, match="reserved_ids"):
        materialize_input_ids(workload, vocab_size=16, reserved_ids=16)
