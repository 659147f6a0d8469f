{{ config(materialized="week_table") }}
-- A stage of weekly_trends (models/staging/weekly_trends_undrifted.sql): the percentiles of each weekly_trends row
-- that pools several runs, over their completed requests together (a row of one run takes its run's own from
-- run_summary). Its own table so that a refresh of one week reads only that week's requests.
WITH grained_runs AS (
    SELECT
        week_start,
        scenario,
        run_id,
        struct_pack(week_start, scenario, endpoint, backend, config_fingerprint) AS grain
    FROM {{ ref('run_summary') }}
),
pooled AS (
    SELECT grain FROM grained_runs GROUP BY grain HAVING count(*) > 1
)
SELECT
    r.week_start,
    r.grain,
    quantile_cont(q.ttft_ms, [0.50, 0.95]) AS ttft_q,
    quantile_cont(q.e2e_ms, [0.50, 0.95]) AS e2e_q,
    quantile_cont(q.tpot_ms, 0.5) FILTER (WHERE q.constrained) AS tpot_constrained_ms,
    quantile_cont(q.tpot_ms, 0.5) FILTER (WHERE q.constrained IS NOT TRUE) AS tpot_unconstrained_ms
FROM {{ source('warehouse', 'requests') }} AS q
JOIN grained_runs AS r USING (week_start, scenario, run_id)
SEMI JOIN pooled AS p ON p.grain = r.grain
WHERE q.is_completed
GROUP BY r.week_start, r.grain
