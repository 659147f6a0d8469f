-- weekly_trends: the verdicts of models/staging/weekly_trends_undrifted.sql, with the slow drifts
-- (models/staging/weekly_drift.py, warehouse/marts/change_points.py) marked on the rows it found: verdict 'drift',
-- when it started, which metrics, and its reasons.
SELECT {{ contract_columns() }}
FROM (
    SELECT u.* REPLACE (
        CASE WHEN d.week_start IS NULL THEN u.regression_verdict ELSE 'drift' END AS regression_verdict,
        CASE WHEN d.week_start IS NULL THEN u.drift_start_week ELSE d.drift_start_week END AS drift_start_week,
        CASE WHEN d.week_start IS NULL THEN u.drift_metrics ELSE d.drift_metrics END AS drift_metrics,
        CASE WHEN d.week_start IS NULL THEN u.regression_reasons ELSE d.regression_reasons END AS regression_reasons
    )
    FROM {{ ref('weekly_trends_undrifted') }} AS u
    LEFT JOIN (
        -- typed here: a stage with no rows has no types to carry
        SELECT scenario::VARCHAR AS scenario, endpoint::VARCHAR AS endpoint, backend::VARCHAR AS backend,
            config_fingerprint::VARCHAR AS config_fingerprint, week_start::DATE AS week_start,
            drift_start_week::DATE AS drift_start_week, drift_metrics::VARCHAR AS drift_metrics,
            regression_reasons::VARCHAR AS regression_reasons
        FROM {{ ref('weekly_drift') }}
    ) AS d
        ON d.scenario = u.scenario AND d.endpoint = u.endpoint AND d.backend = u.backend
        AND d.config_fingerprint IS NOT DISTINCT FROM u.config_fingerprint AND d.week_start = u.week_start
) AS model_rows
