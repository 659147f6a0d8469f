-- cost_intervals: the Python stage's rows (models/staging/cost_interval_rows.py), typed by this model's contract.
SELECT 
    CAST(week_start AS DATE) AS week_start,
    CAST(scenario AS VARCHAR) AS scenario,
    CAST(endpoint AS VARCHAR) AS endpoint,
    CAST(backend AS VARCHAR) AS backend,
    CAST(config_fingerprint AS VARCHAR) AS config_fingerprint,
    CAST(blocks AS BIGINT) AS blocks,
    CAST(realised_cost_low_usd AS DOUBLE) AS realised_cost_low_usd,
    CAST(realised_cost_high_usd AS DOUBLE) AS realised_cost_high_usd,
    CAST(hit_rate_low AS DOUBLE) AS hit_rate_low,
    CAST(hit_rate_high AS DOUBLE) AS hit_rate_high,
    CAST(p95_ttft_low_ms AS DOUBLE) AS p95_ttft_low_ms,
    CAST(p95_ttft_high_ms AS DOUBLE) AS p95_ttft_high_ms,
    CAST(efficiency_cost_low_usd AS DOUBLE) AS efficiency_cost_low_usd,
    CAST(efficiency_cost_high_usd AS DOUBLE) AS efficiency_cost_high_usd,
    CAST(runs AS BIGINT) AS runs,
    CAST(run_spread_df AS BIGINT) AS run_spread_df,
    CAST(cost_run_sd_log AS DOUBLE) AS cost_run_sd_log,
    CAST(p95_ttft_run_sd_log AS DOUBLE) AS p95_ttft_run_sd_log,
    CAST(hit_rate_run_sd AS DOUBLE) AS hit_rate_run_sd,
    CAST(efficiency_run_sd_log AS DOUBLE) AS efficiency_run_sd_log
FROM "costbench"."staging"."cost_interval_rows"