{{ config(materialized="week_table") }}
-- run_workers: how a fleet's router spread each run's completed requests over its workers, and the hit rate
-- each worker's cache realised (column definitions: _marts.yml). The worker is the one smg names in its
-- x-smg-routed-worker-id response header (requests.worker); a single server's requests name none.
SELECT {{ contract_columns() }}
FROM (
SELECT
    run_id,
    week_start,
    scenario,
    worker,
    completed_requests,
    completed_requests / sum(completed_requests) OVER (PARTITION BY week_start, scenario, run_id) AS request_share,
    hit_rate_prompt_tokens,
    hit_rate_cached_tokens,
    hit_rate_cached_tokens / nullif(hit_rate_prompt_tokens, 0) AS prefix_cache_hit_rate,
    p95_ttft_ms
FROM (
    SELECT
        week_start,
        scenario,
        run_id,
        worker,
        count(*) AS completed_requests,
        -- Only requests reporting both counts, as run_summary's hit rate.
        sum(prompt_tokens) FILTER (WHERE cached_tokens IS NOT NULL) AS hit_rate_prompt_tokens,
        sum(cached_tokens) FILTER (WHERE prompt_tokens IS NOT NULL) AS hit_rate_cached_tokens,
        quantile_cont(ttft_ms, 0.95) AS p95_ttft_ms
    FROM {{ source('warehouse', 'requests') }}
    WHERE is_completed
    GROUP BY week_start, scenario, run_id, worker
)
ORDER BY week_start, scenario, run_id, worker NULLS FIRST
) AS model_rows
