{{ config(materialized="week_table") }}
-- Arrival blocks of each costed run, for the block bootstrap of warehouse/marts/bootstrap_interval.py (the stage
-- cost_interval_rows reads; its own table so that a refresh of one week reads only that week's requests): the
-- run's arrival span (from the end of the warm-up to the end of the replayed window, window_duration_s /
-- speedup, or to the last measured arrival if later) is cut into equal blocks of about interval_block_s seconds
-- (at least interval_min_blocks of them), each carrying an equal share of the run's cost, and a completed request
-- belongs to the block its scheduled arrival falls in. By arrival, not by finish: the drain after the last arrival
-- is the cost of serving those arrivals, not a stretch of traffic with no requests, and counting it as empty blocks
-- widened a short window's interval about fivefold (docs/pipeline.md, "How long a window must be"). One row per (run, block) with what
-- completed there, and its TTFT histogram: bin k holds TTFTs in [1.01^k, 1.01^(k+1)) ms (a request without a TTFT
-- counts in the totals, in no bin). Every block of every run gets a row (requests 0 when empty): an arrival gap
-- costs. Two passes over `requests`.
WITH costed_runs AS (
    SELECT s.week_start, s.scenario, s.run_id, s.endpoint, s.backend, s.config_fingerprint,
           s.run_cost_usd, s.window_s, r.warmup_s, r.window_duration_s / r.speedup AS replayed_span_s
    FROM {{ ref('run_summary') }} AS s
    JOIN {{ source('warehouse', 'runs') }} AS r USING (week_start, scenario, run_id)
    WHERE s.run_cost_usd IS NOT NULL AND s.window_s > 0 AND {{ in_rebuilt_weeks('s.week_start') }}
),
last_arrivals AS (
    SELECT week_start, scenario, run_id, max(scheduled_mono_s) AS last_scheduled_s
    FROM {{ source('warehouse', 'requests') }}
    WHERE is_completed AND {{ in_rebuilt_weeks('week_start') }}
    GROUP BY ALL
),
spans AS (
    SELECT
        c.*,
        greatest(coalesce(c.replayed_span_s, 0), coalesce(a.last_scheduled_s, 0)) - c.warmup_s AS arrival_span_s
    FROM costed_runs AS c
    LEFT JOIN last_arrivals AS a USING (week_start, scenario, run_id)
),
blocked AS (
    SELECT *, greatest({{ var('interval_min_blocks') }}, floor(arrival_span_s / {{ var('interval_block_s') }}))::INTEGER AS blocks FROM spans
),
filled AS (
    SELECT
        c.week_start, c.scenario, c.run_id,
        least(c.blocks - 1, greatest(0, floor((q.scheduled_mono_s - c.warmup_s) / greatest(c.arrival_span_s, 1e-9) * c.blocks)))::INTEGER AS block,
        CASE WHEN q.ttft_ms > 0 THEN floor(ln(q.ttft_ms) / ln(1.01))::INTEGER END AS bin,
        count(*) AS requests,
        sum(q.prompt_tokens) FILTER (WHERE q.cached_tokens IS NOT NULL) AS prompt_tokens,
        sum(q.cached_tokens) FILTER (WHERE q.prompt_tokens IS NOT NULL) AS cached_tokens
    FROM {{ source('warehouse', 'requests') }} AS q
    JOIN blocked AS c USING (week_start, scenario, run_id)
    WHERE q.is_completed AND {{ in_rebuilt_weeks('q.week_start') }}
    GROUP BY ALL
),
per_block AS (
    -- A block's totals, and its TTFT histogram as two lists (the bins with requests, in order): a row a block keeps the
    -- table small (a few thousand rows at 10M requests, where a row a bin made 600k).
    SELECT
        week_start, scenario, run_id, block,
        sum(requests) AS requests,
        sum(prompt_tokens) AS prompt_tokens,
        sum(cached_tokens) AS cached_tokens,
        list(bin ORDER BY bin) FILTER (WHERE bin IS NOT NULL) AS ttft_bins,
        list(requests ORDER BY bin) FILTER (WHERE bin IS NOT NULL) AS ttft_bin_requests
    FROM filled
    GROUP BY ALL
),
run_blocks AS (
    SELECT *, unnest(range(blocks))::INTEGER AS block FROM blocked
)
SELECT
    c.week_start, c.scenario, c.endpoint, c.backend, c.config_fingerprint, c.run_id, c.block,
    c.run_cost_usd / c.blocks AS cost_usd,
    coalesce(f.requests, 0)::BIGINT AS requests,
    coalesce(f.prompt_tokens, 0)::BIGINT AS prompt_tokens,
    coalesce(f.cached_tokens, 0)::BIGINT AS cached_tokens,
    coalesce(f.ttft_bins, []::INTEGER[]) AS ttft_bins,
    coalesce(f.ttft_bin_requests, []::BIGINT[]) AS ttft_bin_requests
FROM run_blocks AS c
LEFT JOIN per_block AS f
    ON f.week_start = c.week_start AND f.scenario = c.scenario AND f.run_id = c.run_id AND f.block = c.block
