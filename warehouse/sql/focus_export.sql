-- focus_export: one week's runs as FOCUS 1.2 cost and usage rows (warehouse/report/focus_export.py writes the
-- file; docs/warehouse.md, "The FOCUS export", says what each column holds). One Usage row per run of the week's
-- traffic (x_TrafficWeekStart): the GPU-hours of its measured window at the run's price (ContractedCost =
-- BilledCost = EffectiveCost: costbench applies no discount after the price book), at the GPU type's list price too
-- (ListCost), with the tokens it served as the consumed quantity and by kind in x_ columns. The charge period is
-- when the run used the GPUs, so the billing period is the UTC week (from Monday) holding its start, which for a
-- backfill is not the traffic's week. Parameter 1: the traffic week's Monday (DATE).
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
priced AS (
    SELECT
        s.*,
        make_timestamp(((r.t0_wall_s + r.warmup_s) * 1e6)::BIGINT) AS start_ts,  -- UTC, no time zone
        make_timestamp(((r.t0_wall_s + r.warmup_s + r.window_s) * 1e6)::BIGINT) AS end_ts,
        s.gpu_count * s.window_s / 3600.0 AS gpu_hours,
        s.run_cost_usd AS cost_usd,  -- gpu_hours x usd_per_gpu_hour, as run_summary defines it
        gpu_hours * coalesce(s.list_usd_per_gpu_hour, s.usd_per_gpu_hour) AS list_cost_usd,
        coalesce(t.input_tokens, 0) AS input_tokens,
        coalesce(t.cached_input_tokens, 0) AS cached_input_tokens,
        coalesce(t.output_tokens, 0) AS output_tokens,
        coalesce(t.reasoning_tokens, 0) AS reasoning_tokens,
        split_part(s.model, '/', 1) AS publisher
    FROM run_summary AS s
    JOIN runs AS r USING (week_start, scenario, run_id)
    LEFT JOIN tokens AS t USING (run_id)
    WHERE s.week_start = $1
)
SELECT
    cost_usd AS BilledCost,
    'costbench' AS BillingAccountId,
    'costbench self-hosted SGLang' AS BillingAccountName,
    'Billing Account' AS BillingAccountType,
    'USD' AS BillingCurrency,
    strftime(date_trunc('week', start_ts) + INTERVAL 7 DAY, '%Y-%m-%dT%H:%M:%SZ') AS BillingPeriodEnd,
    strftime(date_trunc('week', start_ts), '%Y-%m-%dT%H:%M:%SZ') AS BillingPeriodStart,
    'Usage' AS ChargeCategory,
    NULL::VARCHAR AS ChargeClass,
    format('{:.4f} GPU-hours of {} x {} ({} replica(s)) for {} at {} USD per GPU-hour ({}){}', gpu_hours,
           gpu_count, gpu_type, coalesce(replicas, 1), scenario, usd_per_gpu_hour, coalesce(price_book, 'endpoint'),
           CASE WHEN backend = 'sim' THEN '; modelled by the SGLang twin, not measured' ELSE '' END) AS ChargeDescription,
    'Usage-Based' AS ChargeFrequency,
    strftime(end_ts, '%Y-%m-%dT%H:%M:%SZ') AS ChargePeriodEnd,
    strftime(start_ts, '%Y-%m-%dT%H:%M:%SZ') AS ChargePeriodStart,
    cost_usd AS ContractedCost,
    usd_per_gpu_hour AS ContractedUnitPrice,
    (input_tokens + output_tokens)::DOUBLE AS ConsumedQuantity,
    'Tokens' AS ConsumedUnit,
    cost_usd AS EffectiveCost,
    'costbench' AS InvoiceIssuerName,
    list_cost_usd AS ListCost,
    coalesce(list_usd_per_gpu_hour, usd_per_gpu_hour) AS ListUnitPrice,
    'Standard' AS PricingCategory,
    gpu_hours AS PricingQuantity,
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
    format('{}:{}', coalesce(price_book, 'endpoint'), gpu_type) AS SkuPriceId,
    'GPU-Hours' AS SkuMeter,
    scenario AS SubAccountId,
    scenario AS SubAccountName,
    input_tokens::BIGINT AS x_InputTokens,
    cached_input_tokens::BIGINT AS x_CachedInputTokens,
    output_tokens::BIGINT AS x_OutputTokens,
    reasoning_tokens::BIGINT AS x_ReasoningTokens,
    completed_requests::BIGINT AS x_CompletedRequests,
    -- The two costs per request (docs/warehouse.md, "Two costs per request"): BilledCost / x_CompletedRequests is the
    -- realised one; the efficiency cost is the request's price at the SLO capacity; x_IdleCost is the BilledCost
    -- the idle capacity took (null when overloaded: x_LoadState says so).
    realised_cost_per_request_usd AS x_RealisedCostPerRequest,
    efficiency_cost_per_request_usd AS x_EfficiencyCostPerRequest,
    idle_cost_per_request_usd * completed_requests AS x_IdleCost,
    load_state AS x_LoadState,
    capacity_source AS x_CapacitySource,
    api_cost_usd AS x_ApiEquivalentCost,
    api_price_name AS x_ApiPriceName,
    strftime(week_start, '%Y-%m-%d') AS x_TrafficWeekStart,
    run_id AS x_RunId,
    backend AS x_Backend,
    config_fingerprint AS x_ConfigFingerprint
FROM priced
ORDER BY scenario, run_id;
