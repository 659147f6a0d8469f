-- Cost trend per scenario: cost per request week by week, against its 4-week baseline.
SELECT week_start, scenario, endpoint, backend,
       round(cost_per_request_usd, 6) AS cost_per_request_usd,
       round(cost_change_pct, 1) AS vs_baseline_pct,
       round(cost_wow_change_pct, 1) AS vs_last_week_pct,
       regression_verdict
FROM weekly_trends
ORDER BY scenario, endpoint, week_start;
