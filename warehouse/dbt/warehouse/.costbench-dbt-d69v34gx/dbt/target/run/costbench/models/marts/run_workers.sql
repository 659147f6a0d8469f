
    
      
    

    create  table
      "costbench"."main"."run_workers__dbt_tmp"
  
  (
    run_id VARCHAR not null,
    week_start DATE not null,
    scenario VARCHAR not null,
    worker VARCHAR,
    completed_requests BIGINT not null,
    request_share DOUBLE not null,
    hit_rate_prompt_tokens BIGINT,
    hit_rate_cached_tokens BIGINT,
    prefix_cache_hit_rate DOUBLE,
    p95_ttft_ms DOUBLE
    
    )
 ;
    
    
    insert into "costbench"."main"."run_workers__dbt_tmp" 
  (
    
      
      
      run_id ,
    
      
      
      week_start ,
    
      
      
      scenario ,
    
      
      
      worker ,
    
      
      
      completed_requests ,
    
      
      
      request_share ,
    
      
      
      hit_rate_prompt_tokens ,
    
      
      
      hit_rate_cached_tokens ,
    
      
      
      prefix_cache_hit_rate ,
    
      
      
      p95_ttft_ms 
    
  )
 (
      
    select run_id, week_start, scenario, worker, completed_requests, request_share, hit_rate_prompt_tokens, hit_rate_cached_tokens, prefix_cache_hit_rate, p95_ttft_ms
    from (
        -- run_workers: how a fleet's router spread each run's completed requests over its workers, and the hit rate
-- each worker's cache realised (column definitions: schema.sql). The worker is the one smg names in its
-- x-smg-routed-worker-id response header (requests.worker); a single server's requests name none.
SELECT 
    CAST(run_id AS VARCHAR) AS run_id,
    CAST(week_start AS DATE) AS week_start,
    CAST(scenario AS VARCHAR) AS scenario,
    CAST(worker AS VARCHAR) AS worker,
    CAST(completed_requests AS BIGINT) AS completed_requests,
    CAST(request_share AS DOUBLE) AS request_share,
    CAST(hit_rate_prompt_tokens AS BIGINT) AS hit_rate_prompt_tokens,
    CAST(hit_rate_cached_tokens AS BIGINT) AS hit_rate_cached_tokens,
    CAST(prefix_cache_hit_rate AS DOUBLE) AS prefix_cache_hit_rate,
    CAST(p95_ttft_ms AS DOUBLE) AS p95_ttft_ms
FROM (
SELECT
    run_id,
    week_start,
    scenario,
    worker,
    completed_requests,
    completed_requests / sum(completed_requests) OVER (PARTITION BY week_start, scenario, run_id) AS request_share,
    hit_rate_prompt_tokens,
    hit_rate_cached_tokens,
    hit_rate_cached_tokens / nullif(hit_rate_prompt_tokens, 0) AS prefix_cache_hit_rate,
    p95_ttft_ms
FROM (
    SELECT
        week_start,
        scenario,
        run_id,
        worker,
        count(*) AS completed_requests,
        -- Only requests reporting both counts, as run_summary's hit rate.
        sum(prompt_tokens) FILTER (WHERE cached_tokens IS NOT NULL) AS hit_rate_prompt_tokens,
        sum(cached_tokens) FILTER (WHERE prompt_tokens IS NOT NULL) AS hit_rate_cached_tokens,
        quantile_cont(ttft_ms, 0.95) AS p95_ttft_ms
    FROM "costbench"."main"."requests"
    WHERE is_completed
    GROUP BY week_start, scenario, run_id, worker
)
ORDER BY week_start, scenario, run_id, worker NULLS FIRST
) AS model_rows
    ) as model_subq
    );
  