{{ config(materialized="week_table") }}
-- A stage of run_summary (models/marts/run_summary.sql): its own table, so each pass over requests
-- streams on its own and frees its memory before the next.
SELECT
    *,
    window_s AS measured_window_s,
    t0_wall_s + warmup_s AS window_start_wall_s,
    t0_wall_s + warmup_s + window_s AS window_end_wall_s
FROM {{ source('warehouse', 'runs') }}
