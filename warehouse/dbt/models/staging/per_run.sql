{{ config(materialized="week_table") }}
-- A stage of run_summary (models/marts/run_summary.sql): its own table, so each pass over requests
-- streams on its own and frees its memory before the next.
SELECT
        week_start,
        scenario,
        run_id,
        count(*) FILTER (WHERE is_completed) AS completed_requests,
        count(*) FILTER (WHERE is_failed) AS failed_requests,
        count(*) FILTER (WHERE status = 'cancelled' AND NOT is_warmup) AS cancelled_requests,
        sum(completion_tokens) FILTER (WHERE is_completed) AS output_tokens,
        -- Only requests reporting both counts: a server that does not report cached_tokens must
        -- give a null hit rate, not a made-up 0.
        sum(prompt_tokens) FILTER (WHERE is_completed AND cached_tokens IS NOT NULL) AS hit_rate_prompt_tokens,
        sum(cached_tokens) FILTER (WHERE is_completed AND prompt_tokens IS NOT NULL) AS hit_rate_cached_tokens,
        sum(reasoning_tokens) FILTER (WHERE is_completed AND completion_tokens IS NOT NULL) AS share_reasoning_tokens,
        sum(completion_tokens) FILTER (WHERE is_completed AND reasoning_tokens IS NOT NULL) AS share_completion_tokens,
        -- Token counts for the API-equivalent cost (what the API would bill for the same requests).
        sum(coalesce(prompt_tokens, input_tokens)) FILTER (WHERE is_completed) AS api_prompt_tokens,
        sum(coalesce(cached_tokens, 0)) FILTER (WHERE is_completed) AS own_cached_tokens,
        sum(coalesce(completion_tokens, output_tokens)) FILTER (WHERE is_completed) AS api_output_tokens,
        -- For cost_attribution's token factors: every completed request's counts, and how many left cached unreported.
        sum(reasoning_tokens) FILTER (WHERE is_completed) AS reasoning_tokens,
        sum(cached_tokens) FILTER (WHERE is_completed) AS reported_cached_tokens,
        count(*) FILTER (WHERE is_completed AND cached_tokens IS NULL) AS cached_unreported_requests,
        quantile_cont(ttft_ms, [0.50, 0.90, 0.95, 0.99]) FILTER (WHERE is_completed) AS ttft_q,
        quantile_cont(ttfa_ms, [0.50, 0.90, 0.95, 0.99]) FILTER (WHERE is_completed) AS ttfa_q,
        quantile_cont(tpot_ms, [0.50, 0.90, 0.95, 0.99]) FILTER (WHERE is_completed) AS tpot_q,
        quantile_cont(e2e_ms, [0.50, 0.90, 0.95, 0.99]) FILTER (WHERE is_completed) AS e2e_q,
        quantile_cont(e2e_from_schedule_ms, 0.95) FILTER (WHERE is_completed) AS p95_e2e_from_schedule_ms,
        -- Fastest observed prefill (uncached prompt tokens per ms of TTFT): the run's own ceiling,
        -- used to model how much of a TTFT was prefill and how much was waiting.
        max((coalesce(prompt_tokens, input_tokens) - coalesce(cached_tokens, 0)) / ttft_ms)
            FILTER (WHERE is_completed AND ttft_ms > 0) AS peak_prefill_tokens_per_ms,
        -- Structured output: answer_valid is null for a request without a response format.
        count(*) FILTER (WHERE is_completed AND answer_valid IS NOT NULL) AS structured_requests,
        count(*) FILTER (WHERE is_completed AND answer_valid IS NOT NULL AND constrained) AS constrained_requests,
        count(*) FILTER (WHERE is_completed AND answer_valid) AS valid_answers,
        quantile_cont(tpot_ms, 0.5) FILTER (WHERE is_completed AND constrained) AS tpot_constrained_ms,
        quantile_cont(tpot_ms, 0.5) FILTER (WHERE is_completed AND constrained IS NOT TRUE) AS tpot_unconstrained_ms
    FROM {{ source('warehouse', 'requests') }}
    GROUP BY week_start, scenario, run_id
