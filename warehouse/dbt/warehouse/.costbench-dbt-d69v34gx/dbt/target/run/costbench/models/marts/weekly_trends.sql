
    
      
    

    create  table
      "costbench"."main"."weekly_trends__dbt_tmp"
  
  (
    week_start DATE not null,
    scenario VARCHAR not null,
    endpoint VARCHAR not null,
    backend VARCHAR not null,
    config_fingerprint VARCHAR,
    role VARCHAR,
    config_changed BOOLEAN not null,
    revision_note VARCHAR,
    runs BIGINT not null,
    completed_requests BIGINT not null,
    failed_requests BIGINT not null,
    efficiency_cost_per_request_usd DOUBLE,
    realised_cost_per_request_usd DOUBLE,
    idle_cost_per_request_usd DOUBLE,
    load_state VARCHAR,
    load_share_of_capacity DOUBLE,
    capacity_rps_at_slo DOUBLE,
    capacity_source VARCHAR,
    replay_cost_usd DOUBLE,
    week_spend_usd DOUBLE,
    cost_per_mtok_output_usd DOUBLE,
    api_cost_per_request_usd DOUBLE,
    p50_ttft_ms DOUBLE,
    p95_ttft_ms DOUBLE,
    p50_e2e_ms DOUBLE,
    p95_e2e_ms DOUBLE,
    prefix_cache_hit_rate DOUBLE,
    goodput DOUBLE,
    sustained_output_tokens_per_s DOUBLE,
    structured_requests BIGINT,
    constrained_requests BIGINT,
    valid_answers BIGINT,
    valid_answer_rate DOUBLE,
    usd_per_valid_request DOUBLE,
    retries DOUBLE,
    tpot_constrained_ms DOUBLE,
    tpot_unconstrained_ms DOUBLE,
    min_valid_rate DOUBLE,
    prev_week_start DATE,
    efficiency_cost_wow_change_pct DOUBLE,
    realised_cost_wow_change_pct DOUBLE,
    p95_ttft_wow_change_pct DOUBLE,
    hit_rate_wow_change_pts DOUBLE,
    baseline_weeks BIGINT not null,
    baseline_source VARCHAR,
    baseline_efficiency_cost_per_request_usd DOUBLE,
    baseline_realised_cost_per_request_usd DOUBLE,
    baseline_p95_ttft_ms DOUBLE,
    baseline_prefix_cache_hit_rate DOUBLE,
    efficiency_cost_change_pct DOUBLE,
    realised_cost_change_pct DOUBLE,
    p95_ttft_change_pct DOUBLE,
    hit_rate_change_pts DOUBLE,
    efficiency_cost_low_usd DOUBLE,
    efficiency_cost_high_usd DOUBLE,
    realised_cost_low_usd DOUBLE,
    realised_cost_high_usd DOUBLE,
    hit_rate_low DOUBLE,
    hit_rate_high DOUBLE,
    p95_ttft_low_ms DOUBLE,
    p95_ttft_high_ms DOUBLE,
    regression_verdict VARCHAR not null,
    regression_reasons VARCHAR,
    regressed_metrics VARCHAR,
    drift_start_week DATE,
    drift_metrics VARCHAR,
    cost_threshold_pct DOUBLE,
    p95_ttft_threshold_pct DOUBLE,
    hit_rate_threshold_pts DOUBLE,
    degraded_runs BIGINT not null,
    caveats VARCHAR
    
    )
 ;
    
    
    insert into "costbench"."main"."weekly_trends__dbt_tmp" 
  (
    
      
      
      week_start ,
    
      
      
      scenario ,
    
      
      
      endpoint ,
    
      
      
      backend ,
    
      
      
      config_fingerprint ,
    
      
      
      role ,
    
      
      
      config_changed ,
    
      
      
      revision_note ,
    
      
      
      runs ,
    
      
      
      completed_requests ,
    
      
      
      failed_requests ,
    
      
      
      efficiency_cost_per_request_usd ,
    
      
      
      realised_cost_per_request_usd ,
    
      
      
      idle_cost_per_request_usd ,
    
      
      
      load_state ,
    
      
      
      load_share_of_capacity ,
    
      
      
      capacity_rps_at_slo ,
    
      
      
      capacity_source ,
    
      
      
      replay_cost_usd ,
    
      
      
      week_spend_usd ,
    
      
      
      cost_per_mtok_output_usd ,
    
      
      
      api_cost_per_request_usd ,
    
      
      
      p50_ttft_ms ,
    
      
      
      p95_ttft_ms ,
    
      
      
      p50_e2e_ms ,
    
      
      
      p95_e2e_ms ,
    
      
      
      prefix_cache_hit_rate ,
    
      
      
      goodput ,
    
      
      
      sustained_output_tokens_per_s ,
    
      
      
      structured_requests ,
    
      
      
      constrained_requests ,
    
      
      
      valid_answers ,
    
      
      
      valid_answer_rate ,
    
      
      
      usd_per_valid_request ,
    
      
      
      retries ,
    
      
      
      tpot_constrained_ms ,
    
      
      
      tpot_unconstrained_ms ,
    
      
      
      min_valid_rate ,
    
      
      
      prev_week_start ,
    
      
      
      efficiency_cost_wow_change_pct ,
    
      
      
      realised_cost_wow_change_pct ,
    
      
      
      p95_ttft_wow_change_pct ,
    
      
      
      hit_rate_wow_change_pts ,
    
      
      
      baseline_weeks ,
    
      
      
      baseline_source ,
    
      
      
      baseline_efficiency_cost_per_request_usd ,
    
      
      
      baseline_realised_cost_per_request_usd ,
    
      
      
      baseline_p95_ttft_ms ,
    
      
      
      baseline_prefix_cache_hit_rate ,
    
      
      
      efficiency_cost_change_pct ,
    
      
      
      realised_cost_change_pct ,
    
      
      
      p95_ttft_change_pct ,
    
      
      
      hit_rate_change_pts ,
    
      
      
      efficiency_cost_low_usd ,
    
      
      
      efficiency_cost_high_usd ,
    
      
      
      realised_cost_low_usd ,
    
      
      
      realised_cost_high_usd ,
    
      
      
      hit_rate_low ,
    
      
      
      hit_rate_high ,
    
      
      
      p95_ttft_low_ms ,
    
      
      
      p95_ttft_high_ms ,
    
      
      
      regression_verdict ,
    
      
      
      regression_reasons ,
    
      
      
      regressed_metrics ,
    
      
      
      drift_start_week ,
    
      
      
      drift_metrics ,
    
      
      
      cost_threshold_pct ,
    
      
      
      p95_ttft_threshold_pct ,
    
      
      
      hit_rate_threshold_pts ,
    
      
      
      degraded_runs ,
    
      
      
      caveats 
    
  )
 (
      
    select week_start, scenario, endpoint, backend, config_fingerprint, role, config_changed, revision_note, runs, completed_requests, failed_requests, efficiency_cost_per_request_usd, realised_cost_per_request_usd, idle_cost_per_request_usd, load_state, load_share_of_capacity, capacity_rps_at_slo, capacity_source, replay_cost_usd, week_spend_usd, cost_per_mtok_output_usd, api_cost_per_request_usd, p50_ttft_ms, p95_ttft_ms, p50_e2e_ms, p95_e2e_ms, prefix_cache_hit_rate, goodput, sustained_output_tokens_per_s, structured_requests, constrained_requests, valid_answers, valid_answer_rate, usd_per_valid_request, retries, tpot_constrained_ms, tpot_unconstrained_ms, min_valid_rate, prev_week_start, efficiency_cost_wow_change_pct, realised_cost_wow_change_pct, p95_ttft_wow_change_pct, hit_rate_wow_change_pts, baseline_weeks, baseline_source, baseline_efficiency_cost_per_request_usd, baseline_realised_cost_per_request_usd, baseline_p95_ttft_ms, baseline_prefix_cache_hit_rate, efficiency_cost_change_pct, realised_cost_change_pct, p95_ttft_change_pct, hit_rate_change_pts, efficiency_cost_low_usd, efficiency_cost_high_usd, realised_cost_low_usd, realised_cost_high_usd, hit_rate_low, hit_rate_high, p95_ttft_low_ms, p95_ttft_high_ms, regression_verdict, regression_reasons, regressed_metrics, drift_start_week, drift_metrics, cost_threshold_pct, p95_ttft_threshold_pct, hit_rate_threshold_pts, degraded_runs, caveats
    from (
        -- weekly_trends: the verdicts of models/staging/weekly_trends_undrifted.sql, with the slow drifts
-- (models/staging/weekly_drift.py, warehouse/marts/change_points.py) marked on the rows it found: verdict 'drift',
-- when it started, which metrics, and its reasons.
SELECT 
    CAST(week_start AS DATE) AS week_start,
    CAST(scenario AS VARCHAR) AS scenario,
    CAST(endpoint AS VARCHAR) AS endpoint,
    CAST(backend AS VARCHAR) AS backend,
    CAST(config_fingerprint AS VARCHAR) AS config_fingerprint,
    CAST(role AS VARCHAR) AS role,
    CAST(config_changed AS BOOLEAN) AS config_changed,
    CAST(revision_note AS VARCHAR) AS revision_note,
    CAST(runs AS BIGINT) AS runs,
    CAST(completed_requests AS BIGINT) AS completed_requests,
    CAST(failed_requests AS BIGINT) AS failed_requests,
    CAST(efficiency_cost_per_request_usd AS DOUBLE) AS efficiency_cost_per_request_usd,
    CAST(realised_cost_per_request_usd AS DOUBLE) AS realised_cost_per_request_usd,
    CAST(idle_cost_per_request_usd AS DOUBLE) AS idle_cost_per_request_usd,
    CAST(load_state AS VARCHAR) AS load_state,
    CAST(load_share_of_capacity AS DOUBLE) AS load_share_of_capacity,
    CAST(capacity_rps_at_slo AS DOUBLE) AS capacity_rps_at_slo,
    CAST(capacity_source AS VARCHAR) AS capacity_source,
    CAST(replay_cost_usd AS DOUBLE) AS replay_cost_usd,
    CAST(week_spend_usd AS DOUBLE) AS week_spend_usd,
    CAST(cost_per_mtok_output_usd AS DOUBLE) AS cost_per_mtok_output_usd,
    CAST(api_cost_per_request_usd AS DOUBLE) AS api_cost_per_request_usd,
    CAST(p50_ttft_ms AS DOUBLE) AS p50_ttft_ms,
    CAST(p95_ttft_ms AS DOUBLE) AS p95_ttft_ms,
    CAST(p50_e2e_ms AS DOUBLE) AS p50_e2e_ms,
    CAST(p95_e2e_ms AS DOUBLE) AS p95_e2e_ms,
    CAST(prefix_cache_hit_rate AS DOUBLE) AS prefix_cache_hit_rate,
    CAST(goodput AS DOUBLE) AS goodput,
    CAST(sustained_output_tokens_per_s AS DOUBLE) AS sustained_output_tokens_per_s,
    CAST(structured_requests AS BIGINT) AS structured_requests,
    CAST(constrained_requests AS BIGINT) AS constrained_requests,
    CAST(valid_answers AS BIGINT) AS valid_answers,
    CAST(valid_answer_rate AS DOUBLE) AS valid_answer_rate,
    CAST(usd_per_valid_request AS DOUBLE) AS usd_per_valid_request,
    CAST(retries AS DOUBLE) AS retries,
    CAST(tpot_constrained_ms AS DOUBLE) AS tpot_constrained_ms,
    CAST(tpot_unconstrained_ms AS DOUBLE) AS tpot_unconstrained_ms,
    CAST(min_valid_rate AS DOUBLE) AS min_valid_rate,
    CAST(prev_week_start AS DATE) AS prev_week_start,
    CAST(efficiency_cost_wow_change_pct AS DOUBLE) AS efficiency_cost_wow_change_pct,
    CAST(realised_cost_wow_change_pct AS DOUBLE) AS realised_cost_wow_change_pct,
    CAST(p95_ttft_wow_change_pct AS DOUBLE) AS p95_ttft_wow_change_pct,
    CAST(hit_rate_wow_change_pts AS DOUBLE) AS hit_rate_wow_change_pts,
    CAST(baseline_weeks AS BIGINT) AS baseline_weeks,
    CAST(baseline_source AS VARCHAR) AS baseline_source,
    CAST(baseline_efficiency_cost_per_request_usd AS DOUBLE) AS baseline_efficiency_cost_per_request_usd,
    CAST(baseline_realised_cost_per_request_usd AS DOUBLE) AS baseline_realised_cost_per_request_usd,
    CAST(baseline_p95_ttft_ms AS DOUBLE) AS baseline_p95_ttft_ms,
    CAST(baseline_prefix_cache_hit_rate AS DOUBLE) AS baseline_prefix_cache_hit_rate,
    CAST(efficiency_cost_change_pct AS DOUBLE) AS efficiency_cost_change_pct,
    CAST(realised_cost_change_pct AS DOUBLE) AS realised_cost_change_pct,
    CAST(p95_ttft_change_pct AS DOUBLE) AS p95_ttft_change_pct,
    CAST(hit_rate_change_pts AS DOUBLE) AS hit_rate_change_pts,
    CAST(efficiency_cost_low_usd AS DOUBLE) AS efficiency_cost_low_usd,
    CAST(efficiency_cost_high_usd AS DOUBLE) AS efficiency_cost_high_usd,
    CAST(realised_cost_low_usd AS DOUBLE) AS realised_cost_low_usd,
    CAST(realised_cost_high_usd AS DOUBLE) AS realised_cost_high_usd,
    CAST(hit_rate_low AS DOUBLE) AS hit_rate_low,
    CAST(hit_rate_high AS DOUBLE) AS hit_rate_high,
    CAST(p95_ttft_low_ms AS DOUBLE) AS p95_ttft_low_ms,
    CAST(p95_ttft_high_ms AS DOUBLE) AS p95_ttft_high_ms,
    CAST(regression_verdict AS VARCHAR) AS regression_verdict,
    CAST(regression_reasons AS VARCHAR) AS regression_reasons,
    CAST(regressed_metrics AS VARCHAR) AS regressed_metrics,
    CAST(drift_start_week AS DATE) AS drift_start_week,
    CAST(drift_metrics AS VARCHAR) AS drift_metrics,
    CAST(cost_threshold_pct AS DOUBLE) AS cost_threshold_pct,
    CAST(p95_ttft_threshold_pct AS DOUBLE) AS p95_ttft_threshold_pct,
    CAST(hit_rate_threshold_pts AS DOUBLE) AS hit_rate_threshold_pts,
    CAST(degraded_runs AS BIGINT) AS degraded_runs,
    CAST(caveats AS VARCHAR) AS caveats
FROM (
    SELECT u.* REPLACE (
        CASE WHEN d.week_start IS NULL THEN u.regression_verdict ELSE 'drift' END AS regression_verdict,
        CASE WHEN d.week_start IS NULL THEN u.drift_start_week ELSE d.drift_start_week END AS drift_start_week,
        CASE WHEN d.week_start IS NULL THEN u.drift_metrics ELSE d.drift_metrics END AS drift_metrics,
        CASE WHEN d.week_start IS NULL THEN u.regression_reasons ELSE d.regression_reasons END AS regression_reasons
    )
    FROM "costbench"."staging"."weekly_trends_undrifted" AS u
    LEFT JOIN (
        -- typed here: a stage with no rows has no types to carry
        SELECT scenario::VARCHAR AS scenario, endpoint::VARCHAR AS endpoint, backend::VARCHAR AS backend,
            config_fingerprint::VARCHAR AS config_fingerprint, week_start::DATE AS week_start,
            drift_start_week::DATE AS drift_start_week, drift_metrics::VARCHAR AS drift_metrics,
            regression_reasons::VARCHAR AS regression_reasons
        FROM "costbench"."staging"."weekly_drift"
    ) AS d
        ON d.scenario = u.scenario AND d.endpoint = u.endpoint AND d.backend = u.backend
        AND d.config_fingerprint IS NOT DISTINCT FROM u.config_fingerprint AND d.week_start = u.week_start
) AS model_rows
    ) as model_subq
    );
  