"""This week's noise: 95% intervals for the two costs per request, hit rate and p95 TTFT (table cost_intervals).

Each run's arrival span is cut into equal time blocks of about BLOCK_S seconds (at least MIN_BLOCKS); a block
carries an equal share of the run's cost and the completed requests that arrived in it (the dbt model
interval_block_rows says why by arrival). A resample draws as many blocks as the week has, with replacement, and
recomputes the pooled ratios (Σ cost / Σ requests, Σ cached / Σ prompt tokens) and the p95 of the pooled TTFT
histogram. Whole blocks keep the time correlation of real traffic (a burst stays together), which resampling single
requests would hide. Seeded per row: the same lake always gives the same interval.

The blocks see only the variation inside a run. Runs differ too (a real endpoint's node, clocks and neighbours;
the twin's --sim-run-seed), so a week of k runs (a canary's repeats) widens each interval by the spread between
runs: the variance of a run's value (log cost per request, log p95 TTFT, hit rate) around its week's mean, pooled
over the series' weeks with two runs or more (the same scenario, endpoint and backend, whatever configuration they
ran, this week and up to RUN_SPREAD_WEEKS - 1 before it: never a later week, so a week's interval does not move when
weeks are added). Whatever configuration: the spread is the node's and the run's, not the flags', and a week whose
configuration changed would otherwise know only its own runs (df k - 1, t(0.975, 1) = 12.7 for two), which hid a
radix cache turned off inside an interval 2.5 times its value.
The week's mean of k runs has that variance / k; its half-width, t(0.975, df) x sqrt(variance / k) with df the
pooled degrees of freedom, is added in quadrature to the bootstrap's own half-width on each side (in log space
for cost and TTFT). A series that never ran twice in a week has no known spread (run_spread_df 0): its interval
is the blocks' alone, as narrow as one run can say. docs/pipeline.md, "Run-to-run variation".

The efficiency cost per request (run_summary: the price over the run's capacity at the SLO) is one figure per run,
from that run's own capacity sweep, not a sum over blocks: its interval is the spread between runs alone, about the
week's request-weighted mean, t(0.975, df) x sqrt(variance of ln(efficiency cost) / k) on each side in log space.
Without a known spread it is the point itself.
"""

from __future__ import annotations

import hashlib
import math
from collections import defaultdict
from dataclasses import dataclass

import duckdb
import numpy as np

from warehouse.marts.dbt_build import project_vars
from warehouse.marts.student_t import t_quantile
from warehouse.sql_files import read_sql

# Blocks of about 5 s of replay: long enough to keep a burst together, short enough that a window's slow
# drift of rate (the traffic being measured, not noise about it) is not resampled as noise; docs/pipeline.md,
# "How long a window must be", has the widths each choice gives on the bundled traces.
# Defined in the dbt project (its vars), which blocks the runs in SQL: about 5 s a block, a short run still 20 blocks.
_VARS = project_vars()
BLOCK_S = float(_VARS["interval_block_s"])
MIN_BLOCKS = int(_VARS["interval_min_blocks"])
RESAMPLES = 1000
TTFT_BIN_BASE = 1.01  # bin k holds TTFTs in [1.01^k, 1.01^(k+1)) ms
_KEY = ("week_start", "scenario", "endpoint", "backend", "config_fingerprint")
RUN_SPREAD_WEEKS = 8  # weeks of a series whose run-to-run spread a week's interval pools (this one included)


_EFFICIENCY_SQL = """
    SELECT week_start, scenario, endpoint, backend, config_fingerprint, run_id, efficiency_cost_per_request_usd,
           completed_requests
    FROM run_summary
    WHERE run_cost_usd IS NOT NULL AND window_s > 0 AND efficiency_cost_per_request_usd > 0 AND completed_requests > 0
"""


@dataclass(frozen=True, slots=True)
class BinRows:
    """The TTFT bins of one week's blocks: parallel arrays, one entry per (block, bin) with requests."""

    block: np.ndarray  # the block's place in the week's block rows
    bin: np.ndarray  # TTFT bin k: [1.01^k, 1.01^(k+1)) ms
    requests: np.ndarray  # completed requests there (float)


NO_BINS = BinRows(np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64), np.zeros(0))


# The columns of interval_rows' tuples, in order: the dbt model cost_intervals types and documents them.
INTERVAL_COLUMNS = (
    *_KEY, "blocks", "realised_cost_low_usd", "realised_cost_high_usd", "hit_rate_low", "hit_rate_high",
    "p95_ttft_low_ms", "p95_ttft_high_ms", "efficiency_cost_low_usd", "efficiency_cost_high_usd", "runs",
    "run_spread_df", "cost_run_sd_log", "p95_ttft_run_sd_log", "hit_rate_run_sd", "efficiency_run_sd_log",
)  # fmt: skip


def interval_rows(con: duckdb.DuckDBPyConnection) -> list[tuple]:
    """The cost_intervals rows (INTERVAL_COLUMNS) from run_summary and the (run, block, TTFT bin) rows that `con`
    reads as interval_block_rows (the dbt model of that name)."""
    # The blocks are read twice: their totals as tuples, their histograms unnested into arrays (hundreds of thousands
    # of bins on a big lake, which as Python tuples would cost more than the SQL).
    # (group key) -> [(run_id, block, cost, requests, prompt, cached)], ordered by run and block
    blocks: dict[tuple, list[tuple]] = defaultdict(list)
    for *key_columns, run_id, block, cost_usd, requests, prompt, cached in con.execute(
        read_sql("sql/interval_block_totals.sql")
    ).fetchall():
        blocks[tuple(key_columns)].append((run_id, block, cost_usd, requests, prompt, cached))
    columns = con.execute(read_sql("sql/interval_block_bins.sql")).fetchnumpy()
    # The bins come sorted by key_index, which numbers the keys in the totals' order.
    starts = np.searchsorted(np.asarray(columns["key_index"], dtype=np.int64), np.arange(len(blocks) + 1))
    bins = {
        key: BinRows(
            np.asarray(columns["block_index"][a:b], dtype=np.int64),
            np.asarray(columns["bin"][a:b], dtype=np.int64),
            np.asarray(columns["requests"][a:b], dtype=float),
        )
        for key, a, b in zip(blocks, starts[:-1], starts[1:], strict=True)
    }
    # (group key) -> run_id -> (efficiency cost per request, completed requests)
    efficiency: dict[tuple, dict[str, tuple[float, int]]] = defaultdict(dict)
    for *key_columns, run_id, usd, requests in con.execute(_EFFICIENCY_SQL).fetchall():
        efficiency[tuple(key_columns)][run_id] = (usd, requests)
    values = {key: run_values(block_rows, bins[key], efficiency[key]) for key, block_rows in blocks.items()}
    out = []
    for key, block_rows in blocks.items():
        spread = run_spread(key, values)
        row = widened(interval_row(key, block_rows, bins[key]), week_point(block_rows, bins[key]), spread,
                      len(values[key]))  # fmt: skip
        low, high = efficiency_interval(efficiency[key], spread, len(values[key]))
        out.append((*key, *row, low, high, len(values[key]), spread.df, *spread.sds()))
    return out


@dataclass(frozen=True, slots=True)
class RunValues:
    """One run's own figures, as the week pools them."""

    log_cost: float | None  # ln(realised cost per request in USD)
    log_p95_ttft: float | None  # ln(p95 TTFT in ms), from the 1%-wide bins
    hit_rate: float | None  # ratio 0-1
    log_efficiency_cost: float | None = None  # ln(efficiency cost per request in USD): the run's own capacity sweep


@dataclass(frozen=True, slots=True)
class RunSpread:
    """The pooled variance between runs of a week, per metric, and its degrees of freedom (0: unknown)."""

    df: int
    log_cost_var: float
    log_p95_ttft_var: float
    hit_rate_var: float
    log_efficiency_cost_var: float = 0.0
    efficiency_df: int = 0  # runs with a capacity: a week's may be fewer than its runs

    def sds(self) -> tuple[float | None, float | None, float | None, float | None]:
        if self.df == 0:
            return None, None, None, None
        efficiency = math.sqrt(self.log_efficiency_cost_var) if self.efficiency_df else None
        return math.sqrt(self.log_cost_var), math.sqrt(self.log_p95_ttft_var), math.sqrt(self.hit_rate_var), efficiency


NO_SPREAD = RunSpread(0, 0.0, 0.0, 0.0)


def efficiency_interval(
    runs: dict[str, tuple[float, int]], spread: RunSpread, k: int
) -> tuple[float | None, float | None]:
    """The week's efficiency cost (request-weighted over its runs, as weekly_trends pools it) widened by the spread
    between runs' own sweeps; the point itself while that spread is unknown."""
    requests = sum(n for _, n in runs.values())
    if not runs or requests == 0:
        return None, None
    point = sum(usd * n for usd, n in runs.values()) / requests
    if spread.efficiency_df == 0:
        return point, point
    half = t_quantile(0.975, spread.efficiency_df) * math.sqrt(spread.log_efficiency_cost_var / max(k, 1))
    return point * math.exp(-half), point * math.exp(half)


def run_values(
    block_rows: list[tuple], bin_rows: BinRows, efficiency: dict[str, tuple[float, int]] | None = None
) -> dict[str, RunValues]:
    """Each run's own figures from the week's block rows (run_id, block, cost, requests, prompt, cached) and bins."""
    totals: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0, 0.0, 0.0])
    for run_id, _block, cost, requests, prompt, cached in block_rows:
        run = totals[run_id]
        run[0] += cost
        run[1] += requests
        run[2] += prompt
        run[3] += cached
    number = {run_id: i for i, run_id in enumerate(totals)}
    run_of_bin = np.array([number[r[0]] for r in block_rows], dtype=np.int64)[bin_rows.block]
    out = {}
    for run_id, (cost, requests, prompt, cached) in totals.items():
        mine = run_of_bin == number[run_id]
        p95 = _histogram_p95(bin_rows.bin[mine], bin_rows.requests[mine])
        usd = (efficiency or {}).get(run_id)
        out[run_id] = RunValues(
            math.log(cost / requests) if cost > 0 and requests > 0 else None,
            math.log(p95) if p95 is not None else None,
            cached / prompt if prompt > 0 else None,
            math.log(usd[0]) if usd is not None else None,
        )
    return out


def _histogram_p95(bins: np.ndarray, requests: np.ndarray) -> float | None:
    """The binned p95 of requests at these TTFT bins (a bin may repeat: its counts add)."""
    if bins.size == 0:
        return None
    present, counts = _histograms(bins, np.zeros(bins.size, dtype=np.int64), requests, 1)
    p95 = float(_binned_p95(present, counts)[0])
    return None if math.isnan(p95) else p95


def _histograms(bins: np.ndarray, rows: np.ndarray, requests: np.ndarray, n_rows: int) -> tuple[np.ndarray, np.ndarray]:
    """The bins present, ascending, and the requests of each row (0..n_rows-1) in each of them."""
    present, column = np.unique(bins, return_inverse=True)
    counts = np.zeros((n_rows, present.size))
    np.add.at(counts, (rows, column), requests)
    return present, counts


def run_spread(key: tuple, values: dict[tuple, dict[str, RunValues]]) -> RunSpread:
    """The run-to-run spread the week `key` pools: its series' weeks up to it with two runs or more (the key's
    scenario, endpoint and backend; every configuration's)."""
    week, series = key[0], key[1:4]
    weeks = sorted((k for k in values if k[1:4] == series and k[0] <= week and len(values[k]) > 1), reverse=True)
    sums, dfs = [0.0, 0.0, 0.0, 0.0], [0, 0, 0, 0]
    for k in weeks[:RUN_SPREAD_WEEKS]:
        runs = list(values[k].values())
        for i, metric in enumerate(("log_cost", "log_p95_ttft", "hit_rate", "log_efficiency_cost")):
            known = [getattr(r, metric) for r in runs if getattr(r, metric) is not None]
            if len(known) > 1:
                mean = sum(known) / len(known)
                sums[i] += sum((v - mean) ** 2 for v in known)
                dfs[i] += len(known) - 1
    if dfs[0] == 0:
        return NO_SPREAD
    cost, ttft, hit, efficiency = (total / df if df else 0.0 for total, df in zip(sums, dfs, strict=True))
    return RunSpread(dfs[0], cost, ttft, hit, efficiency, efficiency_df=dfs[3])


def week_point(block_rows: list[tuple], bin_rows: BinRows) -> tuple[float | None, float | None, float | None]:
    """The week's pooled cost per request, hit rate and (binned) p95 TTFT, the centre the spread widens about."""
    cost = sum(r[2] for r in block_rows)
    requests = sum(r[3] for r in block_rows)
    prompt = sum(r[4] for r in block_rows)
    cached = sum(r[5] for r in block_rows)
    return (cost / requests if requests else None, cached / prompt if prompt else None,
            _histogram_p95(bin_rows.bin, bin_rows.requests))  # fmt: skip


def widened(row: tuple, point: tuple, spread: RunSpread, runs: int) -> tuple:
    """interval_row's figures with the between-run half-width added in quadrature on each side."""
    blocks, cost_low, cost_high, hit_low, hit_high, ttft_low, ttft_high = row
    if spread.df == 0:
        return row
    t = t_quantile(0.975, spread.df)
    cost_low, cost_high = _widen_log(point[0], cost_low, cost_high, t * math.sqrt(spread.log_cost_var / runs))
    ttft_low, ttft_high = _widen_log(point[2], ttft_low, ttft_high, t * math.sqrt(spread.log_p95_ttft_var / runs))
    extra = t * math.sqrt(spread.hit_rate_var / runs)
    if point[1] is not None and hit_low is not None and hit_high is not None:
        hit_low = point[1] - math.hypot(point[1] - hit_low, extra)
        hit_high = point[1] + math.hypot(hit_high - point[1], extra)
    return (blocks, cost_low, cost_high, hit_low, hit_high, ttft_low, ttft_high)


def _widen_log(point: float | None, low: float | None, high: float | None, extra: float) -> tuple:
    if point is None or low is None or high is None or point <= 0 or low <= 0:
        return low, high
    below = math.hypot(math.log(point / min(low, point)), extra)
    above = math.hypot(math.log(max(high, point) / point), extra)
    return point * math.exp(-below), point * math.exp(above)


def interval_row(key: tuple, block_rows: list[tuple], bin_rows: BinRows = NO_BINS) -> tuple:
    """(blocks, cost low, cost high, hit low, hit high, p95 ttft low, p95 ttft high) for one weekly_trends row.

    block_rows: (run_id, block, cost_usd, requests, prompt_tokens, cached_tokens); bin_rows: by place in them.
    """
    cost = np.array([r[2] for r in block_rows], dtype=float)
    requests = np.array([r[3] for r in block_rows], dtype=float)
    prompt = np.array([r[4] for r in block_rows], dtype=float)
    cached = np.array([r[5] for r in block_rows], dtype=float)
    weights = _resample_weights(key, len(block_rows))
    cost_low, cost_high = _interval(_ratio(weights @ cost, weights @ requests))
    hit_low, hit_high = _interval(_ratio(weights @ cached, weights @ prompt))
    ttft_low, ttft_high = _ttft_interval(weights, bin_rows, len(block_rows))
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


def _ttft_interval(weights: np.ndarray, bin_rows: BinRows, n_blocks: int) -> tuple[float | None, float | None]:
    if bin_rows.bin.size == 0:
        return None, None
    bins, histogram = _histograms(bin_rows.bin, bin_rows.block, bin_rows.requests, n_blocks)
    return _interval(_binned_p95(bins, weights @ histogram))


def _binned_p95(bins: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """Per row of counts (rows x bins, bins ascending): the geometric midpoint of the bin holding the request at
    rank ceil(0.95 n), which stands for the p95; NaN for a row with no requests."""
    pooled = np.cumsum(counts, axis=1)
    totals = pooled[:, -1]
    first_at_rank = np.argmax(pooled >= np.ceil(0.95 * totals)[:, None], axis=1)
    return np.where(totals > 0, TTFT_BIN_BASE ** (bins[first_at_rank].astype(float) + 0.5), np.nan)


def cost_interval_width(arrivals_s: list[float], span_s: float, key: tuple = ("width",)) -> float | None:
    """The width of one run's 95% interval on cost per request, as a share of the point value, when its
    requests arrive at `arrivals_s` (seconds from the end of the warm-up) over an arrival span of `span_s`:
    blocked by the rule of the dbt model interval_block_rows and bootstrapped as above (bench/interval_widths.py and
    the test of the bundled scenarios' windows use it to say how long a window must be)."""
    blocks = max(MIN_BLOCKS, int(span_s // BLOCK_S))
    counts = np.zeros(blocks)
    for t in arrivals_s:
        counts[min(blocks - 1, max(0, int(t / span_s * blocks)))] += 1
    if counts.sum() == 0:
        return None
    rows = [("run", b, 1.0 / blocks, counts[b], 0, 0) for b in range(blocks)]
    _, low, high, *_ = interval_row(key, rows)
    point = 1.0 / counts.sum()
    return None if low is None or high is None else (high - low) / point
