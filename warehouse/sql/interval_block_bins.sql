-- The TTFT bins of every block for warehouse/marts/bootstrap_interval.py, as four integer columns (fetched as arrays:
-- on a big lake these are hundreds of thousands of rows). key_index numbers the weeks' groups and block_index a block
-- within its group, both in sql/interval_block_totals.sql's order; every block has a row in interval_block_rows (an
-- empty one with bin NULL), so the numbering is taken before the empty rows are left out.
SELECT key_index, block_index, bin, requests
FROM (
    SELECT
        dense_rank() OVER (ORDER BY week_start, scenario, endpoint, backend, config_fingerprint) - 1 AS key_index,
        dense_rank() OVER (
            PARTITION BY week_start, scenario, endpoint, backend, config_fingerprint ORDER BY run_id, block
        ) - 1 AS block_index,
        bin,
        requests
    FROM interval_block_rows
)
WHERE bin IS NOT NULL
ORDER BY key_index, block_index, bin;
