-- costbench warehouse schema: the documented contract for everything in warehouse/costbench.duckdb.
-- Every stored number carries its unit in its name (_s, _ms, _usd, _tokens, _pct) and a one-line
-- definition here; ratios without a suffix are fractions 0-1. The lake (Parquet, one folder per
-- week x scenario) is the source of truth: `runs`, `requests`, `server_samples` and `gpu_samples` are
-- views over it; gpu_prices/api_prices come from warehouse/prices.yaml; run_summary, weekly_trends,
-- diagnoses and cost_intervals are tables rebuilt from them on every refresh by the dbt project warehouse/dbt/,
-- whose YAML defines their columns.
--
-- @<table>_source@ placeholders are what each view reads, filled in by the backend (DuckDB cannot bind
-- parameters in CREATE VIEW, so this is the one substitution, of text the store controls and escapes).
-- Local backend (warehouse/backends/store.py): read_parquet over a list of Parquet globs, hive-partitioned
-- (week=, scenario=), inside the warehouse folder: a zero-row file that pins the current columns and
-- types, plus the lake glob when the lake has files for the table. DuckLake backend
-- (warehouse/backends/ducklake_store.py): the lake table lake.<table>, whose week and scenario are columns.
-- The local globs start with the warehouse folder: the session's DuckDB variable costbench_root when it set one
-- (Warehouse.connect and `python -m warehouse attach-sql` set it to the folder they open), else the absolute
-- folder the refresh ran in, so a plain session opens the database from any working directory and a moved
-- warehouse reads its new folder from its next refresh. The globs are over the refresh's snapshot (lake/_snapshots/<id>/, hard links
-- nothing is ever added to), so a session reads the files the marts were built from. Every file a view reads
-- passed the refresh's checks (lake_files); those that did not are in lake_quarantine. Older lake files that lack newer columns read them as null (union_by_name); a file whose column has another type is quarantined,
-- never allowed to change the view's type. Times called *_mono_s are seconds on the replay's monotonic clock from the run's
-- t0; *_wall_s are seconds since the Unix epoch.
--
-- Measured window of a run: from t0 + warmup_s to the end of its last request, t0 + warmup_s + window_s (seconds
-- from t0; a request that got no last byte ends when it failed or was stopped). runs.window_s is that window's length: the replay excludes the warm-up, once, and nothing
-- downstream subtracts it again. Warm-up requests (is_warmup) enter no metric; server and GPU samples
-- count only inside the measured window.
--
-- Columns the lake stores are defined once, in Python next to their records (REQUEST_COLUMNS and
-- RUN_INFO_COLUMNS in replay/recording/records.py, SERVER_/GPU_SAMPLE_COLUMNS in endpoints/probes/probe_records.py,
-- RUNS_COLUMNS in warehouse/parquet/run_columns.py): the comments on those columns below restate those
-- definitions word for word, and tests/test_column_definitions.py fails when they drift.

CREATE TABLE IF NOT EXISTS schema_version (
    version INTEGER NOT NULL,         -- schema revision applied (warehouse/schema_migrations.py SCHEMA_VERSION)
    applied_wall_s DOUBLE,            -- when it was applied (s since the Unix epoch; null for version 1)
    note VARCHAR                      -- what the upgrade did
);

CREATE OR REPLACE VIEW runs AS
SELECT
    week AS week_start,       -- Monday (DATE) that starts the partition's week, from the lake path
    scenario,                 -- scenario name from workloads/scenarios.yaml, from the lake path
    run_id,                   -- unique id of the replay
    endpoint,                 -- endpoint name from workloads/endpoints.yaml
    mode,                     -- how the endpoint was provisioned: sim | launch | attach
    backend,                  -- 'sim' for the SGLang twin (a model, not a measurement), else 'sglang'
    model,                    -- served model path, e.g. deepseek-ai/DeepSeek-V3
    gpu_type,                 -- GPU model the price refers to, e.g. H200
    gpu_count,                -- GPUs the endpoint occupies (count)
    usd_per_gpu_hour,         -- price of one GPU for one hour, from the endpoint spec (USD)
    api_key_env,              -- name of the environment variable holding the API key (never the key)
    sglang_version,           -- "version" from the server's /server_info (null when not reported)
    server_args_json,         -- JSON list of the sglang.launch_server flags, secret values redacted
    server_info_json,         -- JSON of /server_info saved for the run, secret values redacted
    url,                      -- base URL the client sent to (credentials removed)
    workload_name,            -- name of the replayed workload
    workload_hash,            -- content hash of the replayed workload
    trace_path,               -- trace file the workload was read from
    trace_format,             -- trace reader used (mooncake, azure, ...)
    window_start_s,           -- start of the replayed slice of the trace (s of trace time)
    window_duration_s,        -- length of the replayed slice (s of trace time; null = to the end)
    speedup,                  -- trace time / replay time (ratio)
    t0_wall_s,                -- wall-clock time of the run's t0 (s since the Unix epoch)
    finished_wall_s,          -- wall-clock time the run ended (s since the Unix epoch; null if it never did)
    window_s,                 -- the measured window: t0 + warmup_s to the end of the last request (its last byte, or when it failed or was stopped without one), warm-up already excluded by the replay: the time the endpoint was held, whatever it answered (s)
    requests_total,           -- requests in the workload window (count)
    requests_recorded,        -- requests with a record (count)
    requests_ok,              -- requests with status ok, as the client counted them (count)
    schedule_lag_p50_ms,      -- median requests.schedule_lag_ms over the sent requests, warm-up excluded (ms)
    schedule_lag_p99_ms,      -- p99 of the same schedule_lag_ms (ms)
    schedule_lag_max_ms,      -- largest of the same schedule_lag_ms (ms)
    client_degraded,          -- the client fell behind its schedule (lag p99 past the threshold)
    partial,                  -- the run did not finish: only the requests that completed are recorded
    max_concurrency,          -- client-side cap on requests in flight (count; null = open loop only)
    coalesce(warmup_s, 0.0) AS warmup_s,  -- requests scheduled before this offset are warm-up (s from t0; 0 in files before v2)
    shard_index,              -- this run replayed shard shard_index of shard_count
    shard_count,              -- shards the workload was split into (count)
    arrival_process,          -- trace | poisson | gamma | constant
    config_fingerprint,       -- 12 hex digits over model, version and cost-relevant server flags (endpoints/fingerprint.py)
    config_facts_json,        -- JSON of the facts the fingerprint hashes
    max_running_requests,     -- cap on running requests one worker enforces: sum of /server_info internal_states[].effective_max_running_requests_per_dp, else the configured flag (count; null when unknown)
    slo_ttft_ms,              -- scenario SLO on time to first token from the schedule (ms; null = none)
    slo_tpot_ms,              -- scenario SLO on time per output token after the first (ms; null = none)
    target_rps,               -- load the fleet must carry, for fleet sizing (requests/s; null = none)
    budget_usd_per_request,   -- what the scenario may spend per request (USD; null = compare with the API price)
    prefix_reuse_share,       -- share of input tokens an infinite prefix cache could reuse in this workload (ratio 0-1)
    min_valid_rate,           -- valid-answer rate a constrained scenario's week must reach (its structured_output.min_valid_rate) (ratio 0-1; null = none)
    role,                     -- the scenario's role: live (the week's traffic, carries the cost trend) | canary (the same reference window every week, where the regression rule judges the runtime) (null: not recorded)
    traffic_share,            -- share of the trace's sessions replayed: one replica's share of the fleet's traffic (ratio 0-1; null: not recorded)
    price_book,               -- price book of warehouse/prices.yaml that usd_per_gpu_hour came from; 'endpoint' when the endpoint set usd_per_gpu_hour itself (null: recorded before price books)
    capacity_rps_at_slo,      -- highest request rate the endpoint sustains inside the scenario's SLO on this run's workload, as capacity_source says: a load sweep in virtual time on the twin (endpoints/capacity/slo_capacity.py), a rate ramp of the real endpoint (replay/capacity_ramp.py) or the shadow twin's sweep scaled by the measured/twin throughput (endpoints/capacity/shadow_capacity.py) (requests/s; null: not measured, or not sustained at any rate swept)
    capacity_source,          -- how capacity_rps_at_slo was found: twin_sweep (a twin endpoint's own sweep) | rate_ramp (a real endpoint's opt-in rate ramp, measured: replay/capacity_ramp.py) | shadow_twin (a real endpoint's shadow twin's sweep x real / twin output tokens/s, modelled: endpoints/capacity/shadow_capacity.py) (null: no sweep ran)
    capacity_ramp_gpu_minutes, -- what the rate ramp held the real endpoint for: gpu_count x the ramp's wall seconds / 60, on the run after whose replay it ran; the week's other runs share its capacity (GPU-minutes; null: no ramp ran after this run)
    fleet_plan_json,          -- the fleet plan for the scenario's target_rps on this run's window (endpoints/capacity/fleet_plan.py's fleet_plans.json, compact): every shape tried, one replay at the target rate each; the view fleet_plan_shapes unnests it (null: no plan: no target_rps or SLO, not a twin, or recorded before plans)
    running_requests_at_slo,  -- one replica's time-weighted mean running batch at the capacity sweep's capacity probe (the fastest rate sustained inside the SLO), from the same sweep as capacity_rps_at_slo: the batch the endpoint runs when it carries its capacity (requests; null: no sweep, nothing sustained, or recorded before occupancy at SLO)
    single_replica_hit_rate,  -- cached / prompt tokens one replica of the fleet realises on the twin on this window's first 300 requests at the run's replay rate (endpoints/capacity/routing_reference.py): what the fleet's traffic would realise on one cache of one replica's size (ratio 0-1; null: not a twin fleet, or recorded before routing references)
    fleet_model_hit_rate,     -- cached / prompt tokens the same requests realise on the twin through the fleet's replicas and its router's policy model: single_replica_hit_rate minus this is what routing loses (ratio 0-1; null: not a twin fleet, or recorded before routing references)
    replay_clock,             -- the clock the replay's timings are on: wall (real time) | virtual (a twin served in the replay step on a virtual clock shared with the client: the modelled GPUs' time, without either's CPU time) (null: recorded before clocks)
    replicas,                 -- SGLang workers serving the endpoint: a fleet's replicas behind its router, attach's worker_urls, else 1 (count; null: recorded before fleets)
    router_policy,            -- the fleet's router (smg) --policy: cache_aware | round_robin | prefix_hash | power_of_two | ... (null: no router block (one server, or attach without one), or recorded before fleets)
    router_args_json,         -- JSON list of the router's other smg launch flags, as endpoints.yaml gives them (null: no router block, or recorded before fleets)
    shadow_output_tokens_per_s_ratio, -- twin / real sustained output tokens/s: the run's window replayed on the twin with the endpoint's flags on a virtual clock (the shadow canary, endpoints/capacity/shadow_canary.py) (ratio; null: a twin endpoint, one the twin cannot model, or recorded before shadow canaries)
    shadow_p50_ttft_ratio,    -- twin / real median TTFT, the same shadow canary (ratio; null: a twin endpoint, one the twin cannot model, or recorded before shadow canaries)
    shadow_p50_tpot_ratio,    -- twin / real median TPOT, the same shadow canary (ratio; null: a twin endpoint, one the twin cannot model, or recorded before shadow canaries)
    workers_json,             -- JSON list, one object per worker (and the router) of the run: worker (its URL), role, answered_s and unanswered_s (inside the measured window, how long its scrapes were answered or not), lost_from_s (where in the window it stopped answering 3 scrapes running; null: never), completed_requests, failed_requests, first_served_s and last_served_s (finishes of its first and last completed requests); times are s from the window's start (null: no worker known (not probed, and no request named one), or recorded before fleet health)
    degraded,                 -- a worker or the router stopped answering for part of the measured window (3 scrapes running): the run was priced for the whole fleet, and served with less of it (null: the probes recorded no answers (not probed, or recorded before fleet health))
    degraded_reason,          -- each lost worker or router: its role and URL, when in the window it stopped answering, for how long, and the requests it completed before (null unless degraded)
    revision_note,            -- the note of the endpoints.yaml revision whose server_args the run ran (why they were changed), secret-shaped text redacted (null: no revision in force, one without a note, or recorded before version 5)
    coalesce(hours_per_week, 168.0) AS hours_per_week  -- hours a week the endpoint's GPUs are held, the basis of the week's spend (endpoints.yaml hours_per_week, default 168: around the clock) (hours; 168 in files before v5)
FROM @runs_source@;

CREATE OR REPLACE VIEW requests AS
SELECT
    week AS week_start,       -- Monday (DATE) that starts the partition's week, from the lake path
    scenario,                 -- scenario name, from the lake path
    run_id,                   -- the replay this request belongs to (runs.run_id)
    request_id,               -- request id, stable within the workload
    session_id,               -- multi-turn session (null: independent request)
    turn,                     -- position in the session (null: independent request)
    input_tokens,             -- prompt length the workload asked to send (tokens)
    output_tokens,            -- output length the workload enforced via max_new_tokens + ignore_eos (tokens)
    scheduled_mono_s,         -- when the open-loop schedule said to send it (s from t0)
    sent_mono_s,              -- when the HTTP request was written (s from t0)
    first_token_mono_s,       -- first chunk carrying output tokens (s from t0)
    first_answer_mono_s,      -- first chunk carrying answer, not reasoning, tokens (s from t0)
    finish_mono_s,            -- last byte of the response (s from t0)
    chunk_mono_s,             -- arrival of every token-carrying chunk (list of s from t0)
    prompt_tokens,            -- prompt length the server reported (tokens; null = not reported)
    completion_tokens,        -- output length the server reported, reasoning included (tokens; null = not reported)
    cached_tokens,            -- prompt tokens served from the prefix cache, server-reported (tokens; null = not reported)
    reasoning_tokens,         -- reasoning tokens the server reported (tokens; null = not reported)
    finish_reason,            -- length | stop | abort
    http_status,              -- HTTP status code of the response
    status,                   -- ok | error | timeout | cancelled
    error_kind,               -- class of failure (null when ok)
    error_message,            -- failure detail (null when ok)
    server_e2e_latency_s,     -- meta_info.e2e_latency: end-to-end latency measured by the server (s; null = not reported)
    server_queue_time_s,      -- meta_info.queue_time (native, --enable-metrics): time in the server's waiting queue before its first forward batch, measured by the server (s; null = not reported, or a file older than this column)
    is_warmup,                -- sent before the measured window; excluded from every metric
    coalesce(held_s, 0.0) AS held_s,  -- how long the concurrency cap or session order held it past its schedule (s; 0 in files before v2)
    held_by,                  -- concurrency | session | null
    response_format_type,     -- json_schema | json_object | regex: the answer format the request asked for (null = free-form, or a file older than this column)
    constrained,              -- the format was sent to the server as a constraint; false: only written into the prompt (null when no format)
    answer_valid,             -- the answer after reasoning has the requested format (jsonschema Draft 2020-12, or a full regex match) (null when no format or the request did not complete)
    answer_error,             -- first validation error of the answer: JSON path and message (null when valid, no format, or not completed)
    worker,                   -- the fleet's worker that served it, as SGLang's router (smg) names it in its x-smg-routed-worker-id response header: the worker's URL (null: not through smg, or no answer)
    ttft_prealloc_ms,         -- ttft part, disaggregated: in the decode server's prealloc queue until its kv pool took slots for the prompt (ms; null = not reported (a real SGLang gives at most queue and prefill), not a stage of this request (a unified one has no transfer parts), or a file older than this column)
    ttft_bootstrap_ms,        -- ttft part, disaggregated: from the decode's slots until the prefill server queued the request (the bootstrap handshake and its notices) (ms; null = not reported (a real SGLang gives at most queue and prefill), not a stage of this request (a unified one has no transfer parts), or a file older than this column)
    ttft_queue_ms,            -- ttft part: in the waiting queue before the first forward batch, on the server that prefilled it (meta_info.queue_time of a request never retracted) (ms; null = not reported (a real SGLang gives at most queue and prefill), not a stage of this request (a unified one has no transfer parts), or a file older than this column)
    ttft_prefill_ms,          -- ttft part: the first forward batch to the first token sampled (meta_info.prefill_finished_time - forward_entry_time) (ms; null = not reported (a real SGLang gives at most queue and prefill), not a stage of this request (a unified one has no transfer parts), or a file older than this column)
    ttft_kv_transfer_ms,      -- ttft part, disaggregated: the first token sampled on the prefill server to the kv's arrival at the decode server (ms; null = not reported (a real SGLang gives at most queue and prefill), not a stage of this request (a unified one has no transfer parts), or a file older than this column)
    ttft_decode_wait_ms,      -- ttft part, disaggregated: the kv's arrival at the decode server to the first token it sent (ms; null = not reported (a real SGLang gives at most queue and prefill), not a stage of this request (a unified one has no transfer parts), or a file older than this column)
    status = 'ok' AND NOT is_warmup AS is_completed,                     -- counts as a completed request of the measured window
    status IN ('error', 'timeout') AND NOT is_warmup AS is_failed,       -- counts as a failed request of the measured window
    (sent_mono_s - scheduled_mono_s - coalesce(held_s, 0.0)) * 1000 AS schedule_lag_ms,  -- how late the client sent it past the schedule and any deliberate hold, as runs.schedule_lag_*_ms (ms)
    (first_token_mono_s - sent_mono_s) * 1000 AS ttft_ms,                -- time to first token from send (ms)
    (first_token_mono_s - scheduled_mono_s) * 1000 AS ttft_from_schedule_ms,  -- time to first token from the schedule (ms)
    (first_answer_mono_s - sent_mono_s) * 1000 AS ttfa_ms,               -- time to first answer (non-reasoning) token from send (ms)
    (finish_mono_s - sent_mono_s) * 1000 AS e2e_ms,                      -- end-to-end latency from send (ms)
    (finish_mono_s - scheduled_mono_s) * 1000 AS e2e_from_schedule_ms,   -- end-to-end latency from the schedule; a lagging client cannot hide it (ms)
    (finish_mono_s - first_token_mono_s) * 1000
        / CASE WHEN completion_tokens > 1 THEN completion_tokens - 1 END AS tpot_ms,  -- time per output token after the first (ms)
    CASE WHEN len(chunk_mono_s) > 1
        THEN coalesce((completion_tokens - 1) / (len(chunk_mono_s) - 1), 1.0) END AS tokens_per_chunk_gap  -- output tokens each chunk gap stands for: (completion_tokens - 1) / (chunks - 1), 1 when not reported (tokens)
FROM @requests_source@;

CREATE OR REPLACE VIEW server_samples AS
SELECT
    week AS week_start,       -- Monday (DATE) that starts the partition's week, from the lake path
    scenario,                 -- scenario name, from the lake path
    run_id,                   -- the replay the sample belongs to (runs.run_id)
    sample_wall_s,            -- when /metrics was scraped (s since the Unix epoch)
    source_url,               -- whose /metrics was scraped: a worker, or a fleet's router at its metrics port
    metric,                   -- full Prometheus name, e.g. sglang:num_running_reqs; or server_info:max_running_requests (kind info), costbench:scrape_answered (kind health)
    kind,                     -- counter | gauge | histogram | info (the worker's cap on running requests from its /server_info, one row per run) | health (one row per source and scrape: 1 it answered with any HTTP status, 0 refused, reset or timed out)
    labels_json,              -- sorted JSON of the labels, dp_rank summed away
    value,                    -- gauges: summed over dp_rank; counters and histograms: delta since the run's first scrape
    role,                     -- what was scraped: router (a fleet's smg router, smg_* series) | worker (one of a fleet's SGLang servers) | prefill | decode (one of a disaggregated fleet's, by its disaggregation_mode) | server (a single server) (null: written before fleets)
    worker                    -- the worker the row describes: the scraped worker's URL, or a router series' worker label (null: a router-wide series, or written before fleets)
FROM @server_samples_source@;

CREATE OR REPLACE VIEW gpu_samples AS
SELECT
    week AS week_start,       -- Monday (DATE) that starts the partition's week, from the lake path
    scenario,                 -- scenario name, from the lake path
    run_id,                   -- the replay the sample belongs to (runs.run_id)
    sample_wall_s,            -- when the GPU was sampled (s since the Unix epoch)
    host,                     -- host the GPU is in (a twin's: its server's host:port)
    gpu_index,                -- GPU index on the host (null when no GPU could be read)
    source,                   -- nvml | dcgm | twin (modelled from the twin's own engine steps, not measured) | none
    utilisation_pct,          -- GPU busy time share over the sample period (%; null when unmeasured, never 0)
    memory_used_bytes,        -- device memory in use (bytes)
    memory_total_bytes,       -- device memory size (bytes)
    power_w,                  -- power draw (W)
    sm_clock_mhz,             -- SM clock (MHz)
    sm_active_pct,            -- DCGM_FI_PROF_SM_ACTIVE: share of SM cycles with a warp resident over the sample period (%; null when unmeasured or written before this column)
    dram_active_pct,          -- DCGM_FI_PROF_DRAM_ACTIVE: share of cycles the device memory interface moved data over the sample period (%; null when unmeasured or written before this column)
    note                      -- why the values are null (written once per run when no source exists)
FROM @gpu_samples_source@;

-- The twin's error as a series (docs/twin.md, "The twin's error as a series"): one row per published calibration
-- point and metric, recomputed weekly by the twin_calibration asset (endpoints/sim/calibration/
-- calibration_tables.py).
-- Partitioned by week only: the lake's scenario= folder is always published_points, so the view leaves it out.
CREATE OR REPLACE VIEW twin_calibration AS
SELECT
    week AS week_start,       -- Monday (DATE) of the week the figures were computed for, from the lake path
    point_key,                -- the published point: <calibration row>.c<concurrency>, a key of published_points.py
    calibration_set,          -- fit (the cost constants or row 8's MTP acceptance were fitted on the point: not a prediction) | validation (a prediction)
    metric,                   -- the published figure: throughput_per_gpu | mean_ttft | mean_tpot | p99_ttft
    unit,                     -- the figure's unit, and for throughput which tokens count
    counted,                  -- the figure counts toward the target (throughput, mean TTFT, mean TPOT); P99 TTFT is shown, not counted
    twin_value,               -- the twin's figure in `unit`, measured as the publisher measured
    published_value,          -- the publisher's figure in `unit`
    ratio,                    -- twin_value / published_value (ratio)
    point_set,                -- which points the computation ran: full (every published point) | quick (six of them)
    setup,                    -- the published run: GPUs, model, SGLang release, lengths, concurrency
    source,                   -- where the figure was published
    published_sglang_version, -- the SGLang release the publisher ran
    fitted_sglang_version,    -- the SGLang releases the cost constants of the point's GPU vendor were fitted against (endpoints/sim/cost/fitted_constants.py)
    constants_fitted_on,      -- when the cost constants were fitted (FIT_DATE)
    twin_version,             -- the twin that computed the figure: git describe of the checkout, else the costbench package version
    computed_wall_s,          -- when the figures were computed (s since the Unix epoch)
    disaggregated             -- a prefill/decode deployment: one saturated phase of one, or a whole fleet driven closed loop (NULL: computed before the column existed)
FROM @twin_calibration_source@;

-- One row per shape a run's fleet plan tried (runs.fleet_plan_json unnested; endpoints/capacity/fleet_plan.py):
-- the window replayed once at the scenario's target rate through `replicas` twins behind the router policy's model.
CREATE OR REPLACE VIEW fleet_plan_shapes AS
WITH plans AS (
    SELECT
        run_id,
        week_start,
        scenario,
        from_json(fleet_plan_json, '{"target_rps": "DOUBLE", "slo_ttft_ms": "DOUBLE", "slo_tpot_ms": "DOUBLE",
            "requests": "BIGINT", "idle_good_share": "DOUBLE", "shapes": [{"replicas": "INTEGER", "policy": "VARCHAR",
            "gpus": "INTEGER", "good_share": "DOUBLE", "holds_target": "BOOLEAN", "hit_rate": "DOUBLE",
            "p95_ttft_ms": "DOUBLE", "max_worker_share": "DOUBLE", "capacity_rps_at_slo": "DOUBLE",
            "chosen": "BOOLEAN", "prefill_workers": "INTEGER", "decode_workers": "INTEGER",
            "decode_ep_size": "INTEGER"}]}') AS plan
    FROM runs
    WHERE fleet_plan_json IS NOT NULL
), shapes AS (
    SELECT run_id, week_start, scenario, plan, unnest(plan.shapes) AS shape FROM plans
)
SELECT
    run_id,                   -- the run whose window was planned (runs.run_id)
    week_start,               -- Monday that starts the week
    scenario,                 -- scenario name
    plan.target_rps AS target_rps,  -- the scenario's target rate every shape was replayed at (requests/s)
    plan.requests AS plan_requests,  -- requests each shape's replay sent: 300 per replica the endpoint's capacity predicts, at most 3,000 (count)
    plan.idle_good_share AS idle_good_share,  -- share inside the SLO on one idle replica, the verdict's reference (ratio 0-1)
    shape.replicas AS replicas,  -- workers behind the router, each with the endpoint's flags and GPUs per worker; a disaggregated shape's prefill + decode workers (count)
    coalesce(shape.prefill_workers, 0) AS prefill_workers,  -- a disaggregated shape's prefill workers; 0: aggregated replicas (count)
    coalesce(shape.decode_workers, 0) AS decode_workers,  -- a disaggregated shape's decode workers; 0: aggregated replicas (count)
    coalesce(shape.decode_ep_size, 0) AS decode_ep_size,  -- GPUs of each decode worker when it is one wide expert-parallel server (DP attention + DeepEP); 0: the endpoint's own kind of worker (count)
    shape.policy AS router_policy,  -- the router's --policy in the shape: cache_aware | round_robin
    shape.gpus AS gpus,       -- replicas x GPUs per worker (count)
    shape.good_share AS good_share,  -- requests inside both SLO parts at the target rate (ratio 0-1)
    shape.holds_target AS holds_target,  -- good_share >= 0.95 x idle_good_share, the capacity sweep's verdict
    shape.hit_rate AS hit_rate,  -- cached / prompt tokens the fleet realised at the target rate (ratio 0-1)
    shape.p95_ttft_ms AS p95_ttft_ms,  -- TTFT from arrival at the target rate, 95th percentile, nearest rank (ms)
    shape.max_worker_share AS max_worker_share,  -- the busiest worker's share of the requests (ratio 0-1; 1 / replicas is even)
    shape.capacity_rps_at_slo AS capacity_rps_at_slo,  -- the chosen shape's capacity at the SLO, to within a factor 2^(1/2) below (requests/s; null: not swept, every other shape)
    shape.chosen AS chosen    -- the fewest GPUs holding the target (ties: the larger good_share, then the lower p95 TTFT)
FROM shapes;

CREATE OR REPLACE TABLE price_books (
    name VARCHAR NOT NULL,            -- the price book, named by an endpoint's price_book (runs.price_book)
    gpu_type VARCHAR NOT NULL,        -- GPU model it prices
    kind VARCHAR NOT NULL,            -- rent_on_demand | rent_reserved | own (amortised capex + power + hosting, every hour paid)
    usd_per_gpu_hour DOUBLE NOT NULL, -- price of one GPU for one hour in this book (USD)
    as_of DATE NOT NULL,              -- when the figure was read or set
    source VARCHAR NOT NULL,          -- where it comes from, or what it assumes
    assumption BOOLEAN NOT NULL       -- true: not read off a public page
);

CREATE OR REPLACE TABLE gpu_prices (
    gpu_type VARCHAR NOT NULL,        -- GPU model, matched to runs.gpu_type
    usd_per_gpu_hour DOUBLE NOT NULL, -- list price of one GPU for one hour, on demand (USD)
    as_of DATE NOT NULL,              -- when the price was read
    source VARCHAR NOT NULL           -- public page the price comes from
);

CREATE OR REPLACE TABLE api_prices (
    model VARCHAR NOT NULL,           -- served model path, lower-cased, matched to lower(runs.model)
    name VARCHAR NOT NULL,            -- the API product, e.g. deepseek-chat (DeepSeek-V3)
    usd_per_mtok_cached_input DOUBLE NOT NULL,    -- input tokens served from the API's context cache (USD per million tokens)
    usd_per_mtok_uncached_input DOUBLE NOT NULL,  -- input tokens not cached (USD per million tokens)
    usd_per_mtok_output DOUBLE NOT NULL,          -- output tokens, reasoning included (USD per million tokens)
    as_of DATE NOT NULL,              -- when the price was read
    source VARCHAR NOT NULL           -- public page the price comes from
);

CREATE OR REPLACE TABLE lake_files (
    table_name VARCHAR NOT NULL,      -- lake table: runs | requests | server_samples | gpu_samples
    week_start DATE NOT NULL,         -- Monday that starts the partition's week, from its path
    scenario VARCHAR NOT NULL,        -- scenario name, from its path
    path VARCHAR NOT NULL,            -- the Parquet file, relative to the warehouse folder
    frozen_path VARCHAR NOT NULL,     -- the refresh's hard link to it under lake/_snapshots/, which the views read (relative to the warehouse folder)
    sha256 VARCHAR NOT NULL,          -- its sha256, recorded when it was written (part-0.parquet.sha256) and matched by this refresh
    schema_version INTEGER,           -- schema version stamped in the file's key-value metadata (null: written before files were stamped)
    row_count BIGINT,                 -- rows in the file, from its footer (count)
    size_bytes BIGINT NOT NULL,       -- file size when checked (bytes)
    modified_ns BIGINT NOT NULL,      -- file modification time when checked (ns since the Unix epoch)
    decoded_wall_s DOUBLE NOT NULL    -- when this refresh verified its content: its sha256 matched the recorded one, or every page was decoded (s since the Unix epoch)
);

CREATE OR REPLACE TABLE lake_quarantine (
    table_name VARCHAR NOT NULL,      -- lake table the file belonged to
    week_start DATE,                  -- its partition's week (null: its folders were not a partition's)
    scenario VARCHAR,                 -- its partition's scenario (null: likewise)
    source_path VARCHAR NOT NULL,     -- where it was, relative to the warehouse folder
    quarantined_path VARCHAR NOT NULL,  -- where it is now, under lake/_quarantine, relative to the warehouse folder
    reason VARCHAR NOT NULL,          -- why no view may read it: unreadable footer, a row group that does not decode, a column of another type
    quarantined_wall_s DOUBLE NOT NULL,  -- when a refresh moved it (s since the Unix epoch)
    replaced BOOLEAN NOT NULL         -- the partition has been written again since, and the new file passed: its week is whole again
);

-- The marts' build this database holds, one row (warehouse/marts/week_scope.py): the next refresh keeps the weeks whose
-- lake did not change when these inputs are still its own.
CREATE OR REPLACE TABLE mart_build (
    inputs_sha256 VARCHAR NOT NULL,   -- sha256 of what every week's rows depend on besides the lake: DuckDB's version, the dbt project's text, schema.sql, the lake's columns and the prices
    lake_snapshot BIGINT,             -- DuckLake: the catalog snapshot the build read (null on the local backend, whose lake_files say what it read)
    rebuilt_weeks DATE[],             -- the weeks the build computed from the lake, the week tables' rows of every other week kept from the build before (null: every week)
    reason VARCHAR NOT NULL,          -- why: what made it build every week, or which weeks' lake changed and which were asked for
    built_wall_s DOUBLE NOT NULL      -- when the build ran (s since the Unix epoch)
);

-- Partitions the lake's manifest (lake/_manifest.jsonl, warehouse/parquet/lake_manifest.py) says were written, whose
-- file or folder this refresh did not find, and that no quarantine moved: that week's rows of the table are in no
-- mart, its weekly_trends rows are not judged, and the lake_intact check fails it until the partition is written
-- again (or forgotten on purpose: python -m warehouse forget).
CREATE OR REPLACE TABLE lake_missing (
    table_name VARCHAR NOT NULL,      -- lake table the partition belongs to
    week_start DATE NOT NULL,         -- its week (Monday)
    scenario VARCHAR NOT NULL,        -- its scenario
    path VARCHAR NOT NULL,            -- where its file was, relative to the warehouse folder
    written_wall_s DOUBLE NOT NULL,   -- when the manifest last recorded it: its last write, or the refresh that first found it (s since the Unix epoch)
    written_rows BIGINT,              -- rows its file held then (count)
    written_size_bytes BIGINT,        -- its file's size then (bytes)
    written_sha256 VARCHAR,           -- its file's sha256 then
    reason VARCHAR NOT NULL           -- what was written and what is gone: the file, or the whole partition folder
);
