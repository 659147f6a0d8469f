-- The twin's validation error band as of a week (docs/twin.md, "The twin's error as a series"): of the latest week
-- up to ? with figures from the twin_calibration asset, the counted validation figures (predictions, not fits):
-- how many, their median error factor (exp of the median |ln ratio|) and the lowest and highest ratio twin / published,
-- over the points of one kind (the second ?: disaggregated, or single servers; a figure computed before the column
-- existed counts as a single server's).
SELECT
    week_start,
    count(*) AS figures,
    exp(median(abs(ln(ratio)))) AS median_error_factor,  -- as the twin_calibration_target check computes it
    min(ratio) AS min_ratio,
    max(ratio) AS max_ratio
FROM twin_calibration
WHERE calibration_set = 'validation' AND counted AND ratio > 0 AND week_start <= ?
    AND coalesce(disaggregated, false) = ?
GROUP BY week_start
ORDER BY week_start DESC
LIMIT 1;
