
    
      
    

    create  table
      "costbench"."main"."diagnoses__dbt_tmp"
  
  (
    run_id VARCHAR not null,
    week_start DATE not null,
    scenario VARCHAR not null,
    endpoint VARCHAR not null,
    verdict VARCHAR not null,
    reasons VARCHAR not null,
    prefix_cache_hit_rate DOUBLE,
    prefix_reuse_share DOUBLE,
    batch_occupancy DOUBLE,
    p95_queue_share DOUBLE,
    gpu_utilisation_pct DOUBLE,
    eager_decode_share DOUBLE,
    realised_cost_per_request_usd DOUBLE,
    efficiency_cost_per_request_usd DOUBLE,
    budget_usd_per_request DOUBLE,
    levers VARCHAR not null,
    replicas INTEGER,
    router_policy VARCHAR,
    single_replica_hit_rate DOUBLE,
    fleet_model_hit_rate DOUBLE
    
    )
 ;
    
    
    insert into "costbench"."main"."diagnoses__dbt_tmp" 
  (
    
      
      
      run_id ,
    
      
      
      week_start ,
    
      
      
      scenario ,
    
      
      
      endpoint ,
    
      
      
      verdict ,
    
      
      
      reasons ,
    
      
      
      prefix_cache_hit_rate ,
    
      
      
      prefix_reuse_share ,
    
      
      
      batch_occupancy ,
    
      
      
      p95_queue_share ,
    
      
      
      gpu_utilisation_pct ,
    
      
      
      eager_decode_share ,
    
      
      
      realised_cost_per_request_usd ,
    
      
      
      efficiency_cost_per_request_usd ,
    
      
      
      budget_usd_per_request ,
    
      
      
      levers ,
    
      
      
      replicas ,
    
      
      
      router_policy ,
    
      
      
      single_replica_hit_rate ,
    
      
      
      fleet_model_hit_rate 
    
  )
 (
      
    select run_id, week_start, scenario, endpoint, verdict, reasons, prefix_cache_hit_rate, prefix_reuse_share, batch_occupancy, p95_queue_share, gpu_utilisation_pct, eager_decode_share, realised_cost_per_request_usd, efficiency_cost_per_request_usd, budget_usd_per_request, levers, replicas, router_policy, single_replica_hit_rate, fleet_model_hit_rate
    from (
        -- diagnoses: the four numbers of docs/warehouse.md as a verdict per run (column definitions: schema.sql).
-- Read together: prefix-cache hit rate (against what the traffic could reuse), batch occupancy, the
-- queueing share of p95 latency, and GPU utilisation.
--   runtime_lever   any lever applies: on one server, the hit rate trails the reusable share by >= 20 points
--                   (prefix_cache); on a fleet, what one replica realises trails by >= 20 points what the
--                   fleet realises on the same requests (routing); queueing >= 50% of the p95 tail's latency;
--                   >= 10% of the decode steps run without a CUDA graph (cuda_graphs: a batch per rank past
--                   --cuda-graph-max-bs; a twin counts those steps but prices them as graph replays, and says so).
-- Routing compares two figures of the twin on the same requests (run_summary.single_replica_hit_rate and
-- fleet_model_hit_rate, endpoints/capacity/routing_reference.py), not the fleet with the reusable share: a
-- cache that evicts misses reuse whatever the router does. On a fleet the prefix_cache lever takes what is left of
-- the gap to the reusable share once routing's part is taken out, so each point is counted once; a fleet without
-- the reference (a real endpoint, a run recorded before them) is not judged on routing, and its whole gap is named
-- prefix_cache, saying routing was not told apart.
--   oversized       no lever, and the batch ran below half of what the endpoint runs inside its SLO
--                   (run_summary.batch_occupancy < 0.5): the fleet is larger than its traffic needs.
--   model_candidate no lever, occupancy and queueing measured, GPU utilisation >= 50% (or unmeasured),
--                   and the cost per request still above budget (the scenario's, else the API's): the efficiency
--                   cost where a capacity is known (what a request costs with this runtime loaded to its SLO
--                   capacity, so the idle part is the `oversized` verdict's, not the model's), else the realised one.
-- A twin's GPU utilisation is modelled from its own steps (run_summary.gpu_metrics_source 'twin'); its reasons say so.
--   healthy         no lever and the cost per request within budget.
--   inconclusive    no lever, but the budget or a number the verdict needs is unknown.
SELECT 
    CAST(run_id AS VARCHAR) AS run_id,
    CAST(week_start AS DATE) AS week_start,
    CAST(scenario AS VARCHAR) AS scenario,
    CAST(endpoint AS VARCHAR) AS endpoint,
    CAST(verdict AS VARCHAR) AS verdict,
    CAST(reasons AS VARCHAR) AS reasons,
    CAST(prefix_cache_hit_rate AS DOUBLE) AS prefix_cache_hit_rate,
    CAST(prefix_reuse_share AS DOUBLE) AS prefix_reuse_share,
    CAST(batch_occupancy AS DOUBLE) AS batch_occupancy,
    CAST(p95_queue_share AS DOUBLE) AS p95_queue_share,
    CAST(gpu_utilisation_pct AS DOUBLE) AS gpu_utilisation_pct,
    CAST(eager_decode_share AS DOUBLE) AS eager_decode_share,
    CAST(realised_cost_per_request_usd AS DOUBLE) AS realised_cost_per_request_usd,
    CAST(efficiency_cost_per_request_usd AS DOUBLE) AS efficiency_cost_per_request_usd,
    CAST(budget_usd_per_request AS DOUBLE) AS budget_usd_per_request,
    CAST(levers AS VARCHAR) AS levers,
    CAST(replicas AS INTEGER) AS replicas,
    CAST(router_policy AS VARCHAR) AS router_policy,
    CAST(single_replica_hit_rate AS DOUBLE) AS single_replica_hit_rate,
    CAST(fleet_model_hit_rate AS DOUBLE) AS fleet_model_hit_rate
FROM (
WITH limits AS (
    SELECT
        0.20 AS max_cache_gap,            -- reusable share minus hit rate
        0.20 AS max_routing_gap,          -- a fleet: one replica's modelled hit rate minus the fleet's, same requests
        0.50 AS min_batch_occupancy,
        0.50 AS max_p95_queue_share,
        50.0 AS min_gpu_utilisation_pct,
        0.10 AS max_eager_decode_share    -- decode steps run without a CUDA graph
),
numbers AS (
    SELECT
        s.run_id,
        s.week_start,
        s.scenario,
        s.endpoint,
        coalesce(s.prefix_cache_hit_rate, s.server_prefix_cache_hit_rate) AS prefix_cache_hit_rate,
        s.prefix_reuse_share,
        s.batch_occupancy,
        s.batch_occupancy_basis,
        s.p95_queue_share,
        s.queue_share_source,
        s.gpu_utilisation_pct,
        CASE WHEN s.gpu_metrics_source = 'twin' THEN ' (modelled)' ELSE '' END AS gpu_modelled,
        s.eager_decode_share,
        s.backend = 'sim' AS on_twin,
        s.realised_cost_per_request_usd,
        s.efficiency_cost_per_request_usd,
        coalesce(s.efficiency_cost_per_request_usd, s.realised_cost_per_request_usd) AS judged_cost_usd,
        CASE WHEN s.efficiency_cost_per_request_usd IS NOT NULL THEN 'efficiency cost per request (at the SLO capacity)'
             ELSE 'realised cost per request (no capacity known)' END AS judged_cost_kind,
        s.replicas,
        s.router_policy,
        s.single_replica_hit_rate,
        s.fleet_model_hit_rate,
        coalesce(s.replicas, 1) > 1 AS is_fleet,
        coalesce(s.budget_usd_per_request, s.api_cost_per_request_usd) AS budget_usd_per_request,
        CASE WHEN s.budget_usd_per_request IS NOT NULL THEN 'the scenario budget' ELSE 'the API-equivalent cost' END AS budget_kind,
        l.*
    FROM "costbench"."main"."run_summary" AS s, limits AS l
),
gaps AS (
    SELECT
        *,
        -- What routing loses on the twin's reference (a fleet with one; negative: the fleet's pools do better).
        CASE WHEN is_fleet THEN single_replica_hit_rate - fleet_model_hit_rate END AS routing_gap,
        -- The reuse the run missed, less the part routing explains: the cache's own (disabled, too small, evicting).
        prefix_reuse_share - prefix_cache_hit_rate - greatest(coalesce(routing_gap, 0), 0) AS cache_gap
    FROM numbers
),
found AS (
    SELECT
        *,
        list_filter(
            [
                {'name': 'prefix_cache', 'reason': CASE WHEN cache_gap >= max_cache_gap THEN format(
                    'prefix-cache hit rate {:.3f} trails the {:.3f} the traffic could reuse by {:.1f} points (lever at {:g}){}',
                    prefix_cache_hit_rate, prefix_reuse_share, 100 * (prefix_reuse_share - prefix_cache_hit_rate),
                    100 * max_cache_gap,
                    CASE WHEN NOT is_fleet THEN ''
                        WHEN routing_gap IS NULL THEN '; a fleet: routing not told apart (no twin reference)'
                        ELSE format('; routing accounts for {:.1f} of them (the twin''s one-replica reference)',
                                    100 * greatest(routing_gap, 0)) END) END},
                {'name': 'routing', 'reason': CASE WHEN routing_gap >= max_routing_gap THEN format(
                    'routing: on the twin the fleet''s hit rate {:.3f} ({} replicas, router policy {}) trails the {:.3f} '
                    'one replica realises on the same requests by {:.1f} points (lever at {:g}); this run realised {}',
                    fleet_model_hit_rate, replicas, coalesce(router_policy, 'not recorded'), single_replica_hit_rate,
                    100 * (single_replica_hit_rate - fleet_model_hit_rate), 100 * max_routing_gap,
                    coalesce(format('{:.3f}', prefix_cache_hit_rate), 'no hit rate')) END},
                {'name': 'queueing', 'reason': CASE WHEN p95_queue_share >= max_p95_queue_share THEN format(
                    'queueing is {:.1f}% of the p95 tail''s latency (lever at {:g}%){}',
                    100 * p95_queue_share, 100 * max_p95_queue_share,
                    CASE WHEN queue_share_source = 'modelled'
                        THEN '; a modelled estimate: the server reported no queue_time' ELSE '' END) END},
                {'name': 'cuda_graphs', 'reason': CASE WHEN eager_decode_share >= max_eager_decode_share THEN format(
                    '{:.1f}% of the decode steps ran without a CUDA graph (lever at {:g}%): their batch per rank was '
                    'past --cuda-graph-max-bs; a cap at the largest batch a rank runs keeps them on graphs{}',
                    100 * eager_decode_share, 100 * max_eager_decode_share,
                    CASE WHEN on_twin THEN '; the twin counts these steps but prices them as graph replays'
                        ELSE '' END) END}
            ],
            lambda lever: lever.reason IS NOT NULL
        ) AS found_levers
    FROM gaps
),
levers AS (
    SELECT
        *,
        list_transform(found_levers, lambda lever: lever.reason) AS lever_reasons,
        list_transform(found_levers, lambda lever: lever.name) AS lever_names
    FROM found
),
judged AS (
    SELECT
        *,
        CASE
            WHEN len(lever_reasons) > 0 THEN 'runtime_lever'
            WHEN batch_occupancy < min_batch_occupancy THEN 'oversized'
            WHEN budget_usd_per_request IS NULL OR judged_cost_usd IS NULL THEN 'inconclusive'
            WHEN judged_cost_usd <= budget_usd_per_request THEN 'healthy'
            WHEN batch_occupancy IS NULL OR p95_queue_share IS NULL THEN 'inconclusive'
            WHEN gpu_utilisation_pct < min_gpu_utilisation_pct THEN 'inconclusive'
            ELSE 'model_candidate'
        END AS verdict
    FROM levers
)
SELECT
    run_id,
    week_start,
    scenario,
    endpoint,
    verdict,
    to_json(CASE verdict
        WHEN 'runtime_lever' THEN lever_reasons
        WHEN 'oversized' THEN [format(
            'batch occupancy {:.3f} is below {:g}: the batch ran at {:.0f}% of {}; fewer GPUs would carry this traffic',
            batch_occupancy, min_batch_occupancy, 100 * batch_occupancy,
            CASE batch_occupancy_basis WHEN 'slo_batch' THEN 'the batch the endpoint runs at its SLO capacity'
                ELSE 'the KV pool (no capacity sweep)' END)]
        WHEN 'healthy' THEN [format('{} {:.6g} USD is within {} of {:.6g} USD',
                                    judged_cost_kind, judged_cost_usd, budget_kind, budget_usd_per_request)]
        WHEN 'model_candidate' THEN [
            format('{} {:.6g} USD is above {} of {:.6g} USD', judged_cost_kind, judged_cost_usd, budget_kind,
                   budget_usd_per_request),
            format('no runtime lever left: occupancy {:.3f}, queueing {:.1f}% of the p95 tail, hit rate {}',
                   batch_occupancy, 100 * p95_queue_share, coalesce(format('{:.3f}', prefix_cache_hit_rate), 'not reported')),
            coalesce(format('GPU utilisation {:.1f}%{}', gpu_utilisation_pct, gpu_modelled), 'GPU utilisation unmeasured')]
        ELSE list_filter([
            CASE WHEN judged_cost_usd IS NULL THEN 'no completed request: no cost per request' END,
            CASE WHEN budget_usd_per_request IS NULL THEN 'no scenario budget and no API price for this model' END,
            CASE WHEN judged_cost_usd > budget_usd_per_request THEN format(
                '{} {:.6g} USD is above {} of {:.6g} USD', judged_cost_kind, judged_cost_usd, budget_kind,
                budget_usd_per_request) END,
            CASE WHEN batch_occupancy IS NULL THEN 'batch occupancy unknown (no server samples)' END,
            CASE WHEN p95_queue_share IS NULL THEN 'queueing share unknown' END,
            CASE WHEN gpu_utilisation_pct < min_gpu_utilisation_pct THEN format(
                'GPU utilisation {:.1f}%{} is below {:g}% with no runtime lever showing', gpu_utilisation_pct, gpu_modelled,
                min_gpu_utilisation_pct) END
        ], lambda reason: reason IS NOT NULL)
    END)::VARCHAR AS reasons,
    prefix_cache_hit_rate,
    prefix_reuse_share,
    batch_occupancy,
    p95_queue_share,
    gpu_utilisation_pct,
    eager_decode_share,
    realised_cost_per_request_usd,
    efficiency_cost_per_request_usd,
    budget_usd_per_request,
    to_json(lever_names)::VARCHAR AS levers,
    replicas,
    router_policy,
    single_replica_hit_rate,
    fleet_model_hit_rate
FROM judged
ORDER BY week_start, scenario, run_id
) AS model_rows
    ) as model_subq
    );
  