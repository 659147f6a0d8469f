{{ config(materialized="week_table") }}
-- run_summary: one row per run, rebuilt from the lake views (column definitions: _marts.yml).
-- Only completed requests of the measured window (requests.is_completed) enter latency, tokens, hit
-- rate and cost per request; warm-up requests enter nothing; server and GPU samples count only
-- between t0 + warmup_s and the last request's end, t0 + warmup_s + window_s (counters: up to 2 s later, the
-- scrape after it). runs.window_s is the measured window already: the replay excluded the
-- warm-up, and it is not subtracted again here.
-- Built in stages (the models run_windows, per_run, itl and per_run_slo in schema staging) so each pass over
-- `requests` streams on its own and its memory is freed before the next: at 10M requests this is what keeps the
-- rebuild in memory.
SELECT {{ contract_columns() }}
FROM (
WITH window_samples AS (
    SELECT s.*, w.window_start_wall_s, w.window_end_wall_s, w.max_running_requests
    FROM {{ source('warehouse', 'server_samples') }} AS s
    JOIN {{ ref('run_windows') }} AS w USING (week_start, scenario, run_id)
    -- The servers' own series only: a fleet's router (smg_*) would count its workers' requests again.
    WHERE s.role IS DISTINCT FROM 'router'
),
counters AS (
    -- Counters are stored as deltas from the run's first scrape: the window's delta is last - first.
    SELECT
        week_start,
        scenario,
        run_id,
        sum(delta) FILTER (WHERE metric = 'sglang:cached_tokens_total') AS server_cached_tokens,
        sum(delta) FILTER (WHERE metric = 'sglang:prompt_tokens_total') AS server_prompt_tokens,
        sum(delta) FILTER (WHERE metric = 'sglang:num_retracted_requests_total') AS retractions,
        -- Decode steps by how they ran (SGLang's increment_decode_cuda_graph_pass; its label mode).
        sum(delta) FILTER (WHERE metric = 'sglang:cuda_graph_passes_total' AND mode = 'decode_none') AS eager_decode_steps,
        sum(delta) FILTER (WHERE metric = 'sglang:cuda_graph_passes_total' AND mode IN ('decode_none', 'decode_cuda_graph'))
            AS decode_steps
    FROM (
        SELECT week_start, scenario, run_id, metric, json_extract_string(labels_json, '$.mode') AS mode,
               max_by(value, sample_wall_s) - min_by(value, sample_wall_s) AS delta
        FROM window_samples
        WHERE kind = 'counter'
            AND metric IN ('sglang:cached_tokens_total', 'sglang:prompt_tokens_total',
                           'sglang:num_retracted_requests_total', 'sglang:cuda_graph_passes_total')
            AND sample_wall_s BETWEEN window_start_wall_s AND window_end_wall_s + 2.0
        GROUP BY week_start, scenario, run_id, metric, source_url, labels_json
    )
    GROUP BY week_start, scenario, run_id
),
gauge_steps AS (
    -- A gauge holds its sampled value until the next sample of the same series (or the window's end).
    SELECT
        week_start,
        scenario,
        run_id,
        metric,
        source_url,
        labels_json,
        value,
        max_running_requests,
        least(lead(sample_wall_s) OVER series, window_end_wall_s) - sample_wall_s AS held_s
    FROM window_samples
    WHERE kind = 'gauge'
        AND metric IN ('sglang:num_running_reqs', 'sglang:token_usage', 'sglang:spec_accept_length')
        AND sample_wall_s >= window_start_wall_s AND sample_wall_s < window_end_wall_s
    WINDOW series AS (PARTITION BY week_start, scenario, run_id, metric, source_url, labels_json ORDER BY sample_wall_s)
),
gauge_means AS (
    SELECT week_start, scenario, run_id, metric, source_url, any_value(max_running_requests) AS max_running_requests,
           sum(value * held_s) / nullif(sum(held_s), 0) AS mean_value, max(value) AS max_value
    FROM gauge_steps
    GROUP BY week_start, scenario, run_id, metric, source_url, labels_json
),
worker_caps AS (
    -- The cap each worker enforces, as the probes read it from that worker's /server_info.
    SELECT week_start, scenario, run_id, source_url, max(value) AS worker_cap
    FROM {{ source('warehouse', 'server_samples') }}
    WHERE kind = 'info' AND metric = 'server_info:max_running_requests'
    GROUP BY week_start, scenario, run_id, source_url
),
occupancy AS (
    -- The fleet's running requests (each worker's time-weighted mean, added up), and against the workers' caps
    -- (one sampled worker without a known cap makes that share unknown).
    SELECT
        week_start,
        scenario,
        run_id,
        sum(mean_running) AS mean_running_total,
        count(*) AS running_workers,
        CASE WHEN count(worker_cap) = count(*) THEN sum(mean_running) / nullif(sum(worker_cap), 0) END AS running_cap_share
    FROM (
        SELECT m.week_start, m.scenario, m.run_id, m.source_url, sum(m.mean_value) AS mean_running,
               coalesce(any_value(c.worker_cap), any_value(m.max_running_requests)) AS worker_cap
        FROM gauge_means AS m
        LEFT JOIN worker_caps AS c USING (week_start, scenario, run_id, source_url)
        WHERE m.metric = 'sglang:num_running_reqs'
        GROUP BY m.week_start, m.scenario, m.run_id, m.source_url
    )
    GROUP BY week_start, scenario, run_id
),
gauges AS (
    SELECT
        week_start,
        scenario,
        run_id,
        sum(mean_value) FILTER (WHERE metric = 'sglang:token_usage') AS kv_usage_mean,
        max(max_value) FILTER (WHERE metric = 'sglang:token_usage') AS kv_usage_max,
        count(*) FILTER (WHERE metric = 'sglang:token_usage') AS kv_usage_series,
        -- Tokens each decode step gives a request with speculative decoding (1 without: no such series).
        avg(mean_value) FILTER (WHERE metric = 'sglang:spec_accept_length' AND mean_value > 0) AS spec_accept_length
    FROM gauge_means
    GROUP BY week_start, scenario, run_id
),
sample_counts AS (
    SELECT week_start, scenario, run_id, count(*) AS server_sample_count
    FROM {{ source('warehouse', 'server_samples') }}
    WHERE kind NOT IN ('info', 'health')  -- scraped series only: not /server_info's facts, nor whether a scrape was answered
    GROUP BY week_start, scenario, run_id
),
worker_spread AS (
    -- How the router spread the completed requests (run_workers, built before this mart).
    SELECT
        week_start,
        scenario,
        run_id,
        nullif(count(worker), 0) AS workers_served,
        max(request_share) FILTER (WHERE worker IS NOT NULL) AS max_worker_share
    FROM {{ ref('run_workers') }}
    GROUP BY week_start, scenario, run_id
),
gpu AS (
    SELECT
        g.week_start,
        g.scenario,
        g.run_id,
        avg(g.utilisation_pct) FILTER (
            WHERE g.sample_wall_s BETWEEN w.window_start_wall_s AND w.window_end_wall_s
        ) AS gpu_utilisation_pct,
        avg(g.sm_active_pct) FILTER (
            WHERE g.sample_wall_s BETWEEN w.window_start_wall_s AND w.window_end_wall_s
        ) AS sm_active_pct,
        avg(g.dram_active_pct) FILTER (
            WHERE g.sample_wall_s BETWEEN w.window_start_wall_s AND w.window_end_wall_s
        ) AS dram_active_pct,
        -- One sampler a run, so one source; twin rows are modelled, and the column lets a reader see it.
        min(g.source) FILTER (
            WHERE g.utilisation_pct IS NOT NULL AND g.sample_wall_s BETWEEN w.window_start_wall_s AND w.window_end_wall_s
        ) AS gpu_metrics_source,
        count(g.utilisation_pct) AS gpu_sample_count
    FROM {{ source('warehouse', 'gpu_samples') }} AS g
    JOIN {{ ref('run_windows') }} AS w USING (week_start, scenario, run_id)
    GROUP BY g.week_start, g.scenario, g.run_id
),
plan_choice AS (
    SELECT week_start, scenario, run_id, replicas AS plan_replicas, router_policy AS fleet_plan_policy
    FROM {{ source('warehouse', 'fleet_plan_shapes') }}
    WHERE chosen
),
costed AS (
    SELECT
        r.*,
        r.gpu_count * r.usd_per_gpu_hour * r.measured_window_s / 3600.0 AS run_cost_usd,
        coalesce(q.completed_requests, 0) AS completed_requests,
        coalesce(q.failed_requests, 0) AS failed_requests,
        coalesce(q.cancelled_requests, 0) AS cancelled_requests,
        coalesce(q.structured_requests, 0) AS structured_requests,
        coalesce(q.constrained_requests, 0) AS constrained_requests,
        coalesce(q.valid_answers, 0) AS valid_answers,
        q.* EXCLUDE (week_start, scenario, run_id, completed_requests, failed_requests, cancelled_requests,
                     structured_requests, constrained_requests, valid_answers),
        i.itl_q,
        s.good_requests,
        s.tail_modelled_queue_ms,
        s.tail_server_queue_ms,
        s.tail_reports_queue_time,
        s.tail_e2e_ms,
        c.server_cached_tokens,
        c.server_prompt_tokens,
        c.retractions,
        -- A mode's series appears with its first step: no decode_none series beside decode_cuda_graph is none eager.
        coalesce(c.eager_decode_steps, 0) / nullif(c.decode_steps, 0) AS eager_decode_share,
        o.mean_running_total,
        o.running_workers,
        o.running_cap_share,
        g.kv_usage_mean,
        g.kv_usage_max,
        g.kv_usage_series,
        g.spec_accept_length,
        coalesce(n.server_sample_count, 0) AS server_sample_count,
        u.gpu_utilisation_pct,
        u.sm_active_pct,
        u.dram_active_pct,
        u.gpu_metrics_source,
        coalesce(u.gpu_sample_count, 0) AS gpu_sample_count,
        ws.workers_served,
        ws.max_worker_share,
        pc.plan_replicas,
        pc.fleet_plan_policy,
        gp.usd_per_gpu_hour AS list_usd_per_gpu_hour,
        ap.name AS api_price_name,
        -- The API's own prefix cache on the same traffic: the prompt tokens the trace repeats (runs.prefix_reuse_share,
        -- what a provider's context cache serves) at its cached-input price, whatever this endpoint's cache realised,
        -- so breaking the endpoint's cache does not make the API dearer; a run that did not record the offered reuse
        -- falls back to the endpoint's own cache hits.
        (api.cached_tokens * ap.usd_per_mtok_cached_input
            + (q.api_prompt_tokens - api.cached_tokens) * ap.usd_per_mtok_uncached_input
            + q.api_output_tokens * ap.usd_per_mtok_output) / 1e6 AS api_cost_usd
    FROM {{ ref('run_windows') }} AS r
    LEFT JOIN {{ ref('per_run') }} AS q USING (week_start, scenario, run_id)
    LEFT JOIN {{ ref('itl') }} AS i USING (week_start, scenario, run_id)
    LEFT JOIN {{ ref('per_run_slo') }} AS s USING (week_start, scenario, run_id)
    LEFT JOIN counters AS c USING (week_start, scenario, run_id)
    LEFT JOIN occupancy AS o USING (week_start, scenario, run_id)
    LEFT JOIN gauges AS g USING (week_start, scenario, run_id)
    LEFT JOIN sample_counts AS n USING (week_start, scenario, run_id)
    LEFT JOIN gpu AS u USING (week_start, scenario, run_id)
    LEFT JOIN worker_spread AS ws USING (week_start, scenario, run_id)
    LEFT JOIN plan_choice AS pc USING (week_start, scenario, run_id)
    LEFT JOIN {{ source('warehouse', 'gpu_prices') }} AS gp ON gp.gpu_type = r.gpu_type
    LEFT JOIN {{ source('warehouse', 'api_prices') }} AS ap ON ap.model = lower(r.model)
    CROSS JOIN LATERAL (
        SELECT coalesce(r.prefix_reuse_share * q.api_prompt_tokens, q.own_cached_tokens) AS cached_tokens
    ) AS api
),
sized AS (
    SELECT
        *,
        -- Workers of this endpoint's kind: the plan's fewest that held the target in its replays; else the
        -- measured SLO capacity per worker; else the goodput per worker this run happened to see.
        coalesce(plan_replicas, ceil(target_rps * coalesce(replicas, 1) / coalesce(capacity_rps_at_slo,
            nullif(good_requests / nullif(measured_window_s, 0), 0)))) AS replicas_for_target
    FROM costed
)
SELECT
    run_id,
    week_start,
    scenario,
    endpoint,
    backend,
    model,
    config_fingerprint,
    revision_note,
    gpu_type,
    gpu_count,
    usd_per_gpu_hour,
    list_usd_per_gpu_hour,
    measured_window_s AS window_s,
    run_cost_usd,
    hours_per_week,
    -- The week's spend: the endpoint's GPUs held for the week at this run's price, whatever the replay's length.
    gpu_count * usd_per_gpu_hour * hours_per_week AS week_spend_usd,
    completed_requests,
    failed_requests,
    cancelled_requests,
    output_tokens,
    hit_rate_prompt_tokens,
    hit_rate_cached_tokens,
    run_cost_usd / nullif(completed_requests, 0) AS realised_cost_per_request_usd,
    run_cost_usd / nullif(output_tokens / 1e6, 0) AS cost_per_mtok_output_usd,
    api_price_name,
    api_cost_usd,
    api_cost_usd / nullif(completed_requests, 0) AS api_cost_per_request_usd,
    run_cost_usd / nullif(api_cost_usd, 0) AS self_host_to_api_cost_ratio,
    -- Occupancy against what the endpoint runs inside its SLO: the running batch one worker keeps when it carries
    -- its SLO capacity (the sweep's capacity probe); without a sweep, the share of the KV pool running requests hold.
    CASE WHEN running_requests_at_slo > 0 AND mean_running_total IS NOT NULL THEN 'slo_batch'
         WHEN kv_usage_series > 0 THEN 'kv_pool' END AS batch_occupancy_basis,
    CASE batch_occupancy_basis
        WHEN 'slo_batch' THEN mean_running_total / (running_requests_at_slo * running_workers)
        WHEN 'kv_pool' THEN kv_usage_mean / kv_usage_series END AS batch_occupancy,
    batch_occupancy * run_cost_usd / nullif(api_cost_usd, 0) AS break_even_utilisation,
    hit_rate_cached_tokens / nullif(hit_rate_prompt_tokens, 0) AS prefix_cache_hit_rate,
    server_cached_tokens / nullif(server_prompt_tokens, 0) AS server_prefix_cache_hit_rate,
    running_cap_share,
    running_requests_at_slo,
    kv_usage_mean,
    kv_usage_max,
    retractions::BIGINT AS retractions,
    eager_decode_share,
    spec_accept_length,
    -- GPU time of an uncached prompt token against an output token, both from this run: the fastest prefill it saw
    -- (1 / peak_prefill_tokens_per_ms of one server) against a decode step's time shared by the batch (p50 TPOT /
    -- the mean running requests per worker). cost_attribution weighs the prefix cache's saved tokens by it.
    (mean_running_total / running_workers) / nullif(peak_prefill_tokens_per_ms * tpot_q[1], 0) AS prefill_token_weight,
    gpu_utilisation_pct,
    sm_active_pct,
    dram_active_pct,
    gpu_metrics_source,
    server_sample_count,
    gpu_sample_count,
    ttft_q[1] AS p50_ttft_ms,
    ttft_q[2] AS p90_ttft_ms,
    ttft_q[3] AS p95_ttft_ms,
    ttft_q[4] AS p99_ttft_ms,
    ttfa_q[1] AS p50_ttfa_ms,
    ttfa_q[2] AS p90_ttfa_ms,
    ttfa_q[3] AS p95_ttfa_ms,
    ttfa_q[4] AS p99_ttfa_ms,
    itl_q[1] AS p50_itl_ms,
    itl_q[2] AS p90_itl_ms,
    itl_q[3] AS p95_itl_ms,
    itl_q[4] AS p99_itl_ms,
    tpot_q[1] AS p50_tpot_ms,
    tpot_q[2] AS p90_tpot_ms,
    tpot_q[3] AS p95_tpot_ms,
    tpot_q[4] AS p99_tpot_ms,
    e2e_q[1] AS p50_e2e_ms,
    e2e_q[2] AS p90_e2e_ms,
    e2e_q[3] AS p95_e2e_ms,
    e2e_q[4] AS p99_e2e_ms,
    p95_e2e_from_schedule_ms,
    CASE WHEN tail_reports_queue_time THEN tail_server_queue_ms ELSE tail_modelled_queue_ms END
        / nullif(tail_e2e_ms, 0) AS p95_queue_share,
    CASE WHEN tail_e2e_ms > 0 THEN CASE WHEN tail_reports_queue_time THEN 'server' ELSE 'modelled' END END AS queue_share_source,
    share_reasoning_tokens / nullif(share_completion_tokens, 0) AS reasoning_token_share,
    slo_ttft_ms,
    slo_tpot_ms,
    CASE WHEN slo_ttft_ms IS NOT NULL OR slo_tpot_ms IS NOT NULL THEN coalesce(good_requests, 0) END AS good_requests,
    CASE WHEN slo_ttft_ms IS NOT NULL OR slo_tpot_ms IS NOT NULL
        THEN coalesce(good_requests, 0) / nullif(completed_requests + failed_requests, 0) END AS goodput,
    CASE WHEN slo_ttft_ms IS NOT NULL OR slo_tpot_ms IS NOT NULL
        THEN coalesce(good_requests, 0) / nullif(measured_window_s, 0) END AS goodput_rps,
    output_tokens / nullif(measured_window_s, 0) AS sustained_output_tokens_per_s,
    target_rps,
    replicas_for_target,
    CASE WHEN replicas_for_target IS NOT NULL
        THEN CASE WHEN plan_replicas IS NOT NULL THEN 'fleet_plan'
                  WHEN capacity_rps_at_slo IS NOT NULL THEN 'capacity' ELSE 'goodput' END END
        AS replicas_for_target_source,
    fleet_plan_policy,
    replicas_for_target * gpu_count / coalesce(replicas, 1) * usd_per_gpu_hour AS fleet_usd_per_hour,
    budget_usd_per_request,
    prefix_reuse_share,
    structured_requests,
    constrained_requests,
    valid_answers,
    valid_answers / nullif(structured_requests, 0) AS valid_answer_rate,
    -- Every invalid answer is sent again until it parses: 1 / rate requests per valid answer.
    run_cost_usd / nullif(completed_requests, 0) / nullif(valid_answers / nullif(structured_requests, 0), 0)
        AS usd_per_valid_request,
    structured_requests * (structured_requests / nullif(valid_answers, 0) - 1) AS retries,
    tpot_constrained_ms,
    tpot_unconstrained_ms,
    min_valid_rate,
    role,
    traffic_share,
    price_book,
    capacity_rps_at_slo,
    capacity_source,
    capacity_ramp_gpu_minutes,
    -- The two costs of a request (docs/warehouse.md, "Two costs per request"): the efficiency cost, on this endpoint
    -- loaded to its SLO capacity on this traffic, moves with the runtime, the traffic's shape and the price only; the
    -- realised cost (above) also moves with how much traffic came. Between them, the idle part.
    gpu_count * usd_per_gpu_hour / 3600.0 / capacity_rps_at_slo AS efficiency_cost_per_request_usd,
    completed_requests / nullif(measured_window_s, 0) / capacity_rps_at_slo AS load_share_of_capacity,
    CASE WHEN load_share_of_capacity > 1 THEN 'overloaded'
         WHEN load_share_of_capacity IS NOT NULL THEN 'idle_capacity' END AS load_state,
    -- An overloaded run has no idle part: it served more than the SLO allows, and its realised cost below the
    -- efficiency cost is the SLO's price, not a saving (load_note says so).
    CASE WHEN load_state = 'idle_capacity'
        THEN run_cost_usd / nullif(completed_requests, 0) - gpu_count * usd_per_gpu_hour / 3600.0 / capacity_rps_at_slo
    END AS idle_cost_per_request_usd,
    CASE load_state
        WHEN 'idle_capacity' THEN format(
            'served {:.3g} requests/s, {:.0f}% of the {:.3g} the endpoint holds inside the SLO: {:.0f}% of the GPU time '
            'was idle capacity', completed_requests / measured_window_s, 100 * load_share_of_capacity,
            capacity_rps_at_slo, 100 * (1 - load_share_of_capacity))
        WHEN 'overloaded' THEN format(
            'overloaded: served {:.3g} requests/s, {:.0f}% of the {:.3g} the endpoint holds inside the SLO; the '
            'realised cost is below the efficiency cost because requests ran outside the SLO, not because capacity '
            'was saved', completed_requests / measured_window_s, 100 * load_share_of_capacity, capacity_rps_at_slo)
    END AS load_note,
    gpu_count * usd_per_gpu_hour / 3600.0 / nullif(api_cost_usd / nullif(completed_requests, 0), 0) AS break_even_rps,
    replicas,
    router_policy,
    router_args_json,
    single_replica_hit_rate,
    fleet_model_hit_rate,
    workers_served,
    max_worker_share,
    degraded,
    degraded_reason,
    schedule_lag_p99_ms,
    client_degraded,
    partial,
    shadow_output_tokens_per_s_ratio,
    shadow_p50_ttft_ratio,
    shadow_p50_tpot_ratio
FROM sized
ORDER BY week_start, scenario, run_id
) AS model_rows
