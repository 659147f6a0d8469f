-- Self-host against the API: what the same tokens would have cost at the API's list price, and the
-- batch occupancy at which self-hosting breaks even (> 1: not reachable on this configuration).
SELECT s.week_start, s.scenario, s.model, s.gpu_count, s.gpu_type,
       round(s.realised_cost_per_request_usd, 6) AS self_host_usd_per_request,
       round(s.api_cost_per_request_usd, 6) AS api_usd_per_request,
       round(s.self_host_to_api_cost_ratio, 2) AS self_host_to_api,
       round(s.batch_occupancy, 3) AS batch_occupancy,
       round(s.break_even_utilisation, 3) AS break_even_occupancy,
       p.name AS api_price, p.as_of AS api_price_as_of
FROM run_summary AS s
LEFT JOIN api_prices AS p ON p.model = lower(s.model)
ORDER BY s.week_start DESC, s.scenario;
