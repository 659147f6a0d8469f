-- Each costed run's blocks for warehouse/marts/bootstrap_interval.py, one row a block (the dbt model
-- interval_block_rows, read under that name while the intervals are built): the block's cost share and what completed
-- in it, ordered as the bootstrap numbers the week's blocks (by run, then block).
SELECT week_start, scenario, endpoint, backend, config_fingerprint, run_id, block, cost_usd, requests, prompt_tokens,
       cached_tokens
FROM interval_block_rows
ORDER BY week_start, scenario, endpoint, backend, config_fingerprint, run_id, block;
