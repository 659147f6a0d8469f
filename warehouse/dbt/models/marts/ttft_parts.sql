{{ config(materialized="week_table") }}
-- ttft_parts: where the time to first token goes, per week x scenario (column definitions: _marts.yml). Each part is
-- the mean over the completed requests of what the server reported for it (requests.ttft_*_ms), a request without
-- it counting 0, and null where no request reported it; the unreported part is the mean of the TTFT the client
-- measured minus the parts its server reported, so the parts and it add up to mean_ttft_ms. A real SGLang reports
-- at most queue and prefill (docs/replay.md); the twin every stage a request passed.
SELECT {{ contract_columns() }}
FROM (
WITH completed AS (
    SELECT
        week_start,
        scenario,
        ttft_ms,
        ttft_prealloc_ms,
        ttft_bootstrap_ms,
        ttft_queue_ms,
        ttft_prefill_ms,
        ttft_kv_transfer_ms,
        ttft_decode_wait_ms,
        coalesce(ttft_prealloc_ms, 0) + coalesce(ttft_bootstrap_ms, 0) + coalesce(ttft_queue_ms, 0)
            + coalesce(ttft_prefill_ms, 0) + coalesce(ttft_kv_transfer_ms, 0) + coalesce(ttft_decode_wait_ms, 0)
            AS reported_ms,
        ttft_prealloc_ms IS NOT NULL OR ttft_bootstrap_ms IS NOT NULL OR ttft_queue_ms IS NOT NULL
            OR ttft_prefill_ms IS NOT NULL OR ttft_kv_transfer_ms IS NOT NULL OR ttft_decode_wait_ms IS NOT NULL
            AS reports_a_part
    FROM {{ source('warehouse', 'requests') }}
    WHERE is_completed AND ttft_ms IS NOT NULL
),
roles AS (
    SELECT week_start, scenario, any_value(role) AS role  -- the scenario's: one per scenario
    FROM {{ source('warehouse', 'runs') }}
    GROUP BY week_start, scenario
)
SELECT
    c.week_start,
    c.scenario,
    any_value(r.role) AS role,
    count(*) AS completed_requests,
    count(*) FILTER (WHERE c.reports_a_part) AS reporting_requests,
    avg(c.ttft_ms) AS mean_ttft_ms,
    CASE WHEN count(c.ttft_prealloc_ms) > 0 THEN avg(coalesce(c.ttft_prealloc_ms, 0)) END AS mean_ttft_prealloc_ms,
    CASE WHEN count(c.ttft_bootstrap_ms) > 0 THEN avg(coalesce(c.ttft_bootstrap_ms, 0)) END AS mean_ttft_bootstrap_ms,
    CASE WHEN count(c.ttft_queue_ms) > 0 THEN avg(coalesce(c.ttft_queue_ms, 0)) END AS mean_ttft_queue_ms,
    CASE WHEN count(c.ttft_prefill_ms) > 0 THEN avg(coalesce(c.ttft_prefill_ms, 0)) END AS mean_ttft_prefill_ms,
    CASE WHEN count(c.ttft_kv_transfer_ms) > 0 THEN avg(coalesce(c.ttft_kv_transfer_ms, 0)) END
        AS mean_ttft_kv_transfer_ms,
    CASE WHEN count(c.ttft_decode_wait_ms) > 0 THEN avg(coalesce(c.ttft_decode_wait_ms, 0)) END
        AS mean_ttft_decode_wait_ms,
    avg(c.ttft_ms - c.reported_ms) AS mean_ttft_unreported_ms
FROM completed AS c
LEFT JOIN roles AS r USING (week_start, scenario)
GROUP BY c.week_start, c.scenario
ORDER BY c.week_start, c.scenario
) AS model_rows
