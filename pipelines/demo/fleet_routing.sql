-- fleet_routing: how each fleet's router spread one week's completed requests over its workers, and what each
-- worker's cache and the fleet as a whole realised. Read by the demo (pipelines/demo/fleet_routing.py).
-- requests.worker is the worker the router named in x-smg-routed-worker-id; router_requests is the router's own
-- per-worker count (smg_worker_requests_total, role router in server_samples), warm-up requests included.
-- A week's runs each start their fleet afresh, on new ports: a worker is its place in its run's fleet (worker 0,
-- worker 1, ... in the order of the URLs), summed over the week's runs, so a 2-replica fleet reads as 2 workers
-- however many times it ran. Parameter: $week (DATE). A scenario whose requests name no worker (a single server)
-- has no rows.
WITH served AS (
    SELECT
        scenario,
        run_id,
        worker,
        count(*) AS requests,
        sum(cached_tokens) AS cached_tokens,
        sum(prompt_tokens) AS prompt_tokens
    FROM requests
    WHERE week_start = $week AND is_completed AND worker IS NOT NULL
    GROUP BY scenario, run_id, worker
),
routed AS (
    SELECT scenario, run_id, worker, max(value) AS router_requests
    FROM server_samples
    WHERE week_start = $week AND role = 'router' AND metric = 'smg_worker_requests_total' AND worker IS NOT NULL
    GROUP BY scenario, run_id, worker
),
placed AS (
    SELECT
        s.*,
        r.router_requests,
        dense_rank() OVER (PARTITION BY s.scenario, s.run_id ORDER BY s.worker) - 1 AS place
    FROM served AS s
    LEFT JOIN routed AS r USING (scenario, run_id, worker)
),
workers AS (
    SELECT
        scenario,
        place,
        sum(requests) AS requests,
        sum(cached_tokens) AS cached_tokens,
        sum(prompt_tokens) AS prompt_tokens,
        sum(router_requests) AS router_requests
    FROM placed
    GROUP BY scenario, place
)
SELECT
    scenario,
    'worker ' || place AS worker,
    requests,
    requests / sum(requests) OVER fleet AS request_share,
    cached_tokens / nullif(prompt_tokens, 0) AS prefix_cache_hit_rate,
    sum(cached_tokens) OVER fleet / nullif(sum(prompt_tokens) OVER fleet, 0) AS fleet_hit_rate,
    router_requests
FROM workers
WINDOW fleet AS (PARTITION BY scenario)
ORDER BY scenario, place
