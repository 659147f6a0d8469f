-- Cache hit rate against cost: does a better prefix-cache hit rate buy a cheaper request?
SELECT scenario, endpoint,
       count(*) AS runs,
       round(avg(prefix_cache_hit_rate), 3) AS mean_hit_rate,
       round(avg(server_prefix_cache_hit_rate), 3) AS mean_server_hit_rate,
       round(avg(cost_per_request_usd), 6) AS mean_cost_per_request_usd,
       round(corr(prefix_cache_hit_rate, cost_per_request_usd), 3) AS hit_rate_cost_correlation
FROM run_summary
WHERE completed_requests > 0
GROUP BY scenario, endpoint
ORDER BY mean_hit_rate DESC;
