-- focus_export: one traffic week's GPU spend as FOCUS 1.2 cost and usage rows (warehouse/report/focus_export.py writes
-- the file; docs/warehouse.md, "The FOCUS export", says what each column holds). One Usage row per endpoint that ran
-- in the week: what its GPUs cost for the whole week, run_summary.week_spend_usd = gpu_count x usd_per_gpu_hour x
-- hours_per_week (ContractedCost = BilledCost = EffectiveCost: costbench applies no discount after the price book),
-- at the GPU type's list price too (ListCost), the week's GPU-hours its quantity, charged over the week itself (Monday
-- 00:00 UTC to the next Monday, the billing period too). The endpoint's runs of a week share its fleet and price;
-- the row takes them from the run with the largest spend, as weekly_trends.week_spend_usd does. What the replays
-- measured, pooled over the endpoint's runs of the week (their GPU-hours and cost, the tokens they served, the costs
-- per request), rides along in x_ columns. Parameter 1: the traffic week's Monday (DATE).
WITH tokens AS (
    SELECT
        run_id,
        sum(coalesce(prompt_tokens, input_tokens)) FILTER (WHERE is_completed) AS input_tokens,
        sum(coalesce(cached_tokens, 0)) FILTER (WHERE is_completed) AS cached_input_tokens,
        sum(coalesce(completion_tokens, output_tokens)) FILTER (WHERE is_completed) AS output_tokens,
        sum(coalesce(reasoning_tokens, 0)) FILTER (WHERE is_completed) AS reasoning_tokens
    FROM requests
    WHERE week_start = $1
    GROUP BY run_id
),
week_runs AS (
    SELECT s.*, t.* EXCLUDE (run_id), s.gpu_count * s.window_s / 3600.0 AS replay_gpu_hours
    FROM run_summary AS s
    LEFT JOIN tokens AS t USING (run_id)
    WHERE s.week_start = $1
),
fleets AS (
    -- The endpoint's fleet and price for the week: its run with the largest week_spend_usd.
    SELECT
        endpoint,
        model,
        gpu_type,
        gpu_count,
        usd_per_gpu_hour,
        coalesce(list_usd_per_gpu_hour, usd_per_gpu_hour) AS list_usd_per_gpu_hour,
        coalesce(price_book, 'endpoint') AS price_book,
        coalesce(replicas, 1) AS replicas,
        hours_per_week,
        week_spend_usd,
        gpu_count * hours_per_week AS week_gpu_hours
    FROM week_runs
    QUALIFY row_number() OVER (PARTITION BY endpoint ORDER BY week_spend_usd DESC, run_id) = 1
),
replays AS (
    -- What the replays measured, pooled as weekly_trends pools them (ratios of sums).
    SELECT
        endpoint,
        sum(replay_gpu_hours) AS replay_gpu_hours,
        sum(run_cost_usd) AS replay_cost_usd,
        coalesce(sum(input_tokens), 0) AS input_tokens,
        coalesce(sum(cached_input_tokens), 0) AS cached_input_tokens,
        coalesce(sum(output_tokens), 0) AS output_tokens,
        coalesce(sum(reasoning_tokens), 0) AS reasoning_tokens,
        sum(completed_requests) AS completed_requests,
        sum(run_cost_usd) / nullif(sum(completed_requests) FILTER (WHERE run_cost_usd IS NOT NULL), 0)
            AS realised_cost_per_request_usd,
        sum(efficiency_cost_per_request_usd * completed_requests)
            / nullif(sum(completed_requests) FILTER (WHERE efficiency_cost_per_request_usd IS NOT NULL), 0)
            AS efficiency_cost_per_request_usd,
        -- Known only when every run's is (an overloaded run has no idle part).
        CASE WHEN count(idle_cost_per_request_usd) = count(*)
            THEN sum(idle_cost_per_request_usd * completed_requests) END AS replay_idle_cost_usd,
        string_agg(DISTINCT load_state, ',' ORDER BY load_state) AS load_states,
        string_agg(DISTINCT capacity_source, ',' ORDER BY capacity_source) AS capacity_sources,
        sum(api_cost_usd) AS api_cost_usd,
        string_agg(DISTINCT api_price_name, ',' ORDER BY api_price_name) AS api_price_names,
        string_agg(DISTINCT scenario, ',' ORDER BY scenario) AS scenarios,
        string_agg(run_id, ',' ORDER BY run_id) AS run_ids,
        string_agg(DISTINCT backend, ',' ORDER BY backend) AS backends,
        string_agg(DISTINCT config_fingerprint, ',' ORDER BY config_fingerprint) AS config_fingerprints
    FROM week_runs
    GROUP BY endpoint
),
billed AS (
    SELECT
        f.*,
        r.* EXCLUDE (endpoint),
        $1::TIMESTAMP AS week_ts,  -- Monday 00:00 UTC (no time zone)
        f.week_gpu_hours * f.list_usd_per_gpu_hour AS list_cost_usd,
        split_part(f.model, '/', 1) AS publisher
    FROM fleets AS f
    JOIN replays AS r USING (endpoint)
)
SELECT
    week_spend_usd AS BilledCost,
    'costbench' AS BillingAccountId,
    'costbench self-hosted SGLang' AS BillingAccountName,
    'Billing Account' AS BillingAccountType,
    'USD' AS BillingCurrency,
    strftime(week_ts + INTERVAL 7 DAY, '%Y-%m-%dT%H:%M:%SZ') AS BillingPeriodEnd,
    strftime(week_ts, '%Y-%m-%dT%H:%M:%SZ') AS BillingPeriodStart,
    'Usage' AS ChargeCategory,
    NULL::VARCHAR AS ChargeClass,
    format('{:.2f} GPU-hours: {} x {} ({} replica(s)) held {:g} h of the week at {} USD per GPU-hour ({}); replayed '
           '{:.4f} GPU-hours of it for {}{}', week_gpu_hours, gpu_count, gpu_type, replicas, hours_per_week,
           usd_per_gpu_hour, price_book, replay_gpu_hours, scenarios,
           CASE WHEN backends = 'sim' THEN '; the replays are modelled by the SGLang twin, not measured' ELSE '' END)
        AS ChargeDescription,
    'Usage-Based' AS ChargeFrequency,
    strftime(week_ts + INTERVAL 7 DAY, '%Y-%m-%dT%H:%M:%SZ') AS ChargePeriodEnd,
    strftime(week_ts, '%Y-%m-%dT%H:%M:%SZ') AS ChargePeriodStart,
    week_spend_usd AS ContractedCost,
    usd_per_gpu_hour AS ContractedUnitPrice,
    week_gpu_hours AS ConsumedQuantity,
    'GPU-Hours' AS ConsumedUnit,
    week_spend_usd AS EffectiveCost,
    NULL::VARCHAR AS InvoiceId,  -- no invoice is issued for self-hosted GPUs
    -- The provider itself: no third party is paid (FOCUS's BilledCost is 0 where the issuer is not the provider).
    'self-hosted' AS InvoiceIssuerName,
    list_cost_usd AS ListCost,
    list_usd_per_gpu_hour AS ListUnitPrice,
    'Standard' AS PricingCategory,
    week_gpu_hours AS PricingQuantity,
    'GPU-Hours' AS PricingUnit,
    'self-hosted' AS ProviderName,
    publisher AS PublisherName,
    endpoint AS ResourceId,
    endpoint AS ResourceName,
    'SGLang endpoint' AS ResourceType,
    'AI and Machine Learning' AS ServiceCategory,
    format('SGLang serving {}', model) AS ServiceName,
    'Generative AI' AS ServiceSubcategory,
    format('{}-gpu-hour', gpu_type) AS SkuId,
    format('{}:{}', price_book, gpu_type) AS SkuPriceId,
    'GPU-Hours' AS SkuMeter,
    hours_per_week AS x_HoursPerWeek,
    replay_gpu_hours AS x_ReplayGpuHours,
    replay_cost_usd AS x_ReplayCost,
    input_tokens::BIGINT AS x_InputTokens,
    cached_input_tokens::BIGINT AS x_CachedInputTokens,
    output_tokens::BIGINT AS x_OutputTokens,
    reasoning_tokens::BIGINT AS x_ReasoningTokens,
    completed_requests::BIGINT AS x_CompletedRequests,
    -- The two costs per request (docs/warehouse.md, "Two costs per request"), of the replays: x_ReplayCost /
    -- x_CompletedRequests is the realised one; the efficiency cost is the request's price at the SLO capacity;
    -- x_ReplayIdleCost is the replay cost the idle capacity took (null when a run was overloaded: x_LoadState).
    realised_cost_per_request_usd AS x_RealisedCostPerRequest,
    efficiency_cost_per_request_usd AS x_EfficiencyCostPerRequest,
    replay_idle_cost_usd AS x_ReplayIdleCost,
    load_states AS x_LoadState,
    capacity_sources AS x_CapacitySource,
    api_cost_usd AS x_ApiEquivalentCost,
    api_price_names AS x_ApiPriceName,
    strftime($1, '%Y-%m-%d') AS x_TrafficWeekStart,
    scenarios AS x_Scenarios,
    run_ids AS x_RunIds,
    backends AS x_Backend,
    config_fingerprints AS x_ConfigFingerprint
FROM billed
ORDER BY endpoint;
