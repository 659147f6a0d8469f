-- Cost trend per scenario, week by week: the efficiency cost per request (what the runtime costs on this traffic,
-- the gated figure) against its 4-week baseline and against the previous week that ran, whatever configuration it
-- ran (config_changed: another one), beside the realised cost (which also moves with volume) and the idle part
-- between them.
SELECT week_start, scenario, endpoint, backend,
       round(efficiency_cost_per_request_usd, 6) AS efficiency_cost_per_request_usd,
       round(efficiency_cost_change_pct, 1) AS vs_baseline_pct,
       round(efficiency_cost_wow_change_pct, 1) AS vs_last_week_pct,
       config_changed,
       round(realised_cost_per_request_usd, 6) AS realised_cost_per_request_usd,
       round(idle_cost_per_request_usd, 6) AS idle_cost_per_request_usd,
       load_state,
       regression_verdict
FROM weekly_trends
ORDER BY scenario, endpoint, week_start;
