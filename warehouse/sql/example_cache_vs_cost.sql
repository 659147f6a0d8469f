-- Cache hit rate against cost: does a better prefix-cache hit rate buy a cheaper request (at the SLO capacity)?
-- Every figure is over the same runs, those with both a client hit rate and an efficiency cost; the server's own
-- hit rate (its counters) sits beside the client's over the runs whose server reported one (none with its cache off).
SELECT scenario, endpoint,
       count(*) AS runs,
       round(avg(prefix_cache_hit_rate), 3) AS mean_hit_rate,
       round(avg(efficiency_cost_per_request_usd), 6) AS mean_efficiency_cost_per_request_usd,
       -- The efficiency cost: the realised one also moves with each week's volume, which would blur the cache's part.
       round(corr(prefix_cache_hit_rate, efficiency_cost_per_request_usd), 3) AS hit_rate_cost_correlation,
       count(server_prefix_cache_hit_rate) AS server_reported_runs,
       round(avg(prefix_cache_hit_rate) FILTER (WHERE server_prefix_cache_hit_rate IS NOT NULL), 3)
           AS mean_client_hit_rate_where_server_reported,
       round(avg(server_prefix_cache_hit_rate), 3) AS mean_server_hit_rate
FROM run_summary
WHERE completed_requests > 0 AND prefix_cache_hit_rate IS NOT NULL AND efficiency_cost_per_request_usd IS NOT NULL
GROUP BY scenario, endpoint
ORDER BY mean_hit_rate DESC;
