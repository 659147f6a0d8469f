{{ config(materialized="week_table") }}
-- A stage of run_summary (models/marts/run_summary.sql): its own table, so each pass over requests
-- streams on its own and frees its memory before the next.
SELECT
    week_start,
    scenario,
    run_id,
    quantile_cont((chunk_s - previous_chunk_s) * 1000 / tokens_per_chunk_gap, [0.50, 0.90, 0.95, 0.99]) AS itl_q
FROM (
    SELECT
        week_start,
        scenario,
        run_id,
        tokens_per_chunk_gap,
        -- Every gap between consecutive chunks, per token: the two unnests run in step (next chunk, this chunk).
        unnest(chunk_mono_s[2:]) AS chunk_s,
        unnest(chunk_mono_s[:-1]) AS previous_chunk_s
    FROM {{ source('warehouse', 'requests') }}
    WHERE is_completed AND len(chunk_mono_s) > 1
)
GROUP BY week_start, scenario, run_id
