-- What changed in a regressed week: the verdict's reasons, whether the configuration changed, and the
-- four numbers of this week's runs next to last week's.
SELECT t.week_start, t.scenario, t.endpoint, t.regression_verdict, t.regression_reasons, t.config_changed,
       r.sglang_version, r.config_facts_json,
       s.prefix_cache_hit_rate, prev.prefix_cache_hit_rate AS prev_hit_rate,
       s.batch_occupancy, prev.batch_occupancy AS prev_batch_occupancy,
       s.p95_queue_share, prev.p95_queue_share AS prev_p95_queue_share,
       s.gpu_utilisation_pct, s.retractions, d.verdict AS diagnosis
FROM weekly_trends AS t
JOIN run_summary AS s USING (week_start, scenario, endpoint, backend)
JOIN runs AS r USING (week_start, scenario, run_id)
LEFT JOIN diagnoses AS d USING (week_start, scenario, run_id)
LEFT JOIN run_summary AS prev
    ON prev.scenario = t.scenario AND prev.endpoint = t.endpoint AND prev.week_start = t.week_start - 7
WHERE t.regression_verdict IN ('regression', 'sustained', 'drift')
ORDER BY t.week_start DESC, t.scenario;
