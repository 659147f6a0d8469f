-- weekly_trends: one row per week x scenario x endpoint x backend x configuration fingerprint
-- (column definitions: _marts.yml). Costs and the hit rate pool the runs' sums (a ratio of sums, not a
-- mean of ratios); percentiles pool the completed requests themselves. The baseline is the median of
-- up to the 4 most recent earlier weeks with the same scenario, endpoint, backend and fingerprint. A week
-- whose configuration changed has no such weeks yet: it is judged against the previous configuration's
-- baseline instead (baseline_source = 'previous_config'), so a change that made things worse is caught
-- the week it happens, not a month later. A fingerprint that was not recorded (null: runs written before
-- schema version 2) is not a change: such a week and its neighbour are compared like a changed
-- configuration, against the earlier weeks whatever they ran (baseline_source = 'unrecorded_config'),
-- without claiming config_changed. Week over week (the *_wow_* columns) compares with the most recent earlier week
-- whatever configuration it ran, config_changed saying whether it ran another: the baseline follows a configuration,
-- the week-over-week change says what changed since last week, a change of configuration included.
-- Two costs per request (docs/warehouse.md, "Two costs per request"): the efficiency cost (the price over the SLO
-- capacity, pooled over the runs weighted by their requests) leads; the realised cost (GPU cost of the windows /
-- their requests) moves with the traffic's volume too, and is not judged. The idle part lies between them.
-- Regression rule (docs/warehouse.md, "Metric definitions"): a metric past its threshold AND outside this week's
-- 95% interval (cost_intervals, computed by warehouse/marts/bootstrap_interval.py). It judges the
-- canary rows only (role 'canary', or null for runs that did not record a role): a canary replays the same
-- window every week, so only the runtime moved it. Live rows replay the week's traffic: their changes are
-- the cost trend, and their verdict is 'not_judged'. The metrics it judges, with the columns each is read
-- from, are declared in warehouse/marts/judged_metrics.py, held to this file by a test.
-- A week whose lake is incomplete (a partition the manifest says was written and is gone: lake_missing; a file
-- quarantined and not written again: lake_quarantine) is not judged, whatever its figures say (they are not the whole
-- week's), and is no baseline for later weeks; caveats names what it lacks, and each run whose fleet lost a worker or
-- its router mid-run (run_summary.degraded).
-- replay_cost_usd is the replay windows' GPU cost (what the costs per request divide); week_spend_usd is the
-- endpoint's GPUs for the whole week (run_summary.week_spend_usd), whatever was replayed. A week whose configuration
-- changed names, in its reasons, each server fact that changed (macros/config_changes.sql) and the revision's note.
SELECT {{ contract_columns(of='weekly_trends') }}
FROM (
WITH thresholds AS (
    SELECT
        10.0 AS max_cost_change_pct,       -- efficiency cost per request +10%
        20.0 AS max_p95_ttft_change_pct,   -- p95 TTFT +20%
        -10.0 AS min_hit_rate_change_pts   -- prefix-cache hit rate -10 points
),
grained_runs AS (
    -- The keys every join, window and group below uses. grain: a row pools the runs of one week x scenario x
    -- endpoint x backend x fingerprint. series: the scenario, endpoint and backend, whatever configuration they
    -- ran, which a baseline follows to earlier weeks. Struct keys compare field by field, a null equal to a
    -- null: an unrecorded fingerprint matches itself (tests/warehouse/test_warehouse_mart_drift.py keeps every
    -- spelling of them alike).
    SELECT
        *,
        struct_pack(week_start, scenario, endpoint, backend, config_fingerprint) AS grain,
        struct_pack(scenario, endpoint, backend) AS series
    FROM {{ ref('run_summary') }}
),
intervals AS (
    -- cost_intervals, one row per grain (warehouse/marts/bootstrap_interval.py), keyed the same way.
    SELECT *, struct_pack(week_start, scenario, endpoint, backend, config_fingerprint) AS grain
    FROM {{ ref('cost_intervals') }}
),
lake_gaps AS (
    -- What the views lack of each week and scenario: partitions written and gone, files quarantined and not replaced.
    SELECT week_start, scenario, list(gap ORDER BY gap) AS lake_gaps
    FROM (
        SELECT week_start, scenario, format('lake: {} partition missing: {}', table_name, reason) AS gap
        FROM {{ source('warehouse', 'lake_missing') }}
        UNION ALL
        SELECT week_start, scenario, format('lake: {} file quarantined: {}', table_name, reason)
        FROM {{ source('warehouse', 'lake_quarantine') }}
        WHERE NOT replaced AND week_start IS NOT NULL
    )
    GROUP BY week_start, scenario
),
run_groups AS (
    SELECT
        grain,
        series,
        week_start,
        scenario,
        endpoint,
        backend,
        config_fingerprint,
        count(*) AS runs,
        any_value(role) AS role,  -- the scenario's: one per scenario
        sum(completed_requests) AS completed_requests,
        sum(failed_requests) AS failed_requests,
        -- A run with an unknown window has an unknown cost: leave it out rather than count it free.
        sum(run_cost_usd) AS replay_cost_usd,
        -- The week's spend is the endpoint's, whatever was replayed: its runs of the week share the fleet and price.
        max(week_spend_usd) AS week_spend_usd,
        string_agg(DISTINCT revision_note, '; ' ORDER BY revision_note) AS revision_note,
        sum(completed_requests) FILTER (WHERE run_cost_usd IS NOT NULL) AS costed_requests,
        sum(output_tokens) FILTER (WHERE run_cost_usd IS NOT NULL) AS costed_output_tokens,
        -- The efficiency cost pools like the realised one, over the runs with a capacity: what their requests cost at
        -- their runs' capacities (capacity GPU-hours x price) / those requests.
        sum(efficiency_cost_per_request_usd * completed_requests) AS efficiency_cost_usd,
        sum(completed_requests) FILTER (WHERE efficiency_cost_per_request_usd IS NOT NULL) AS efficiency_requests,
        sum(completed_requests / capacity_rps_at_slo) FILTER (WHERE efficiency_cost_per_request_usd IS NOT NULL)
            AS capacity_s,
        sum(window_s) FILTER (WHERE efficiency_cost_per_request_usd IS NOT NULL) AS capacity_window_s,
        any_value(capacity_source) AS capacity_source,
        sum(api_cost_usd) AS api_cost_usd,
        sum(completed_requests) FILTER (WHERE api_cost_usd IS NOT NULL) AS api_costed_requests,
        sum(hit_rate_prompt_tokens) AS hit_rate_prompt_tokens,
        sum(hit_rate_cached_tokens) AS hit_rate_cached_tokens,
        sum(good_requests) AS good_requests,
        sum(completed_requests + failed_requests) FILTER (WHERE good_requests IS NOT NULL) AS slo_requests,
        sum(output_tokens) AS output_tokens,
        sum(window_s) FILTER (WHERE output_tokens IS NOT NULL) AS output_window_s,
        -- A single run's percentiles are already in run_summary; only pooled weeks read requests again (pooled_percentiles).
        any_value(p50_ttft_ms) AS one_run_p50_ttft_ms,
        any_value(p95_ttft_ms) AS one_run_p95_ttft_ms,
        any_value(p50_e2e_ms) AS one_run_p50_e2e_ms,
        any_value(p95_e2e_ms) AS one_run_p95_e2e_ms,
        sum(structured_requests) AS structured_requests,
        sum(constrained_requests) AS constrained_requests,
        sum(valid_answers) AS valid_answers,
        max(min_valid_rate) AS min_valid_rate,  -- the strictest threshold any run of the week carried
        any_value(tpot_constrained_ms) AS one_run_tpot_constrained_ms,
        any_value(tpot_unconstrained_ms) AS one_run_tpot_unconstrained_ms,
        count(*) FILTER (WHERE degraded) AS degraded_runs,
        list(format('fleet degraded: run {}: {}', run_id, degraded_reason) ORDER BY run_id) FILTER (WHERE degraded)
            AS fleet_caveats
    FROM grained_runs
    GROUP BY ALL
),
config_facts AS (
    -- What the fingerprint hashes (runs.config_facts_json), one per row: the same for every run of a configuration.
    SELECT g.grain, any_value(r.config_facts_json)::JSON AS config_facts
    FROM grained_runs AS g
    JOIN {{ source('warehouse', 'runs') }} AS r USING (week_start, scenario, run_id)
    GROUP BY g.grain
),
weekly AS (
    SELECT
        g.grain,
        g.series,
        g.week_start,
        g.scenario,
        g.endpoint,
        g.backend,
        g.config_fingerprint,
        g.role,
        g.runs,
        g.completed_requests,
        g.failed_requests,
        g.replay_cost_usd,
        g.week_spend_usd,
        g.revision_note,
        f.config_facts,
        g.efficiency_cost_usd / nullif(g.efficiency_requests, 0) AS efficiency_cost_per_request_usd,
        g.replay_cost_usd / nullif(g.costed_requests, 0) AS realised_cost_per_request_usd,
        g.efficiency_requests / nullif(g.capacity_s, 0) AS capacity_rps_at_slo,
        g.capacity_source,
        g.capacity_s / nullif(g.capacity_window_s, 0) AS load_share_of_capacity,
        g.replay_cost_usd / nullif(g.costed_output_tokens / 1e6, 0) AS cost_per_mtok_output_usd,
        g.api_cost_usd / nullif(g.api_costed_requests, 0) AS api_cost_per_request_usd,
        CASE WHEN g.runs = 1 THEN g.one_run_p50_ttft_ms ELSE p.ttft_q[1] END AS p50_ttft_ms,
        CASE WHEN g.runs = 1 THEN g.one_run_p95_ttft_ms ELSE p.ttft_q[2] END AS p95_ttft_ms,
        CASE WHEN g.runs = 1 THEN g.one_run_p50_e2e_ms ELSE p.e2e_q[1] END AS p50_e2e_ms,
        CASE WHEN g.runs = 1 THEN g.one_run_p95_e2e_ms ELSE p.e2e_q[2] END AS p95_e2e_ms,
        g.hit_rate_cached_tokens / nullif(g.hit_rate_prompt_tokens, 0) AS prefix_cache_hit_rate,
        g.good_requests / nullif(g.slo_requests, 0) AS goodput,
        g.output_tokens / nullif(g.output_window_s, 0) AS sustained_output_tokens_per_s,
        g.structured_requests,
        g.constrained_requests,
        g.valid_answers,
        g.valid_answers / nullif(g.structured_requests, 0) AS valid_answer_rate,
        g.replay_cost_usd / nullif(g.costed_requests, 0) / nullif(g.valid_answers / nullif(g.structured_requests, 0), 0)
            AS usd_per_valid_request,
        g.structured_requests * (g.structured_requests / nullif(g.valid_answers, 0) - 1) AS retries,
        CASE WHEN g.runs = 1 THEN g.one_run_tpot_constrained_ms ELSE p.tpot_constrained_ms END AS tpot_constrained_ms,
        CASE WHEN g.runs = 1 THEN g.one_run_tpot_unconstrained_ms ELSE p.tpot_unconstrained_ms END AS tpot_unconstrained_ms,
        g.min_valid_rate,
        g.degraded_runs,
        g.fleet_caveats,
        lg.lake_gaps,
        lg.lake_gaps IS NOT NULL AS lake_incomplete
    FROM run_groups AS g
    LEFT JOIN config_facts AS f ON f.grain = g.grain
    LEFT JOIN {{ ref('pooled_percentiles') }} AS p ON p.grain = g.grain
    LEFT JOIN lake_gaps AS lg ON lg.week_start = g.week_start AND lg.scenario = g.scenario
),
history AS (
    -- Every earlier week of the scenario and endpoint, whatever configuration it ran, with whether it
    -- ran this one and its rank among the earlier weeks (all, and of the same configuration). rank_in_week orders
    -- the rows of one earlier week (one per configuration it ran): this configuration's first, then the most requests.
    SELECT
        *,
        dense_rank() OVER (PARTITION BY grain ORDER BY earlier_week DESC) AS recency,  -- in weeks: a week may hold several rows
        row_number() OVER (PARTITION BY grain, same_config ORDER BY earlier_week DESC) AS recency_in_config,
        max(earlier_week) OVER (PARTITION BY grain) AS latest_earlier_week,
        row_number() OVER (
            PARTITION BY grain, earlier_week
            ORDER BY same_config DESC, earlier_completed_requests DESC, earlier_config_fingerprint NULLS LAST
        ) AS rank_in_week
    FROM (
        SELECT
            w.grain,
            w.week_start,
            b.week_start AS earlier_week,
            b.config_fingerprint AS earlier_config_fingerprint,
            b.completed_requests AS earlier_completed_requests,
            b.realised_cost_per_request_usd,
            b.efficiency_cost_per_request_usd,
            b.p95_ttft_ms,
            b.prefix_cache_hit_rate,
            b.config_fingerprint IS NOT DISTINCT FROM w.config_fingerprint AS same_config,
            b.config_fingerprint IS NOT NULL AND w.config_fingerprint IS NOT NULL AS both_recorded
        FROM weekly AS w
        JOIN weekly AS b ON b.series = w.series AND b.week_start < w.week_start AND NOT b.lake_incomplete
    )
),
baselines AS (
    -- Up to the 4 most recent earlier weeks of the same configuration.
    SELECT
        grain,
        count(*) AS baseline_weeks,
        median(realised_cost_per_request_usd) AS baseline_realised_cost_per_request_usd,
        median(efficiency_cost_per_request_usd) AS baseline_efficiency_cost_per_request_usd,
        median(p95_ttft_ms) AS baseline_p95_ttft_ms,
        median(prefix_cache_hit_rate) AS baseline_prefix_cache_hit_rate
    FROM history
    WHERE same_config AND recency_in_config <= 4
    GROUP BY grain
),
previous_week AS (
    -- What week over week compares with: the scenario and endpoint's most recent earlier week, whatever configuration
    -- it ran (config_changed says when it ran another), so a change of configuration shows as a change, not a gap.
    -- Its row of this configuration when it ran one, else its row with the most completed requests.
    SELECT
        grain,
        earlier_week AS prev_week_start,
        realised_cost_per_request_usd AS prev_cost_per_request_usd,
        efficiency_cost_per_request_usd AS prev_efficiency_cost_per_request_usd,
        p95_ttft_ms AS prev_p95_ttft_ms,
        prefix_cache_hit_rate AS prev_prefix_cache_hit_rate
    FROM history
    WHERE earlier_week = latest_earlier_week AND rank_in_week = 1
),
previous_config_baselines AS (
    -- For a week with a new configuration: the median of up to the 4 most recent earlier weeks of the
    -- scenario and endpoint, whatever configuration they ran, one row a week (the one previous_week would take).
    SELECT
        grain,
        count(*) AS baseline_weeks,
        median(realised_cost_per_request_usd) AS baseline_realised_cost_per_request_usd,
        median(efficiency_cost_per_request_usd) AS baseline_efficiency_cost_per_request_usd,
        median(p95_ttft_ms) AS baseline_p95_ttft_ms,
        median(prefix_cache_hit_rate) AS baseline_prefix_cache_hit_rate
    FROM history
    WHERE recency <= 4 AND rank_in_week = 1
    GROUP BY grain
),
config_history AS (
    -- The scenario and endpoint's most recent earlier week: whether it ran this configuration, and whether
    -- both configurations were recorded (only then can they be told apart).
    SELECT grain, bool_or(same_config) AS same_config, bool_and(both_recorded) AS both_recorded
    FROM history
    WHERE earlier_week = latest_earlier_week
    GROUP BY grain
),
changed_facts AS (
    -- A changed configuration in words (macros/config_changes.sql, as cost_attribution.runtime_changes names it): each
    -- server fact that differs from the scenario and endpoint's most recent earlier week's, of each configuration
    -- that week ran other than this one.
    SELECT w.grain, list_sort(list_distinct(flatten(list(
        {{ config_changes('b.config_fingerprint', 'w.config_fingerprint', 'b.config_facts', 'w.config_facts') }})))) AS config_changes
    FROM weekly AS w
    JOIN (SELECT DISTINCT grain, latest_earlier_week FROM history) AS l ON l.grain = w.grain
    JOIN weekly AS b ON b.series = w.series AND b.week_start = l.latest_earlier_week AND NOT b.lake_incomplete
    GROUP BY w.grain
),
compared AS (
    SELECT
        w.*,
        coalesce(NOT h.same_config AND h.both_recorded, false) AS config_changed,
        coalesce(NOT h.same_config AND NOT h.both_recorded, false) AS config_unrecorded,
        pw.prev_week_start,
        100.0 * (w.efficiency_cost_per_request_usd - pw.prev_efficiency_cost_per_request_usd)
            / nullif(pw.prev_efficiency_cost_per_request_usd, 0) AS efficiency_cost_wow_change_pct,
        100.0 * (w.realised_cost_per_request_usd - pw.prev_cost_per_request_usd) / nullif(pw.prev_cost_per_request_usd, 0) AS realised_cost_wow_change_pct,
        100.0 * (w.p95_ttft_ms - pw.prev_p95_ttft_ms) / nullif(pw.prev_p95_ttft_ms, 0) AS p95_ttft_wow_change_pct,
        100.0 * (w.prefix_cache_hit_rate - pw.prev_prefix_cache_hit_rate) AS hit_rate_wow_change_pts,
        coalesce(b.baseline_weeks, 0) AS same_config_weeks,
        b.baseline_realised_cost_per_request_usd AS same_config_cost_per_request_usd,
        b.baseline_efficiency_cost_per_request_usd AS same_config_efficiency_cost_per_request_usd,
        b.baseline_p95_ttft_ms AS same_config_p95_ttft_ms,
        b.baseline_prefix_cache_hit_rate AS same_config_prefix_cache_hit_rate,
        p.baseline_weeks AS previous_config_weeks,
        p.baseline_realised_cost_per_request_usd AS previous_config_cost_per_request_usd,
        p.baseline_efficiency_cost_per_request_usd AS previous_config_efficiency_cost_per_request_usd,
        p.baseline_p95_ttft_ms AS previous_config_p95_ttft_ms,
        p.baseline_prefix_cache_hit_rate AS previous_config_prefix_cache_hit_rate,
        i.realised_cost_low_usd,
        i.realised_cost_high_usd,
        i.efficiency_cost_low_usd,
        i.efficiency_cost_high_usd,
        i.hit_rate_low,
        i.hit_rate_high,
        i.p95_ttft_low_ms,
        i.p95_ttft_high_ms
    FROM weekly AS w
    LEFT JOIN baselines AS b ON b.grain = w.grain
    LEFT JOIN previous_week AS pw ON pw.grain = w.grain
    LEFT JOIN config_history AS h ON h.grain = w.grain
    LEFT JOIN previous_config_baselines AS p ON p.grain = w.grain
    LEFT JOIN intervals AS i ON i.grain = w.grain
),
baselined AS (
    SELECT
        * EXCLUDE (same_config_weeks, same_config_cost_per_request_usd, same_config_p95_ttft_ms,
                   same_config_prefix_cache_hit_rate, previous_config_weeks, previous_config_cost_per_request_usd,
                   previous_config_p95_ttft_ms, previous_config_prefix_cache_hit_rate,
                   same_config_efficiency_cost_per_request_usd, previous_config_efficiency_cost_per_request_usd),
        CASE WHEN same_config_weeks > 0 THEN 'same_config'
             WHEN config_changed AND previous_config_weeks > 0 THEN 'previous_config'
             WHEN config_unrecorded AND previous_config_weeks > 0 THEN 'unrecorded_config' END AS baseline_source,
        CASE WHEN same_config_weeks > 0 THEN same_config_weeks
             WHEN config_changed OR config_unrecorded THEN coalesce(previous_config_weeks, 0) ELSE 0 END AS baseline_weeks,
        CASE WHEN same_config_weeks > 0 THEN same_config_cost_per_request_usd
             WHEN config_changed OR config_unrecorded THEN previous_config_cost_per_request_usd END AS baseline_realised_cost_per_request_usd,
        CASE WHEN same_config_weeks > 0 THEN same_config_efficiency_cost_per_request_usd
             WHEN config_changed OR config_unrecorded THEN previous_config_efficiency_cost_per_request_usd
        END AS baseline_efficiency_cost_per_request_usd,
        CASE WHEN same_config_weeks > 0 THEN same_config_p95_ttft_ms
             WHEN config_changed OR config_unrecorded THEN previous_config_p95_ttft_ms END AS baseline_p95_ttft_ms,
        CASE WHEN same_config_weeks > 0 THEN same_config_prefix_cache_hit_rate
             WHEN config_changed OR config_unrecorded THEN previous_config_prefix_cache_hit_rate END AS baseline_prefix_cache_hit_rate
    FROM compared
),
changes AS (
    SELECT
        *,
        100.0 * (efficiency_cost_per_request_usd - baseline_efficiency_cost_per_request_usd)
            / nullif(baseline_efficiency_cost_per_request_usd, 0) AS efficiency_cost_change_pct,
        100.0 * (realised_cost_per_request_usd - baseline_realised_cost_per_request_usd) / nullif(baseline_realised_cost_per_request_usd, 0) AS realised_cost_change_pct,
        -- The idle part, and the load in words where the window's traffic was past what the SLO allows.
        CASE WHEN load_share_of_capacity <= 1
            THEN realised_cost_per_request_usd - efficiency_cost_per_request_usd END AS idle_cost_per_request_usd,
        CASE WHEN load_share_of_capacity > 1 THEN 'overloaded'
             WHEN load_share_of_capacity IS NOT NULL THEN 'idle_capacity' END AS load_state,
        100.0 * (p95_ttft_ms - baseline_p95_ttft_ms) / nullif(baseline_p95_ttft_ms, 0) AS p95_ttft_change_pct,
        100.0 * (prefix_cache_hit_rate - baseline_prefix_cache_hit_rate) AS hit_rate_change_pts
    FROM baselined
),
judged AS (
    -- Changes are compared rounded to 1e-6 so a change exactly on a threshold is not past it by float noise.
    SELECT
        c.*,
        coalesce(round(c.efficiency_cost_change_pct, 6) > t.max_cost_change_pct, false) AS cost_past,
        coalesce(round(c.efficiency_cost_low_usd - c.baseline_efficiency_cost_per_request_usd, 12) > 0, false) AS cost_outside,
        coalesce(round(c.p95_ttft_change_pct, 6) > t.max_p95_ttft_change_pct, false) AS ttft_past,
        coalesce(round(c.p95_ttft_low_ms - c.baseline_p95_ttft_ms, 9) > 0, false) AS ttft_outside,
        coalesce(round(c.hit_rate_change_pts, 6) < t.min_hit_rate_change_pts, false) AS hit_past,
        coalesce(round(c.baseline_prefix_cache_hit_rate - c.hit_rate_high, 12) > 0, false) AS hit_outside,
        t.*
    FROM changes AS c, thresholds AS t
),
reasoned AS (
    SELECT
        j.*,
        cf.config_changes,
        list_filter(
            [
                CASE WHEN cost_past THEN format(
                    'efficiency_cost_per_request_usd {:+.1f}% vs baseline {:.6g} (threshold +{:g}%); this week''s 95% interval [{:.6g}, {:.6g}] {}',
                    efficiency_cost_change_pct, baseline_efficiency_cost_per_request_usd, max_cost_change_pct,
                    efficiency_cost_low_usd, efficiency_cost_high_usd,
                    CASE WHEN cost_outside THEN 'lies above the baseline' ELSE 'includes the baseline: within noise' END) END,
                CASE WHEN ttft_past THEN format(
                    'p95_ttft_ms {:+.1f}% vs baseline {:.6g} (threshold +{:g}%); this week''s 95% interval [{:.6g}, {:.6g}] {}',
                    p95_ttft_change_pct, baseline_p95_ttft_ms, max_p95_ttft_change_pct,
                    p95_ttft_low_ms, p95_ttft_high_ms,
                    CASE WHEN ttft_outside THEN 'lies above the baseline' ELSE 'includes the baseline: within noise' END) END,
                CASE WHEN hit_past THEN format(
                    'prefix_cache_hit_rate {:+.1f} points vs baseline {:.4f} (threshold {:g} points); this week''s 95% interval [{:.4f}, {:.4f}] {}',
                    hit_rate_change_pts, baseline_prefix_cache_hit_rate, min_hit_rate_change_pts,
                    hit_rate_low, hit_rate_high,
                    CASE WHEN hit_outside THEN 'lies below the baseline' ELSE 'includes the baseline: within noise' END) END
            ],
            lambda reason: reason IS NOT NULL
        ) AS threshold_reasons,
        -- A changed configuration says what changed, and why when its revision has a note.
        CASE WHEN config_changed THEN format(
            'configuration changed this week: {}{}{}', array_to_string(coalesce(cf.config_changes, []), ', '),
            CASE WHEN revision_note IS NOT NULL THEN format(', note ''{}''', revision_note) ELSE '' END,
            CASE WHEN baseline_source = 'previous_config'
                THEN '; compared with the previous configuration''s baseline' ELSE '' END)
             WHEN baseline_source = 'unrecorded_config' THEN
            'configuration not recorded this week or the week before (runs written before schema version 2); compared with the earlier weeks'' baseline, whatever they ran' END AS config_reason
    FROM judged AS j
    LEFT JOIN changed_facts AS cf ON cf.grain = j.grain
),
explained AS (
    SELECT
        *,
        CASE WHEN config_reason IS NOT NULL AND (config_changed OR len(threshold_reasons) > 0)
             THEN list_prepend(config_reason, threshold_reasons) ELSE threshold_reasons END AS reasons,
        NOT lake_incomplete AND role IS DISTINCT FROM 'live' AND ((cost_past AND cost_outside)
            OR (ttft_past AND ttft_outside) OR (hit_past AND hit_outside)) AS regressed
    FROM reasoned
),
persisted AS (
    -- Whether the series regressed the week before too (whatever configuration either week ran): a regression
    -- that persists is 'sustained'. The week before was itself confirmed: a first regression is told only once a
    -- confirmation run agrees (pipelines/regression_notice.py), and that run's records replace the week's.
    SELECT e.grain, coalesce(bool_or(b.regressed), false) AS regressed_before
    FROM explained AS e
    LEFT JOIN explained AS b ON b.series = e.series AND b.week_start = e.week_start - 7
    GROUP BY e.grain
)
SELECT
    * EXCLUDE (grain, series, cost_past, cost_outside, ttft_past, ttft_outside, hit_past, hit_outside, reasons,
               threshold_reasons, config_reason, config_unrecorded, regressed, regressed_before,
               max_cost_change_pct, max_p95_ttft_change_pct, min_hit_rate_change_pts, fleet_caveats, lake_gaps,
               lake_incomplete, config_facts, config_changes),
    max_cost_change_pct AS cost_threshold_pct,
    max_p95_ttft_change_pct AS p95_ttft_threshold_pct,
    min_hit_rate_change_pts AS hit_rate_threshold_pts,
    -- 'drift' (a change point over the canary's series that no single week's threshold caught) is marked
    -- afterwards, on rows this leaves 'ok' or 'within_noise' (warehouse/marts/change_points.py).
    CASE
        WHEN lake_incomplete THEN 'not_judged'
        WHEN role = 'live' THEN 'not_judged'
        WHEN regressed AND regressed_before THEN 'sustained'
        WHEN regressed THEN 'regression'
        WHEN cost_past OR ttft_past OR hit_past THEN 'within_noise'
        WHEN baseline_weeks = 0 THEN 'no_baseline'
        ELSE 'ok'
    END AS regression_verdict,
    CAST(NULL AS DATE) AS drift_start_week,
    CAST(NULL AS VARCHAR) AS drift_metrics,
    CASE WHEN lake_incomplete THEN to_json(list_prepend(
            'not judged: the lake lacks part of this week, so its figures are not the whole week''s', lake_gaps))::VARCHAR
        WHEN len(reasons) > 0 AND role IS DISTINCT FROM 'live' THEN to_json(reasons)::VARCHAR
        -- A live row is not judged: of its reasons, only what changed in its configuration.
        WHEN config_changed THEN to_json([config_reason])::VARCHAR END AS regression_reasons,
    CASE WHEN lake_incomplete OR degraded_runs > 0
        THEN to_json(list_concat(coalesce(lake_gaps, []), coalesce(fleet_caveats, [])))::VARCHAR END AS caveats,
    CASE WHEN NOT lake_incomplete AND role IS DISTINCT FROM 'live'
        AND ((cost_past AND cost_outside) OR (ttft_past AND ttft_outside) OR (hit_past AND hit_outside))
        THEN to_json(list_filter(
            [CASE WHEN cost_past AND cost_outside THEN 'efficiency_cost_per_request_usd' END,
             CASE WHEN ttft_past AND ttft_outside THEN 'p95_ttft_ms' END,
             CASE WHEN hit_past AND hit_outside THEN 'prefix_cache_hit_rate' END],
            lambda metric: metric IS NOT NULL))::VARCHAR END AS regressed_metrics
FROM explained
JOIN persisted USING (grain)
ORDER BY week_start, scenario, endpoint, backend, config_fingerprint
) AS model_rows
