-- What changed in a regressed week: one row per regressed week, scenario and endpoint, naming the metrics that
-- moved and by how much against the baseline, what changed in the runtime against that baseline, whether the
-- configuration changed since last week, and the four numbers of this week's runs next to the previous week's
-- (pooled over each week's runs; the full reasons: weekly_trends.regression_reasons).
WITH week_runs AS (
    SELECT s.week_start, s.scenario, s.endpoint, s.backend, s.config_fingerprint,
           sum(s.hit_rate_cached_tokens) / nullif(sum(s.hit_rate_prompt_tokens), 0) AS hit_rate,
           avg(s.batch_occupancy) AS batch_occupancy,
           avg(s.p95_queue_share) AS p95_queue_share,
           avg(s.gpu_utilisation_pct) AS gpu_utilisation_pct,
           sum(s.retractions)::BIGINT AS retractions,
           string_agg(DISTINCT d.verdict, ', ' ORDER BY d.verdict) AS diagnosis
    FROM run_summary AS s
    LEFT JOIN diagnoses AS d USING (week_start, scenario, run_id)
    GROUP BY ALL
),
prev_runs AS (
    -- The previous week's runs, whatever configuration they ran.
    SELECT week_start, scenario, endpoint, backend,
           sum(hit_rate_cached_tokens) / nullif(sum(hit_rate_prompt_tokens), 0) AS hit_rate,
           avg(batch_occupancy) AS batch_occupancy,
           avg(p95_queue_share) AS p95_queue_share
    FROM run_summary
    GROUP BY ALL
)
SELECT t.week_start, t.scenario, t.endpoint, t.regression_verdict,
       array_to_string(from_json(coalesce(t.regressed_metrics, t.drift_metrics), '["VARCHAR"]'), ', ') AS moved,
       round(t.efficiency_cost_change_pct, 1) AS cost_vs_baseline_pct,
       round(t.p95_ttft_change_pct, 1) AS p95_ttft_vs_baseline_pct,
       round(t.hit_rate_change_pts, 1) AS hit_rate_vs_baseline_pts,
       array_to_string(from_json(a.runtime_changes, '["VARCHAR"]'), '; ') AS changed_vs_baseline,
       t.config_changed AS config_changed_since_last_week,
       round(w.hit_rate, 3) AS hit_rate, round(p.hit_rate, 3) AS prev_hit_rate,
       round(w.batch_occupancy, 3) AS batch_occupancy, round(p.batch_occupancy, 3) AS prev_batch_occupancy,
       round(w.p95_queue_share, 3) AS p95_queue_share, round(p.p95_queue_share, 3) AS prev_p95_queue_share,
       round(w.gpu_utilisation_pct, 1) AS gpu_utilisation_pct, w.retractions, w.diagnosis
FROM weekly_trends AS t
JOIN week_runs AS w
    ON w.week_start = t.week_start AND w.scenario = t.scenario AND w.endpoint = t.endpoint
    AND w.backend = t.backend AND w.config_fingerprint IS NOT DISTINCT FROM t.config_fingerprint
LEFT JOIN cost_attribution AS a
    ON a.week_start = t.week_start AND a.scenario = t.scenario AND a.endpoint = t.endpoint
    AND a.backend = t.backend AND a.config_fingerprint IS NOT DISTINCT FROM t.config_fingerprint
LEFT JOIN prev_runs AS p
    ON p.week_start = t.prev_week_start AND p.scenario = t.scenario AND p.endpoint = t.endpoint AND p.backend = t.backend
WHERE t.regression_verdict IN ('regression', 'sustained', 'drift')
ORDER BY t.week_start DESC, t.scenario, t.endpoint;
