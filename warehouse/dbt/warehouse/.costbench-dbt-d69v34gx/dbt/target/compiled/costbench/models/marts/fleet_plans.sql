-- fleet_plans: every shape a run's fleet plan tried (fleet_plan_shapes), priced with each price book of the
-- endpoint's GPU type and with the run's own price (column definitions: schema.sql). The run's price is a
-- book's unless the endpoint set its own figure ('endpoint'); a book the run used is listed once.
SELECT 
    CAST(run_id AS VARCHAR) AS run_id,
    CAST(week_start AS DATE) AS week_start,
    CAST(scenario AS VARCHAR) AS scenario,
    CAST(endpoint AS VARCHAR) AS endpoint,
    CAST(gpu_type AS VARCHAR) AS gpu_type,
    CAST(target_rps AS DOUBLE) AS target_rps,
    CAST(slo_ttft_ms AS DOUBLE) AS slo_ttft_ms,
    CAST(slo_tpot_ms AS DOUBLE) AS slo_tpot_ms,
    CAST(replicas AS INTEGER) AS replicas,
    CAST(prefill_workers AS INTEGER) AS prefill_workers,
    CAST(decode_workers AS INTEGER) AS decode_workers,
    CAST(decode_ep_size AS INTEGER) AS decode_ep_size,
    CAST(router_policy AS VARCHAR) AS router_policy,
    CAST(gpus AS INTEGER) AS gpus,
    CAST(holds_target AS BOOLEAN) AS holds_target,
    CAST(good_share AS DOUBLE) AS good_share,
    CAST(p95_ttft_ms AS DOUBLE) AS p95_ttft_ms,
    CAST(hit_rate AS DOUBLE) AS hit_rate,
    CAST(max_worker_share AS DOUBLE) AS max_worker_share,
    CAST(capacity_rps_at_slo AS DOUBLE) AS capacity_rps_at_slo,
    CAST(chosen AS BOOLEAN) AS chosen,
    CAST(price_book AS VARCHAR) AS price_book,
    CAST(run_price AS BOOLEAN) AS run_price,
    CAST(usd_per_gpu_hour AS DOUBLE) AS usd_per_gpu_hour,
    CAST(fleet_usd_per_hour AS DOUBLE) AS fleet_usd_per_hour,
    CAST(usd_per_request_at_target AS DOUBLE) AS usd_per_request_at_target,
    CAST(usd_per_request_at_slo AS DOUBLE) AS usd_per_request_at_slo,
    CAST(api_cost_per_request_usd AS DOUBLE) AS api_cost_per_request_usd,
    CAST(break_even_rps AS DOUBLE) AS break_even_rps
FROM (
WITH prices AS (
    SELECT r.run_id, r.price_book, true AS run_price, r.usd_per_gpu_hour
    FROM "costbench"."main"."run_summary" AS r
    UNION ALL
    SELECT r.run_id, b.name, false, b.usd_per_gpu_hour
    FROM "costbench"."main"."run_summary" AS r
    JOIN "costbench"."main"."price_books" AS b ON b.gpu_type = r.gpu_type AND b.name IS DISTINCT FROM r.price_book
),
priced AS (
    SELECT
        s.*,
        r.endpoint,
        r.gpu_type,
        r.slo_ttft_ms,
        r.slo_tpot_ms,
        coalesce(p.price_book, 'endpoint') AS price_book,
        p.run_price,
        p.usd_per_gpu_hour,
        s.gpus * p.usd_per_gpu_hour AS fleet_usd_per_hour,
        r.api_cost_per_request_usd
    FROM "costbench"."main"."fleet_plan_shapes" AS s
    JOIN "costbench"."main"."run_summary" AS r USING (week_start, scenario, run_id)
    JOIN prices AS p USING (run_id)
)
SELECT
    run_id,
    week_start,
    scenario,
    endpoint,
    gpu_type,
    target_rps,
    slo_ttft_ms,
    slo_tpot_ms,
    replicas,
    prefill_workers,
    decode_workers,
    decode_ep_size,
    router_policy,
    gpus,
    holds_target,
    good_share,
    p95_ttft_ms,
    hit_rate,
    max_worker_share,
    capacity_rps_at_slo,
    chosen,
    price_book,
    run_price,
    usd_per_gpu_hour,
    fleet_usd_per_hour,
    fleet_usd_per_hour / 3600.0 / target_rps AS usd_per_request_at_target,
    fleet_usd_per_hour / 3600.0 / capacity_rps_at_slo AS usd_per_request_at_slo,
    api_cost_per_request_usd,
    fleet_usd_per_hour / 3600.0 / nullif(api_cost_per_request_usd, 0) AS break_even_rps
FROM priced
ORDER BY week_start, scenario, run_id, NOT run_price, price_book, prefill_workers > 0, router_policy, decode_ep_size,
    replicas, prefill_workers
) AS model_rows