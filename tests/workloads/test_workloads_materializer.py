"""Prompt materialization: block hashes become exact, shared-where-the-trace-shares token ids."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

from workloads.prompts.prompt_materializer import materialize_input_ids as materialize_arrays
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
            "response_format": pa.nulls(count, pa.string()),
            "constrained": pa.nulls(count, pa.bool_()),
        },
        schema=WORKLOAD_SCHEMA,
    )
    return Workload("test", "test", TraceFormat.MOONCAKE, "ms", block_size, table)


def materialize_input_ids(workload: Workload, **options: int) -> list[list[int]]:
    """The ids as plain lists, for readable comparisons."""
    return [row.tolist() for row in materialize_arrays(workload, **options)]


def test_returns_one_int32_array_per_row_ready_for_replay() -> None:
    workload = make_workload([(8, [1, 2]), (3, None)], block_size=4)
    ids = materialize_arrays(workload)
    assert [(row.dtype, row.ndim, row.shape[0]) for row in ids] == [
        (np.dtype(np.int32), 1, 8),
        (np.dtype(np.int32), 1, 3),
    ]


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


def first_divergence(a: list[int], b: list[int]) -> int:
    """Length of the common prefix of two id lists: how far a radix cache would match."""
    common = 0
    for x, y in zip(a, b):
        if x != y:
            break
        common += 1
    return common


def test_siblings_never_share_a_first_token_so_matches_stop_at_the_block_boundary() -> None:
    # A vocabulary of 8 usable ids makes an accidental shared first token almost certain without the rule:
    # 6 different blocks follow block 1, plus one request that continues with ids of its own.
    followers = [[1, h] for h in (2, 3, 4, 5, 6, 7)]
    workload = make_workload([(8, blocks) for blocks in followers] + [(6, [1])], block_size=4)
    rows = materialize_input_ids(workload, vocab_size=24, reserved_ids=16)
    for i in range(len(rows)):
        for j in range(i + 1, len(rows)):
            assert first_divergence(rows[i], rows[j]) == 4, (i, j)


def test_first_tokens_of_root_blocks_are_distinct_for_a_large_trace_window() -> None:
    # 3,000 different first blocks (and 3,000 requests without blocks) under the root of the trie:
    # no two may start with the same id, or a cache would match one token between unrelated prompts.
    workload = make_workload([(2, [h * 7919]) for h in range(3000)] + [(2, None)] * 3000, block_size=2)
    firsts = [row[0] for row in materialize_input_ids(workload)]
    assert len(set(firsts)) == 6000


def test_materializing_a_long_window_is_exact_and_shares_where_the_trace_shares() -> None:
    # 200 requests of 20 blocks of 512 behind one 4-block common prefix.
    rows = [(20 * 512 - i, [0, 1, 2, 3] + [1000 * i + k for k in range(16)]) for i in range(200)]
    ids = materialize_arrays(make_workload(rows, block_size=512))
    assert [row.shape[0] for row in ids] == [n for n, _ in rows]
    assert all(np.array_equal(row[:2048], ids[0][:2048]) and row[2048] != ids[0][2048] for row in ids[1:])


def test_a_shard_materializing_only_its_rows_gets_the_unsharded_ids() -> None:
    # Tiny id range: siblings clash often, so first tokens move; a subset must still see the same choice.
    rows = [(6, [1, h]) for h in range(2, 9)] + [(5, [1]), (3, None), (4, [1, 2])]
    workload = make_workload(rows, block_size=2)
    whole = materialize_input_ids(workload, vocab_size=26, reserved_ids=16)
    mask = [i % 3 == 1 for i in range(len(rows))]
    shard = [row.tolist() for row in materialize_arrays(workload, vocab_size=26, reserved_ids=16, selected=mask)]
    assert shard == [row for row, keep in zip(whole, mask) if keep]
    with pytest.raises(ValueError, match="selected has 2 entries for 10 rows"):
        materialize_arrays(workload, selected=[True, False])
