-- The R1 reasoning tax: how much of the output is reasoning, how long users wait for the first answer
-- token beyond the first token, and the share of the cost the reasoning tokens stand for (cost split
-- in proportion to output tokens, a decode-dominated approximation).
SELECT model, scenario,
       round(avg(reasoning_token_share), 3) AS reasoning_token_share,
       round(avg(p50_ttfa_ms - p50_ttft_ms), 1) AS p50_wait_for_answer_ms,
       round(avg(realised_cost_per_request_usd), 6) AS realised_cost_per_request_usd,
       round(avg(realised_cost_per_request_usd * reasoning_token_share), 6) AS reasoning_cost_per_request_usd
FROM run_summary
WHERE completed_requests > 0
GROUP BY model, scenario
ORDER BY reasoning_token_share DESC NULLS LAST;
