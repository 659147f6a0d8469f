-- run_summary: one row per run, rebuilt from the `runs` and `requests` views (columns: schema.sql).
-- Only completed requests of the measured window (requests.is_completed) enter latency, tokens and
-- the hit rate; warm-up requests enter nothing.
INSERT INTO run_summary BY NAME
WITH per_run AS (
    SELECT
        week_start,
        scenario,
        run_id,
        count(*) FILTER (WHERE is_completed) AS completed_requests,
        count(*) FILTER (WHERE is_failed) AS failed_requests,
        count(*) FILTER (WHERE status = 'cancelled' AND NOT is_warmup) AS cancelled_requests,
        sum(completion_tokens) FILTER (WHERE is_completed) AS output_tokens,
        -- Only requests reporting both counts: a server that does not report cached_tokens must
        -- give a null hit rate, not a made-up 0.
        sum(prompt_tokens) FILTER (WHERE is_completed AND cached_tokens IS NOT NULL) AS hit_rate_prompt_tokens,
        sum(cached_tokens) FILTER (WHERE is_completed AND prompt_tokens IS NOT NULL) AS hit_rate_cached_tokens,
        quantile_cont(ttft_ms, 0.50) FILTER (WHERE is_completed) AS p50_ttft_ms,
        quantile_cont(ttft_ms, 0.95) FILTER (WHERE is_completed) AS p95_ttft_ms,
        quantile_cont(e2e_ms, 0.50) FILTER (WHERE is_completed) AS p50_e2e_ms,
        quantile_cont(e2e_ms, 0.95) FILTER (WHERE is_completed) AS p95_e2e_ms
    FROM requests
    GROUP BY week_start, scenario, run_id
),
costed AS (
    SELECT
        r.*,
        r.gpu_count * r.usd_per_gpu_hour * r.window_s / 3600.0 AS run_cost_usd,
        coalesce(q.completed_requests, 0) AS completed_requests,
        coalesce(q.failed_requests, 0) AS failed_requests,
        coalesce(q.cancelled_requests, 0) AS cancelled_requests,
        q.output_tokens,
        q.hit_rate_prompt_tokens,
        q.hit_rate_cached_tokens,
        q.p50_ttft_ms,
        q.p95_ttft_ms,
        q.p50_e2e_ms,
        q.p95_e2e_ms
    FROM runs AS r
    LEFT JOIN per_run AS q USING (week_start, scenario, run_id)
)
SELECT
    run_id,
    week_start,
    scenario,
    endpoint,
    backend,
    model,
    gpu_type,
    gpu_count,
    usd_per_gpu_hour,
    window_s,
    run_cost_usd,
    completed_requests,
    failed_requests,
    cancelled_requests,
    output_tokens,
    hit_rate_prompt_tokens,
    hit_rate_cached_tokens,
    run_cost_usd / nullif(completed_requests, 0) AS cost_per_request_usd,
    run_cost_usd / nullif(output_tokens / 1e6, 0) AS cost_per_mtok_output_usd,
    p50_ttft_ms,
    p95_ttft_ms,
    p50_e2e_ms,
    p95_e2e_ms,
    hit_rate_cached_tokens / nullif(hit_rate_prompt_tokens, 0) AS prefix_cache_hit_rate,
    output_tokens / nullif(window_s, 0) AS output_tokens_per_s,
    schedule_lag_p99_ms,
    client_degraded,
    partial
FROM costed
ORDER BY week_start, scenario, run_id;
