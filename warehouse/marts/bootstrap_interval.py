"""This week's noise: 95% block-bootstrap intervals for cost per request, hit rate and p95 TTFT (table cost_intervals).

Each run's arrival span is cut into equal time blocks of about BLOCK_S seconds (at least MIN_BLOCKS); a block
carries an equal share of the run's cost and the completed requests that arrived in it (sql/interval_blocks.sql
says why by arrival). A resample draws as many blocks as the week has, with replacement, and recomputes the
pooled ratios (Σ cost / Σ requests, Σ cached / Σ prompt tokens) and the p95 of the pooled TTFT histogram. Whole
blocks keep the time correlation of real traffic (a burst stays together), which resampling single
requests would hide. Seeded per row: the same lake always gives the same interval.
"""

from __future__ import annotations

import hashlib
from collections import defaultdict

import duckdb
import numpy as np

# Blocks of about 5 s of replay: long enough to keep a burst together, short enough that a window's slow
# drift of rate (the traffic being measured, not noise about it) is not resampled as noise; docs/pipeline.md,
# "How long a window must be", has the widths each choice gives on the bundled traces.
BLOCK_S = 5.0
MIN_BLOCKS = 20  # a short run still gets 20 blocks
RESAMPLES = 1000
TTFT_BIN_BASE = 1.01  # bin k holds TTFTs in [1.01^k, 1.01^(k+1)) ms
_KEY = ("week_start", "scenario", "endpoint", "backend", "config_fingerprint")


def rebuild_intervals(con: duckdb.DuckDBPyConnection, blocks_sql: str) -> int:
    """Fill cost_intervals from run_summary and requests (sql/interval_blocks.sql); returns the rows written."""
    sql = blocks_sql.replace("$min_blocks", str(MIN_BLOCKS)).replace("$block_s", repr(BLOCK_S))
    rows = con.execute(sql).fetchall()
    # (group key) -> (run_id, block) -> [cost, requests, prompt, cached]; and the TTFT bins per block.
    blocks: dict[tuple, dict[tuple, list]] = defaultdict(dict)
    bins: dict[tuple, list[tuple]] = defaultdict(list)
    for *key_columns, run_id, block, cost_usd, bin_, requests, prompt, cached in rows:
        key = tuple(key_columns)
        totals = blocks[key].setdefault((run_id, block), [cost_usd, 0, 0, 0])
        totals[1] += requests
        totals[2] += prompt
        totals[3] += cached
        if bin_ is not None:
            bins[key].append((run_id, block, bin_, requests))
    out = []
    for key, by_block in blocks.items():
        ordered = sorted(by_block.items())
        block_rows = [(run_id, block, *totals) for (run_id, block), totals in ordered]
        out.append((*key, *interval_row(key, block_rows, bins.get(key, []))))
    con.execute("DELETE FROM cost_intervals")
    if out:
        con.executemany("INSERT INTO cost_intervals VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", out)
    return len(out)


def interval_row(key: tuple, block_rows: list[tuple], bin_rows: list[tuple]) -> tuple:
    """(blocks, cost low, cost high, hit low, hit high, p95 ttft low, p95 ttft high) for one weekly_trends row.

    block_rows: (run_id, block, cost_usd, requests, prompt_tokens, cached_tokens);
    bin_rows: (run_id, block, bin, requests).
    """
    index = {(r[0], r[1]): i for i, r in enumerate(block_rows)}
    cost = np.array([r[2] for r in block_rows], dtype=float)
    requests = np.array([r[3] for r in block_rows], dtype=float)
    prompt = np.array([r[4] for r in block_rows], dtype=float)
    cached = np.array([r[5] for r in block_rows], dtype=float)
    weights = _resample_weights(key, len(block_rows))
    cost_low, cost_high = _interval(_ratio(weights @ cost, weights @ requests))
    hit_low, hit_high = _interval(_ratio(weights @ cached, weights @ prompt))
    ttft_low, ttft_high = _ttft_interval(weights, index, bin_rows, len(block_rows))
    return (len(block_rows), cost_low, cost_high, hit_low, hit_high, ttft_low, ttft_high)


def _resample_weights(key: tuple, n_blocks: int) -> np.ndarray:
    # How many times each block is drawn, per resample (RESAMPLES x n_blocks).
    seed = int.from_bytes(hashlib.sha256(repr(key).encode()).digest()[:8], "little")
    rng = np.random.default_rng(seed)
    return rng.multinomial(n_blocks, np.full(n_blocks, 1.0 / n_blocks), size=RESAMPLES).astype(float)


def _ratio(numerator: np.ndarray, denominator: np.ndarray) -> np.ndarray:
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(denominator > 0, numerator / np.where(denominator > 0, denominator, 1.0), np.nan)


def _interval(values: np.ndarray) -> tuple[float | None, float | None]:
    finite = values[np.isfinite(values)]
    if finite.size == 0:
        return None, None
    low, high = np.percentile(finite, [2.5, 97.5])
    return float(low), float(high)


def _ttft_interval(
    weights: np.ndarray, index: dict, bin_rows: list[tuple], n_blocks: int
) -> tuple[float | None, float | None]:
    if not bin_rows:
        return None, None
    bins = sorted({r[2] for r in bin_rows})
    column = {b: j for j, b in enumerate(bins)}
    histogram = np.zeros((n_blocks, len(bins)))
    for run_id, block, bin_, count in bin_rows:
        histogram[index[(run_id, block)], column[bin_]] += count
    pooled = np.cumsum(weights @ histogram, axis=1)  # RESAMPLES x bins
    totals = pooled[:, -1]
    has_requests = totals > 0
    if not has_requests.any():
        return None, None
    # The bin holding the request at rank ceil(0.95 n); its geometric midpoint stands for the p95.
    first_at_rank = np.argmax(pooled[has_requests] >= np.ceil(0.95 * totals[has_requests])[:, None], axis=1)
    midpoints = TTFT_BIN_BASE ** (np.array(bins, dtype=float) + 0.5)
    return _interval(midpoints[first_at_rank])


def cost_interval_width(arrivals_s: list[float], span_s: float, key: tuple = ("width",)) -> float | None:
    """The width of one run's 95% interval on cost per request, as a share of the point value, when its
    requests arrive at `arrivals_s` (seconds from the end of the warm-up) over an arrival span of `span_s`:
    blocked by the rule of sql/interval_blocks.sql and bootstrapped as above (bench/interval_widths.py and
    the test of the bundled scenarios' windows use it to say how long a window must be)."""
    blocks = max(MIN_BLOCKS, int(span_s // BLOCK_S))
    counts = np.zeros(blocks)
    for t in arrivals_s:
        counts[min(blocks - 1, max(0, int(t / span_s * blocks)))] += 1
    if counts.sum() == 0:
        return None
    rows = [("run", b, 1.0 / blocks, counts[b], 0, 0) for b in range(blocks)]
    _, low, high, *_ = interval_row(key, rows, [])
    point = 1.0 / counts.sum()
    return None if low is None or high is None else (high - low) / point
