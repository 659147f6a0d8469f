-- cost_attribution: why cost per request moved. One row per weekly_trends row (week x scenario x endpoint x
-- backend x configuration); the change against weekly_trends' own baseline split into named parts that add
-- up to it exactly (column definitions and the method: schema.sql, docs/warehouse.md "Cost attribution").
--
-- Cost per request factors into seven ratios, each pooled over the week's costed runs (ratio of sums):
--   cost/request = price x tokens/request x offered work/tokens x realised work/offered work
--                  x capacity GPU-h/realised work x offered s/request x (offered rps x paid GPU-h/capacity GPU-h)
-- where work = input tokens not served from a prefix cache + output tokens (offered: with the reuse the
-- trace offers, runs.prefix_reuse_share; realised: with the cached_tokens the server reported), capacity
-- GPU-h = GPU-hours the completed requests need at the SLO capacity (gpu_count x requests / 3600 /
-- capacity_rps_at_slo), and offered rps = requests scheduled in the measured window / their schedule's span.
-- The factors telescope: their product is cost/request exactly. Each part is the log-mean (LMDI) share of
-- its factor, L(c, c0) x ln(f / f0) with L(c, c0) = (c - c0) / (ln c - ln c0): the parts sum to c - c0 with
-- no residual and no dependence on the order of the factors.
-- The baseline is a median of up to 4 weeks: with an odd count it is one week, with an even count the mean
-- of the middle two, so the parts are the (mean of the) decompositions against those median weeks, and
-- baseline_cost_per_request_usd equals weekly_trends'. A factor unknown on either side (no capacity sweep,
-- cached_tokens or the offered reuse not recorded) leaves its part null and the amount in unattributed_usd;
-- without a capacity on both sides, latency and occupancy are one part, runtime_occupancy_usd.
-- What changed in the runtime is named against the same median week(s): the fleet's routing (router policy and
-- flags, replica count, from run_summary) and the configuration fingerprint. A routing change moves the
-- runtime parts (the hit rate the fleet realises, its load); the parts stay what they measure.
INSERT INTO cost_attribution BY NAME
WITH trends AS (
    -- weekly_trends with the keys weekly_trends.sql defines: grain (the row) and series (its scenario, endpoint
    -- and backend, whatever configuration they ran), struct keys in which a null fingerprint equals itself.
    SELECT
        *,
        struct_pack(week_start, scenario, endpoint, backend, config_fingerprint) AS grain,
        struct_pack(scenario, endpoint, backend) AS series
    FROM weekly_trends
),
run_tokens AS (
    SELECT
        week_start,
        scenario,
        run_id,
        sum(coalesce(prompt_tokens, input_tokens)) FILTER (WHERE is_completed) AS input_tokens,
        sum(coalesce(completion_tokens, output_tokens)) FILTER (WHERE is_completed) AS output_tokens,
        sum(reasoning_tokens) FILTER (WHERE is_completed) AS reasoning_tokens,
        sum(cached_tokens) FILTER (WHERE is_completed) AS cached_tokens,
        count(*) FILTER (WHERE is_completed AND cached_tokens IS NULL) AS cached_unreported,
        count(*) FILTER (WHERE NOT is_warmup) AS offered_requests,
        max(scheduled_mono_s) FILTER (WHERE NOT is_warmup) AS last_scheduled_mono_s
    FROM requests
    GROUP BY week_start, scenario, run_id
),
run_factors AS (
    SELECT
        struct_pack(s.week_start, s.scenario, s.endpoint, s.backend, s.config_fingerprint) AS grain,  -- the row's
        s.run_cost_usd,
        s.completed_requests,
        s.gpu_count * s.window_s / 3600.0 AS gpu_hours,
        t.input_tokens,
        t.output_tokens,
        t.reasoning_tokens,
        t.input_tokens + t.output_tokens - r.prefix_reuse_share * t.input_tokens AS offered_work_tokens,
        CASE WHEN t.cached_unreported = 0 THEN t.input_tokens - t.cached_tokens + t.output_tokens END AS realised_work_tokens,
        s.gpu_count * s.completed_requests / 3600.0 / s.capacity_rps_at_slo AS capacity_gpu_hours,
        t.offered_requests,
        nullif(t.last_scheduled_mono_s - r.warmup_s, 0) AS offered_span_s
    FROM run_summary AS s
    JOIN runs AS r USING (week_start, scenario, run_id)
    LEFT JOIN run_tokens AS t USING (week_start, scenario, run_id)
    WHERE s.run_cost_usd IS NOT NULL  -- the runs weekly_trends costs, zero-completion ones included
),
weekly AS (
    -- Sums stay null when any run lacks the figure: a pooled factor must cover every costed run.
    SELECT
        grain,
        sum(run_cost_usd) / sum(completed_requests) AS cost_per_request_usd,
        sum(run_cost_usd) / sum(gpu_hours) AS usd_per_gpu_hour,
        sum(input_tokens) / sum(completed_requests) AS input_tokens_per_request,
        sum(output_tokens) / sum(completed_requests) AS output_tokens_per_request,
        sum(reasoning_tokens) / sum(completed_requests) AS reasoning_tokens_per_request,
        sum(completed_requests) AS completed_requests,
        sum(gpu_hours) AS gpu_hours,
        sum(input_tokens + output_tokens) AS tokens,
        CASE WHEN count(offered_work_tokens) = count(*) THEN sum(offered_work_tokens) END AS offered_work_tokens,
        CASE WHEN count(realised_work_tokens) = count(*) THEN sum(realised_work_tokens) END AS realised_work_tokens,
        CASE WHEN count(capacity_gpu_hours) = count(*) THEN sum(capacity_gpu_hours) END AS capacity_gpu_hours,
        CASE WHEN count(offered_span_s) = count(*) THEN sum(offered_requests) / sum(offered_span_s) END AS offered_rps
    FROM run_factors
    GROUP BY grain
),
factors AS (
    SELECT
        *,
        usd_per_gpu_hour AS f_price,
        tokens / completed_requests AS f_token_mix,
        offered_work_tokens / nullif(tokens, 0) AS f_prefix_reuse,
        realised_work_tokens / nullif(offered_work_tokens, 0) AS f_cache,
        capacity_gpu_hours / nullif(realised_work_tokens, 0) AS f_latency,
        1 / offered_rps AS f_volume,
        offered_rps * gpu_hours / nullif(capacity_gpu_hours, 0) AS f_occupancy,
        -- Latency and occupancy together, for a pair where a side has no capacity.
        offered_rps * gpu_hours / nullif(realised_work_tokens, 0) AS f_runtime_load
    FROM weekly
),
run_fleets AS (
    SELECT
        struct_pack(week_start, scenario, endpoint, backend, config_fingerprint) AS grain,
        replicas,
        router_policy,
        coalesce(router_args_json, '[]') AS router_args,
        CASE WHEN router_policy IS NOT NULL THEN format('{} x {}', replicas, router_policy)
             WHEN replicas = 1 THEN '1 server' ELSE format('{} servers', replicas) END AS fleet
    FROM run_summary
    WHERE run_cost_usd IS NOT NULL  -- the runs the factors pool
),
fleets AS (
    -- The week's fleet; unknown (null) when any of its runs was recorded before fleets.
    SELECT
        grain,
        CASE WHEN count(replicas) = count(*) AND count(DISTINCT replicas) = 1 THEN any_value(replicas) END AS replicas,
        CASE WHEN count(replicas) = count(*) AND count(DISTINCT coalesce(router_policy, '')) = 1
            THEN any_value(router_policy) END AS router_policy,
        CASE WHEN count(replicas) = count(*)
            THEN array_to_string(list_sort(list(DISTINCT coalesce(router_policy, 'none'))), ', ') END AS policies,
        CASE WHEN count(replicas) = count(*) THEN array_to_string(list_sort(list(DISTINCT router_args)), ', ') END AS router_args,
        CASE WHEN count(replicas) = count(*)
            THEN array_to_string(list_sort(list(DISTINCT replicas::VARCHAR)), ', ') END AS replica_counts,
        CASE WHEN count(replicas) = count(*) THEN array_to_string(list_sort(list(DISTINCT fleet)), ', ') END AS fleet
    FROM run_fleets
    GROUP BY grain
),
candidates AS (
    -- weekly_trends' baseline weeks: the same configuration's, or (baseline_source previous_config /
    -- unrecorded_config) the scenario and endpoint's whatever they ran; the 4 most recent earlier rows.
    SELECT
        w.grain,
        b.grain AS baseline_grain,
        b.week_start AS baseline_week,
        b.cost_per_request_usd AS baseline_cost,
        row_number() OVER (PARTITION BY w.grain ORDER BY b.week_start DESC, b.config_fingerprint) AS recency
    FROM trends AS w
    JOIN trends AS b
        ON b.series = w.series AND b.week_start < w.week_start
        AND (w.baseline_source <> 'same_config' OR b.config_fingerprint IS NOT DISTINCT FROM w.config_fingerprint)
    WHERE w.baseline_source IS NOT NULL
),
ranked AS (
    SELECT
        *,
        row_number() OVER (PARTITION BY grain ORDER BY baseline_cost, baseline_week) AS cost_rank,
        count(*) OVER (PARTITION BY grain) AS costed_weeks
    FROM candidates
    WHERE recency <= 4 AND baseline_cost IS NOT NULL
),
median_weeks AS (
    -- The week(s) the median is made of: the middle one, or the middle two weighted a half each.
    SELECT *, CASE WHEN costed_weeks % 2 = 1 THEN 1.0 ELSE 0.5 END AS weight
    FROM ranked
    WHERE cost_rank IN ((costed_weeks + 1) // 2, costed_weeks // 2 + 1)
),
pairs AS (
    SELECT
        m.grain,
        m.weight,
        m.baseline_week,
        c.cost_per_request_usd AS c,
        b.cost_per_request_usd AS c0,
        CASE WHEN c.cost_per_request_usd > 0 AND b.cost_per_request_usd > 0 THEN
            CASE WHEN c.cost_per_request_usd = b.cost_per_request_usd THEN c.cost_per_request_usd
                 ELSE (c.cost_per_request_usd - b.cost_per_request_usd)
                      / (ln(c.cost_per_request_usd) - ln(b.cost_per_request_usd)) END END AS l,
        ln(c.f_price / b.f_price) AS d_price,
        ln(c.f_volume / b.f_volume) AS d_volume,
        ln(c.f_token_mix / b.f_token_mix) AS d_token_mix,
        ln(c.f_prefix_reuse / b.f_prefix_reuse) AS d_prefix_reuse,
        ln(c.f_cache / b.f_cache) AS d_cache,
        ln(c.f_latency / b.f_latency) AS d_latency,
        coalesce(ln(c.f_occupancy / b.f_occupancy), ln(c.f_runtime_load / b.f_runtime_load)) AS d_occupancy,
        c.f_latency IS NOT NULL AND b.f_latency IS NOT NULL AS capacity_known,
        fb.fleet AS baseline_fleet,
        fc.policies <> fb.policies OR fc.router_args <> fb.router_args OR fc.replica_counts <> fb.replica_counts
            AS routing_changed,
        list_filter([
            CASE WHEN fc.policies <> fb.policies THEN format('routing: {} -> {}', fb.policies, fc.policies) END,
            CASE WHEN fc.router_args <> fb.router_args
                THEN format('router flags: {} -> {}', fb.router_args, fc.router_args) END,
            CASE WHEN fc.replica_counts <> fb.replica_counts
                THEN format('replicas: {} -> {}', fb.replica_counts, fc.replica_counts) END,
            CASE WHEN m.grain.config_fingerprint <> m.baseline_grain.config_fingerprint THEN format(
                'configuration: {} -> {}', m.baseline_grain.config_fingerprint, m.grain.config_fingerprint) END
        ], lambda change: change IS NOT NULL) AS runtime_changes
    FROM median_weeks AS m
    JOIN factors AS c ON c.grain = m.grain
    JOIN factors AS b ON b.grain = m.baseline_grain
    LEFT JOIN fleets AS fc ON fc.grain = m.grain
    LEFT JOIN fleets AS fb ON fb.grain = m.baseline_grain
),
pair_parts AS (
    SELECT
        *,
        l * d_price AS price_usd,
        l * d_volume AS traffic_volume_usd,
        l * d_token_mix AS traffic_token_mix_usd,
        l * d_prefix_reuse AS traffic_prefix_reuse_usd,
        l * d_cache AS runtime_cache_usd,
        l * d_latency AS runtime_latency_usd,
        l * d_occupancy AS runtime_occupancy_usd
    FROM pairs
),
attributed AS (
    SELECT
        grain,
        sum(weight * c0) AS baseline_cost_per_request_usd,
        string_agg(baseline_week::VARCHAR, ',' ORDER BY baseline_week) AS baseline_median_weeks,
        bool_and(capacity_known) AS capacity_known,
        nullif(array_to_string(list_sort(list_distinct(list(baseline_fleet))), ', '), '') AS baseline_fleet,
        bool_or(routing_changed) AS routing_changed,
        list_sort(list_distinct(flatten(list(runtime_changes)))) AS runtime_changes,
        -- A part is known only when it is known against every median week.
        CASE WHEN count(price_usd) = count(*) THEN sum(weight * price_usd) END AS price_usd,
        CASE WHEN count(traffic_volume_usd) = count(*) THEN sum(weight * traffic_volume_usd) END AS traffic_volume_usd,
        CASE WHEN count(traffic_token_mix_usd) = count(*) THEN sum(weight * traffic_token_mix_usd) END AS traffic_token_mix_usd,
        CASE WHEN count(traffic_prefix_reuse_usd) = count(*) THEN sum(weight * traffic_prefix_reuse_usd) END AS traffic_prefix_reuse_usd,
        CASE WHEN count(runtime_cache_usd) = count(*) THEN sum(weight * runtime_cache_usd) END AS runtime_cache_usd,
        CASE WHEN count(runtime_latency_usd) = count(*) THEN sum(weight * runtime_latency_usd) END AS runtime_latency_usd,
        CASE WHEN count(runtime_occupancy_usd) = count(*) THEN sum(weight * runtime_occupancy_usd) END AS runtime_occupancy_usd
    FROM pair_parts
    GROUP BY grain
)
SELECT
    w.week_start,
    w.scenario,
    w.endpoint,
    w.backend,
    w.config_fingerprint,
    w.role,
    w.baseline_source,
    w.baseline_weeks,
    a.baseline_median_weeks,
    w.cost_per_request_usd,
    a.baseline_cost_per_request_usd,
    w.cost_per_request_usd - a.baseline_cost_per_request_usd AS change_usd,
    a.price_usd,
    a.traffic_volume_usd,
    a.traffic_token_mix_usd,
    a.traffic_prefix_reuse_usd,
    a.runtime_cache_usd,
    a.runtime_latency_usd,
    a.runtime_occupancy_usd,
    w.cost_per_request_usd - a.baseline_cost_per_request_usd
        - coalesce(a.price_usd, 0) - coalesce(a.traffic_volume_usd, 0) - coalesce(a.traffic_token_mix_usd, 0)
        - coalesce(a.traffic_prefix_reuse_usd, 0) - coalesce(a.runtime_cache_usd, 0)
        - coalesce(a.runtime_latency_usd, 0) - coalesce(a.runtime_occupancy_usd, 0) AS unattributed_usd,
    CASE WHEN a.baseline_cost_per_request_usd IS NOT NULL THEN coalesce(a.traffic_volume_usd, 0)
        + coalesce(a.traffic_token_mix_usd, 0) + coalesce(a.traffic_prefix_reuse_usd, 0) END AS traffic_usd,
    CASE WHEN a.baseline_cost_per_request_usd IS NOT NULL THEN coalesce(a.runtime_cache_usd, 0)
        + coalesce(a.runtime_latency_usd, 0) + coalesce(a.runtime_occupancy_usd, 0) END AS runtime_usd,
    a.capacity_known,
    f.usd_per_gpu_hour,
    f.offered_rps,
    f.input_tokens_per_request,
    f.output_tokens_per_request,
    f.reasoning_tokens_per_request,
    f.offered_work_tokens / nullif(f.tokens, 0) AS offered_work_share,
    f.realised_work_tokens / nullif(f.tokens, 0) AS realised_work_share,
    fl.replicas,
    fl.router_policy,
    a.baseline_fleet,
    a.routing_changed,
    to_json(a.runtime_changes)::VARCHAR AS runtime_changes
FROM trends AS w
LEFT JOIN factors AS f ON f.grain = w.grain
LEFT JOIN attributed AS a ON a.grain = w.grain
LEFT JOIN fleets AS fl ON fl.grain = w.grain
ORDER BY w.week_start, w.scenario, w.endpoint, w.backend, w.config_fingerprint;
