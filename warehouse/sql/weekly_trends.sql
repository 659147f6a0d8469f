-- weekly_trends: one row per week x scenario x endpoint x backend (columns: schema.sql).
-- Costs and the hit rate pool the runs' sums (a ratio of sums, not a mean of ratios); percentiles
-- pool the completed requests themselves. The baseline is the median cost per request of up to the
-- 4 calendar weeks before, for the same scenario, endpoint and backend (DESIGN.md, "Regressions").
INSERT INTO weekly_trends BY NAME
WITH run_groups AS (
    SELECT
        week_start,
        scenario,
        endpoint,
        backend,
        count(*) AS runs,
        sum(completed_requests) AS completed_requests,
        sum(failed_requests) AS failed_requests,
        -- A run with an unknown window has an unknown cost: leave it out rather than count it free.
        sum(run_cost_usd) AS cost_usd,
        sum(completed_requests) FILTER (WHERE run_cost_usd IS NOT NULL) AS costed_requests,
        sum(output_tokens) FILTER (WHERE run_cost_usd IS NOT NULL) AS costed_output_tokens,
        sum(hit_rate_prompt_tokens) AS hit_rate_prompt_tokens,
        sum(hit_rate_cached_tokens) AS hit_rate_cached_tokens
    FROM run_summary
    GROUP BY week_start, scenario, endpoint, backend
),
request_groups AS (
    SELECT
        r.week_start,
        r.scenario,
        r.endpoint,
        r.backend,
        quantile_cont(q.ttft_ms, 0.50) AS p50_ttft_ms,
        quantile_cont(q.ttft_ms, 0.95) AS p95_ttft_ms,
        quantile_cont(q.e2e_ms, 0.50) AS p50_e2e_ms,
        quantile_cont(q.e2e_ms, 0.95) AS p95_e2e_ms
    FROM requests AS q
    JOIN runs AS r USING (week_start, scenario, run_id)
    WHERE q.is_completed
    GROUP BY r.week_start, r.scenario, r.endpoint, r.backend
),
weekly AS (
    SELECT
        g.week_start,
        g.scenario,
        g.endpoint,
        g.backend,
        g.runs,
        g.completed_requests,
        g.failed_requests,
        g.cost_usd,
        g.cost_usd / nullif(g.costed_requests, 0) AS cost_per_request_usd,
        g.cost_usd / nullif(g.costed_output_tokens / 1e6, 0) AS cost_per_mtok_output_usd,
        q.p50_ttft_ms,
        q.p95_ttft_ms,
        q.p50_e2e_ms,
        q.p95_e2e_ms,
        g.hit_rate_cached_tokens / nullif(g.hit_rate_prompt_tokens, 0) AS prefix_cache_hit_rate
    FROM run_groups AS g
    LEFT JOIN request_groups AS q USING (week_start, scenario, endpoint, backend)
),
baselines AS (
    SELECT
        w.week_start,
        w.scenario,
        w.endpoint,
        w.backend,
        count(b.cost_per_request_usd) AS baseline_weeks,
        median(b.cost_per_request_usd) AS baseline_cost_per_request_usd
    FROM weekly AS w
    JOIN weekly AS b
        ON b.scenario = w.scenario
        AND b.endpoint = w.endpoint
        AND b.backend = w.backend
        AND b.week_start BETWEEN w.week_start - 28 AND w.week_start - 7
    GROUP BY w.week_start, w.scenario, w.endpoint, w.backend
)
SELECT
    w.*,
    coalesce(b.baseline_weeks, 0) AS baseline_weeks,
    b.baseline_cost_per_request_usd,
    100.0 * (w.cost_per_request_usd - b.baseline_cost_per_request_usd)
        / nullif(b.baseline_cost_per_request_usd, 0) AS cost_change_pct
FROM weekly AS w
LEFT JOIN baselines AS b USING (week_start, scenario, endpoint, backend)
ORDER BY w.week_start, w.scenario, w.endpoint, w.backend;
