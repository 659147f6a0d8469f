-- fleet_routing: how each fleet's router spread one week's completed requests over its workers, and what each
-- worker's cache and the fleet as a whole realised. Read by the demo (pipelines/demo/fleet_routing.py).
-- requests.worker is the worker the router named in x-smg-routed-worker-id; router_requests is the router's own
-- per-worker count (smg_worker_requests_total, role router in server_samples), warm-up requests included.
-- Parameter: $week (DATE). A scenario whose requests name no worker (a single server) has no rows.
WITH served AS (
    SELECT
        scenario,
        worker,
        count(*) AS requests,
        sum(cached_tokens) AS cached_tokens,
        sum(prompt_tokens) AS prompt_tokens
    FROM requests
    WHERE week_start = $week AND is_completed AND worker IS NOT NULL
    GROUP BY scenario, worker
),
routed AS (
    SELECT scenario, worker, max(value) AS router_requests
    FROM server_samples
    WHERE week_start = $week AND role = 'router' AND metric = 'smg_worker_requests_total' AND worker IS NOT NULL
    GROUP BY scenario, worker
)
SELECT
    s.scenario,
    s.worker,
    s.requests,
    s.requests / sum(s.requests) OVER fleet AS request_share,
    s.cached_tokens / nullif(s.prompt_tokens, 0) AS prefix_cache_hit_rate,
    sum(s.cached_tokens) OVER fleet / nullif(sum(s.prompt_tokens) OVER fleet, 0) AS fleet_hit_rate,
    r.router_requests
FROM served AS s
LEFT JOIN routed AS r USING (scenario, worker)
WINDOW fleet AS (PARTITION BY s.scenario)
ORDER BY s.scenario, s.worker
