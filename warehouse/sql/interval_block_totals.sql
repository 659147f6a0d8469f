-- Each costed run's blocks for warehouse/marts/bootstrap_interval.py, one row a block, from the rows of
-- the dbt model interval_block_rows (read under that name while the intervals are built): the block's cost share and
-- what completed in it over every TTFT bin, ordered as the bootstrap numbers the week's blocks (by run, then block).
SELECT week_start, scenario, endpoint, backend, config_fingerprint, run_id, block,
       any_value(cost_usd) AS cost_usd,
       sum(requests)::BIGINT AS requests,
       sum(prompt_tokens)::BIGINT AS prompt_tokens,
       sum(cached_tokens)::BIGINT AS cached_tokens
FROM interval_block_rows
GROUP BY ALL
ORDER BY week_start, scenario, endpoint, backend, config_fingerprint, run_id, block;
