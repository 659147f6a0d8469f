-- Input tokens an infinite prefix cache could reuse (workloads/trace_stats.py).
-- prefixes(row_index, prefix_hash): one row per leading run of blocks of a request, hashed with its whole
-- chain, so equal hashes mean equal leading blocks. rows_with_blocks(row_index, blocks, input_tokens).
-- A request's leading run k was seen before it exactly when some earlier request has the same hash, and
-- if run k was seen so was every shorter one; so a request reuses all of its runs but those it is the
-- first to have, times the block size, capped at its length.
WITH firsts AS (
    SELECT min(row_index) AS row_index FROM prefixes GROUP BY prefix_hash
),
new_per_row AS (
    SELECT row_index, count(*) AS new_prefixes FROM firsts GROUP BY row_index
)
SELECT coalesce(sum(least((r.blocks - coalesce(n.new_prefixes, 0)) * ?, r.input_tokens)), 0)::BIGINT
FROM rows_with_blocks r LEFT JOIN new_per_row n USING (row_index)
