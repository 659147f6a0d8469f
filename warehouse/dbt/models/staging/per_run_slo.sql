{{ config(materialized="week_table") }}
-- A stage of run_summary (models/marts/run_summary.sql): its own table, so each pass over requests
-- streams on its own and frees its memory before the next.
WITH request_run AS (
    SELECT
        q.week_start, q.scenario, q.run_id, q.prompt_tokens, q.input_tokens, q.cached_tokens, q.ttft_from_schedule_ms,
        q.tpot_ms, q.e2e_from_schedule_ms, w.slo_ttft_ms, w.slo_tpot_ms, p.p95_e2e_from_schedule_ms, p.peak_prefill_tokens_per_ms,
        q.server_queue_time_s,
        (q.sent_mono_s - q.scheduled_mono_s) * 1000 AS schedule_wait_ms,  -- holds and lag: the client's queue
        q.e2e_from_schedule_ms >= p.p95_e2e_from_schedule_ms AS in_tail
    FROM {{ source('warehouse', 'requests') }} AS q
    JOIN {{ ref('run_windows') }} AS w USING (week_start, scenario, run_id)
    JOIN {{ ref('per_run') }} AS p USING (week_start, scenario, run_id)
    WHERE q.is_completed
)
SELECT
        week_start,
        scenario,
        run_id,
        count(*) FILTER (
            WHERE (slo_ttft_ms IS NULL OR ttft_from_schedule_ms <= slo_ttft_ms)
            AND (slo_tpot_ms IS NULL OR tpot_ms IS NULL OR tpot_ms <= slo_tpot_ms)
        ) AS good_requests,
        -- Queueing in the p95 tail, modelled: time to first token from the schedule, less the prefill
        -- the uncached prompt would take at the run's fastest observed rate. The fallback only.
        sum(greatest(
                ttft_from_schedule_ms
                - coalesce((coalesce(prompt_tokens, input_tokens) - coalesce(cached_tokens, 0))
                           / nullif(peak_prefill_tokens_per_ms, 0), 0),
                0))
            FILTER (WHERE in_tail) AS tail_modelled_queue_ms,
        -- Measured: the client's wait from the schedule to the send, plus the server's own queue_time.
        sum(schedule_wait_ms + greatest(server_queue_time_s, 0.0) * 1000) FILTER (WHERE in_tail) AS tail_server_queue_ms,
        count(*) FILTER (WHERE in_tail) = count(server_queue_time_s) FILTER (WHERE in_tail) AS tail_reports_queue_time,
    sum(e2e_from_schedule_ms) FILTER (WHERE in_tail) AS tail_e2e_ms
FROM request_run
GROUP BY week_start, scenario, run_id
