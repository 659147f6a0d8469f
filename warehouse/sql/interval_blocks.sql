-- Time blocks of each costed run, for the block bootstrap of warehouse/bootstrap_interval.py: the
-- measured window is cut into $blocks equal blocks, and a completed request belongs to the block its
-- finish falls in. One row per (run, block, TTFT bin) with what completed there: bin k holds TTFTs in
-- [1.01^k, 1.01^(k+1)) ms (null: no TTFT). Every block of every run gets a row (requests 0 when
-- empty): idle time costs. One pass over `requests`.
WITH costed_runs AS (
    SELECT s.week_start, s.scenario, s.run_id, s.endpoint, s.backend, s.config_fingerprint,
           s.run_cost_usd, s.window_s, r.warmup_s
    FROM run_summary AS s
    JOIN runs AS r USING (week_start, scenario, run_id)
    WHERE s.run_cost_usd IS NOT NULL AND s.window_s > 0
),
filled AS (
    SELECT
        c.week_start, c.scenario, c.run_id,
        least($blocks - 1, greatest(0, floor((q.finish_mono_s - c.warmup_s) / c.window_s * $blocks)))::INTEGER AS block,
        CASE WHEN q.ttft_ms > 0 THEN floor(ln(q.ttft_ms) / ln(1.01))::INTEGER END AS bin,
        count(*) AS requests,
        sum(q.prompt_tokens) FILTER (WHERE q.cached_tokens IS NOT NULL) AS prompt_tokens,
        sum(q.cached_tokens) FILTER (WHERE q.prompt_tokens IS NOT NULL) AS cached_tokens
    FROM requests AS q
    JOIN costed_runs AS c USING (week_start, scenario, run_id)
    WHERE q.is_completed
    GROUP BY ALL
)
SELECT
    c.week_start, c.scenario, c.endpoint, c.backend, c.config_fingerprint, c.run_id, b.block,
    c.run_cost_usd / $blocks AS cost_usd,
    f.bin,
    coalesce(f.requests, 0) AS requests,
    coalesce(f.prompt_tokens, 0) AS prompt_tokens,
    coalesce(f.cached_tokens, 0) AS cached_tokens
FROM costed_runs AS c
CROSS JOIN (SELECT range::INTEGER AS block FROM range($blocks)) AS b
LEFT JOIN filled AS f
    ON f.week_start = c.week_start AND f.scenario = c.scenario AND f.run_id = c.run_id AND f.block = b.block;
