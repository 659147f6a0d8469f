-- The TTFT bins of every block for warehouse/marts/bootstrap_interval.py, as four integer columns (fetched as arrays:
-- on a big lake these are hundreds of thousands of rows). key_index numbers the weeks' groups and block_index a block
-- within its group, both in sql/interval_block_totals.sql's order, taken over every block before the histograms are
-- unnested (an empty block has no bins, and still its number).
WITH numbered AS (
    SELECT
        dense_rank() OVER (ORDER BY week_start, scenario, endpoint, backend, config_fingerprint) - 1 AS key_index,
        dense_rank() OVER (
            PARTITION BY week_start, scenario, endpoint, backend, config_fingerprint ORDER BY run_id, block
        ) - 1 AS block_index,
        ttft_bins,
        ttft_bin_requests
    FROM interval_block_rows
)
SELECT key_index, block_index, unnest(ttft_bins) AS bin, unnest(ttft_bin_requests) AS requests
FROM numbered
ORDER BY key_index, block_index, bin;
