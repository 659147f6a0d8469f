-- cost_attribution: why the realised cost per request moved. One row per weekly_trends row (week x scenario x
-- endpoint x backend x configuration); the change against weekly_trends' own baseline split into named parts that
-- add up to it exactly (column definitions and the method: _marts.yml, docs/warehouse.md "Cost attribution").
--
-- The realised cost per request factors into the efficiency cost (the endpoint at its SLO capacity) and the idle
-- share, and the efficiency cost into the price, the traffic's mix and the runtime's levers. Each factor is pooled
-- over the week's costed runs (ratio of sums), per GPU-hour (h) and token:
--   realised cost/request = price                                   USD per GPU-h paid
--     x paid GPU-h / capacity GPU-h                                 traffic volume: the idle share (1 = loaded to capacity)
--     x tokens / request                                            traffic mix
--     x offered work / tokens                                       traffic prefix reuse: what the trace's sharing allows
--     x realised work / offered work                                prefix cache: what the runtime's cache realised of it
--     x 1 / spec accept length                                      speculative decoding: decode steps per token
--     x workers x busiest worker's share                            routing: the fleet's imbalance (1 = even or one server)
--     x 1 + constrained share x (constrained / free TPOT - 1)       structured output: grammar's slower decode
--     x capacity GPU-h / realised work / (the three above)          batching: the work the batch gets through per
--                                                                   GPU-hour at capacity (batch size, scheduling,
--                                                                   kernels: the engine's own speed)
-- where capacity GPU-h = gpu_count x requests / capacity_rps_at_slo / 3600 (what the requests need at the SLO
-- capacity) and work = output tokens + prefill_token_weight x prompt tokens not served from a prefix cache
-- (offered: with the reuse the trace offers, runs.prefix_reuse_share; realised: with the cached_tokens reported).
-- The weight is one per pair of weeks (the geometric mean of both sides' run_summary.prefill_token_weight), so it
-- moves the split between the cache and the engine's speed only by what the tokens did. The factors telescope: their
-- product is the realised cost per request exactly. Each part is the log-mean (LMDI) share of its factor,
-- L(c, c0) x ln(f / f0) with L(c, c0) = (c - c0) / (ln c - ln c0): the parts sum to c - c0 with no residual and no
-- dependence on the order of the factors.
-- The baseline is a median of up to 4 weeks: with an odd count it is one week, with an even count the mean
-- of the middle two, so the parts are the (mean of the) decompositions against those median weeks, and
-- baseline_realised_cost_per_request_usd equals weekly_trends'. A factor unknown on either side (no capacity,
-- cached_tokens, the offered reuse or the prefill weight not recorded) leaves its part
-- null and the amount in unattributed_usd.
-- What changed in the runtime is named against the same median week(s): the fleet's routing (router policy and
-- flags, replica count, from run_summary) and each server fact of a new configuration (runs.config_facts_json, what
-- the fingerprint hashes), with the revision's note (weekly_trends.revision_note). The parts stay what they measure.
SELECT {{ contract_columns() }}
FROM (
WITH trends AS (
    -- weekly_trends with the keys weekly_trends.sql defines: grain (the row) and series (its scenario, endpoint
    -- and backend, whatever configuration they ran), struct keys in which a null fingerprint equals itself.
    SELECT
        *,
        struct_pack(week_start, scenario, endpoint, backend, config_fingerprint) AS grain,
        struct_pack(scenario, endpoint, backend) AS series
    FROM {{ ref('weekly_trends') }}
),
run_tokens AS (
    SELECT
        week_start,
        scenario,
        run_id,
        api_prompt_tokens AS input_tokens,
        api_output_tokens AS output_tokens,
        reasoning_tokens,
        reported_cached_tokens AS cached_tokens,
        cached_unreported_requests AS cached_unreported
    FROM {{ ref('per_run') }}  -- the pass over requests that run_summary makes
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
        t.input_tokens * (1 - r.prefix_reuse_share) AS offered_uncached_tokens,
        CASE WHEN t.cached_unreported = 0 THEN t.input_tokens - t.cached_tokens END AS realised_uncached_tokens,
        s.gpu_count * s.completed_requests / 3600.0 / s.capacity_rps_at_slo AS capacity_gpu_hours,
        s.completed_requests / coalesce(s.spec_accept_length, 1.0) AS spec_steps,
        s.completed_requests * coalesce(s.workers_served * s.max_worker_share, 1.0) AS routing_load,
        s.completed_requests * (1 + coalesce(s.constrained_requests / nullif(s.completed_requests, 0)
            * (s.tpot_constrained_ms / s.tpot_unconstrained_ms - 1), 0)) AS structured_load,
        s.prefill_token_weight * s.completed_requests AS weighted_prefill_weight,
        r.config_facts_json,
        CASE WHEN s.prefill_token_weight IS NOT NULL THEN s.completed_requests END AS prefill_weighted_requests
    FROM {{ ref('run_summary') }} AS s
    JOIN {{ source('warehouse', 'runs') }} AS r USING (week_start, scenario, run_id)
    LEFT JOIN run_tokens AS t USING (week_start, scenario, run_id)
    WHERE s.run_cost_usd IS NOT NULL  -- the runs weekly_trends costs, zero-completion ones included
),
weekly AS (
    -- Sums stay null when any run lacks the figure: a pooled factor must cover every costed run.
    SELECT
        grain,
        sum(run_cost_usd) / sum(completed_requests) AS realised_cost_per_request_usd,
        sum(run_cost_usd) / sum(gpu_hours) AS usd_per_gpu_hour,
        sum(input_tokens) / sum(completed_requests) AS input_tokens_per_request,
        sum(output_tokens) / sum(completed_requests) AS output_tokens_per_request,
        sum(reasoning_tokens) / sum(completed_requests) AS reasoning_tokens_per_request,
        sum(completed_requests) AS completed_requests,
        any_value(config_facts_json)::JSON AS config_facts,  -- what the fingerprint hashes: the same for every run
        sum(gpu_hours) AS gpu_hours,
        sum(input_tokens + output_tokens) AS tokens,
        sum(output_tokens) AS output_tokens,
        CASE WHEN count(offered_uncached_tokens) = count(*) THEN sum(offered_uncached_tokens) END AS offered_uncached_tokens,
        CASE WHEN count(realised_uncached_tokens) = count(*) THEN sum(realised_uncached_tokens) END AS realised_uncached_tokens,
        CASE WHEN count(capacity_gpu_hours) = count(*) THEN sum(capacity_gpu_hours) END AS capacity_gpu_hours,
        sum(spec_steps) / sum(completed_requests) AS f_speculative,
        sum(routing_load) / sum(completed_requests) AS f_routing,
        sum(structured_load) / sum(completed_requests) AS f_structured,
        CASE WHEN count(weighted_prefill_weight) = count(*)
            THEN sum(weighted_prefill_weight) / nullif(sum(prefill_weighted_requests), 0) END AS prefill_token_weight
    FROM run_factors
    GROUP BY grain
),
factors AS (
    -- The factors that need no weight; the prefix cache's and the batching's are made per pair (pairs).
    SELECT
        *,
        usd_per_gpu_hour AS f_price,
        gpu_hours / nullif(capacity_gpu_hours, 0) AS f_volume,
        tokens / completed_requests AS f_mix
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
    FROM {{ ref('run_summary') }}
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
        b.realised_cost_per_request_usd AS baseline_cost,
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
pair_weights AS (
    SELECT m.*, sqrt(c.prefill_token_weight * b.prefill_token_weight) AS kappa
    FROM median_weeks AS m
    JOIN factors AS c ON c.grain = m.grain
    JOIN factors AS b ON b.grain = m.baseline_grain
),
pairs AS (
    SELECT
        m.grain,
        m.weight,
        m.baseline_week,
        m.kappa,
        c.realised_cost_per_request_usd AS c,
        b.realised_cost_per_request_usd AS c0,
        CASE WHEN c.realised_cost_per_request_usd > 0 AND b.realised_cost_per_request_usd > 0 THEN
            CASE WHEN c.realised_cost_per_request_usd = b.realised_cost_per_request_usd THEN c.realised_cost_per_request_usd
                 ELSE (c.realised_cost_per_request_usd - b.realised_cost_per_request_usd)
                      / (ln(c.realised_cost_per_request_usd) - ln(b.realised_cost_per_request_usd)) END END AS l,
        ln(c.f_price / b.f_price) AS d_price,
        ln(c.f_volume / b.f_volume) AS d_volume,
        ln(c.f_mix / b.f_mix) AS d_mix,
        -- Work at the pair's weight: output tokens + kappa x uncached prompt tokens (offered, realised).
        ln((c.output_tokens + m.kappa * c.offered_uncached_tokens) / c.tokens
           / ((b.output_tokens + m.kappa * b.offered_uncached_tokens) / b.tokens)) AS d_prefix_reuse,
        ln((c.output_tokens + m.kappa * c.realised_uncached_tokens) / (c.output_tokens + m.kappa * c.offered_uncached_tokens)
           / ((b.output_tokens + m.kappa * b.realised_uncached_tokens) / (b.output_tokens + m.kappa * b.offered_uncached_tokens)))
            AS d_prefix_cache,
        ln(c.f_speculative / b.f_speculative) AS d_speculative,
        ln(c.f_routing / b.f_routing) AS d_routing,
        ln(c.f_structured / b.f_structured) AS d_structured,
        ln(c.capacity_gpu_hours / (c.output_tokens + m.kappa * c.realised_uncached_tokens)
               / (c.f_speculative * c.f_routing * c.f_structured)
           / (b.capacity_gpu_hours / (b.output_tokens + m.kappa * b.realised_uncached_tokens)
               / (b.f_speculative * b.f_routing * b.f_structured))) AS d_batching,
        c.f_volume IS NOT NULL AND b.f_volume IS NOT NULL AS capacity_known,
        fb.fleet AS baseline_fleet,
        fc.policies <> fb.policies OR fc.router_args <> fb.router_args OR fc.replica_counts <> fb.replica_counts
            AS routing_changed,
        list_filter([
            CASE WHEN fc.policies <> fb.policies THEN format('routing: {} -> {}', fb.policies, fc.policies) END,
            CASE WHEN fc.router_args <> fb.router_args
                THEN format('router flags: {} -> {}', fb.router_args, fc.router_args) END,
            CASE WHEN fc.replica_counts <> fb.replica_counts
                THEN format('replicas: {} -> {}', fb.replica_counts, fc.replica_counts) END
        ], lambda change: change IS NOT NULL)
        -- A new configuration in words: each server fact that changed (`disable_radix_cache: false -> true`), or the
        -- fingerprints where the facts were not recorded (macros/config_changes.sql, as the verdict's reasons name it).
        || {{ config_changes('m.baseline_grain.config_fingerprint', 'm.grain.config_fingerprint', 'b.config_facts',
                          'c.config_facts') }} AS runtime_changes
    FROM pair_weights AS m
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
        l * d_mix AS traffic_mix_usd,
        l * d_prefix_reuse AS traffic_prefix_reuse_usd,
        l * d_prefix_cache AS prefix_cache_usd,
        l * d_batching AS batching_usd,
        l * d_speculative AS speculative_decoding_usd,
        l * d_routing AS routing_usd,
        l * d_structured AS structured_output_usd
    FROM pairs
),
attributed AS (
    SELECT
        grain,
        sum(weight * c0) AS baseline_realised_cost_per_request_usd,
        string_agg(baseline_week::VARCHAR, ',' ORDER BY baseline_week) AS baseline_median_weeks,
        bool_and(capacity_known) AS capacity_known,
        nullif(array_to_string(list_sort(list_distinct(list(baseline_fleet))), ', '), '') AS baseline_fleet,
        bool_or(routing_changed) AS routing_changed,
        list_sort(list_distinct(flatten(list(runtime_changes)))) AS runtime_changes,
        -- A part is known only when it is known against every median week.
        CASE WHEN count(price_usd) = count(*) THEN sum(weight * price_usd) END AS price_usd,
        CASE WHEN count(traffic_volume_usd) = count(*) THEN sum(weight * traffic_volume_usd) END AS traffic_volume_usd,
        CASE WHEN count(traffic_mix_usd) = count(*) THEN sum(weight * traffic_mix_usd) END AS traffic_mix_usd,
        CASE WHEN count(traffic_prefix_reuse_usd) = count(*) THEN sum(weight * traffic_prefix_reuse_usd) END AS traffic_prefix_reuse_usd,
        CASE WHEN count(prefix_cache_usd) = count(*) THEN sum(weight * prefix_cache_usd) END AS prefix_cache_usd,
        CASE WHEN count(batching_usd) = count(*) THEN sum(weight * batching_usd) END AS batching_usd,
        CASE WHEN count(speculative_decoding_usd) = count(*) THEN sum(weight * speculative_decoding_usd) END AS speculative_decoding_usd,
        CASE WHEN count(routing_usd) = count(*) THEN sum(weight * routing_usd) END AS routing_usd,
        CASE WHEN count(structured_output_usd) = count(*) THEN sum(weight * structured_output_usd) END AS structured_output_usd
    FROM pair_parts
    GROUP BY grain
),
summed AS (
    SELECT
        *,
        CASE WHEN baseline_realised_cost_per_request_usd IS NOT NULL THEN coalesce(traffic_volume_usd, 0)
            + coalesce(traffic_mix_usd, 0) + coalesce(traffic_prefix_reuse_usd, 0) END AS traffic_usd,
        CASE WHEN baseline_realised_cost_per_request_usd IS NOT NULL THEN coalesce(prefix_cache_usd, 0)
            + coalesce(batching_usd, 0) + coalesce(speculative_decoding_usd, 0) + coalesce(routing_usd, 0)
            + coalesce(structured_output_usd, 0) END AS runtime_usd
    FROM attributed
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
    w.realised_cost_per_request_usd,
    a.baseline_realised_cost_per_request_usd,
    w.realised_cost_per_request_usd - a.baseline_realised_cost_per_request_usd AS change_usd,
    a.price_usd,
    a.traffic_usd,
    a.traffic_volume_usd,
    a.traffic_mix_usd,
    a.traffic_prefix_reuse_usd,
    a.runtime_usd,
    a.prefix_cache_usd,
    a.batching_usd,
    a.speculative_decoding_usd,
    a.routing_usd,
    a.structured_output_usd,
    w.realised_cost_per_request_usd - a.baseline_realised_cost_per_request_usd
        - coalesce(a.price_usd, 0) - coalesce(a.traffic_usd, 0) - coalesce(a.runtime_usd, 0) AS unattributed_usd,
    a.capacity_known,
    f.usd_per_gpu_hour,
    f.input_tokens_per_request,
    f.output_tokens_per_request,
    f.reasoning_tokens_per_request,
    f.prefill_token_weight,
    fl.replicas,
    fl.router_policy,
    a.baseline_fleet,
    a.routing_changed,
    to_json(a.runtime_changes)::VARCHAR AS runtime_changes,
    w.revision_note
FROM trends AS w
LEFT JOIN factors AS f ON f.grain = w.grain
LEFT JOIN summed AS a ON a.grain = w.grain
LEFT JOIN fleets AS fl ON fl.grain = w.grain
ORDER BY w.week_start, w.scenario, w.endpoint, w.backend, w.config_fingerprint
) AS model_rows
