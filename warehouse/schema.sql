-- costbench warehouse schema: the documented contract for everything in warehouse/costbench.duckdb.
-- Every stored number carries its unit in its name (_s, _ms, _usd, _tokens, _pct) and a one-line
-- definition here; ratios without a suffix are fractions 0-1. The lake (Parquet, one folder per
-- week x scenario) is the source of truth: `runs`, `requests`, `server_samples` and `gpu_samples` are
-- views over it; gpu_prices/api_prices come from warehouse/prices.yaml; run_summary, weekly_trends,
-- diagnoses and cost_intervals are tables rebuilt from them by warehouse/sql/*.sql on every refresh.
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

CREATE OR REPLACE TABLE run_summary (
    run_id VARCHAR NOT NULL,          -- the replay (runs.run_id)
    week_start DATE NOT NULL,         -- Monday that starts the week
    scenario VARCHAR NOT NULL,        -- scenario name
    endpoint VARCHAR NOT NULL,        -- endpoint name
    backend VARCHAR NOT NULL,         -- 'sim' (the twin: modelled cost) or 'sglang' (measured)
    model VARCHAR NOT NULL,           -- served model path
    config_fingerprint VARCHAR,       -- runs.config_fingerprint
    revision_note VARCHAR,            -- runs.revision_note: why the endpoints.yaml revision in force changed the server's flags (null: none)
    gpu_type VARCHAR NOT NULL,        -- GPU model the price refers to
    gpu_count INTEGER NOT NULL,       -- GPUs the endpoint occupies (count)
    usd_per_gpu_hour DOUBLE NOT NULL, -- price of one GPU for one hour, from the endpoint (USD)
    list_usd_per_gpu_hour DOUBLE,     -- gpu_prices list price for gpu_type, for comparison (USD; null when not listed)
    window_s DOUBLE,                  -- measured window: runs.window_s, warm-up already excluded (s)
    run_cost_usd DOUBLE,              -- gpu_count x usd_per_gpu_hour x window_s / 3600: the replay window's GPU cost (USD)
    hours_per_week DOUBLE NOT NULL,   -- runs.hours_per_week: hours a week the endpoint's GPUs are held (hours)
    week_spend_usd DOUBLE NOT NULL,   -- gpu_count x usd_per_gpu_hour x hours_per_week: what the endpoint's GPUs cost for the whole week at the run's price, whatever the replay's length (USD)
    completed_requests BIGINT NOT NULL,  -- status ok, not warm-up (count)
    failed_requests BIGINT NOT NULL,  -- status error or timeout, not warm-up (count)
    cancelled_requests BIGINT NOT NULL,  -- status cancelled (the run stopped), not warm-up (count)
    output_tokens BIGINT,             -- sum of server-reported completion_tokens of completed requests (tokens; null = none reported)
    hit_rate_prompt_tokens BIGINT,    -- sum of prompt_tokens over completed requests reporting both prompt and cached tokens (tokens)
    hit_rate_cached_tokens BIGINT,    -- sum of cached_tokens over the same requests (tokens)
    realised_cost_per_request_usd DOUBLE,  -- the realised cost: run_cost_usd / completed_requests, what the GPUs cost over the window per request served; moves with the traffic's volume as well as the runtime (USD; null when none completed)
    cost_per_mtok_output_usd DOUBLE,  -- run_cost_usd / (output_tokens / 1e6) (USD per million output tokens)
    api_price_name VARCHAR,           -- api_prices.name matched by model (null: no API price for this model)
    api_cost_usd DOUBLE,              -- the completed requests' tokens at API prices, with the API's own prefix cache on the same traffic: (cached x cached price + (prompt - cached) x uncached price + completion x output price) / 1e6, where cached = prompt tokens x runs.prefix_reuse_share (what the trace repeats), whatever this endpoint's cache realised (its own cached_tokens where the offered reuse was not recorded); prompt/completion fall back to the requested input/output tokens (USD; null: no API price for the model)
    api_cost_per_request_usd DOUBLE,  -- api_cost_usd / completed_requests (USD)
    self_host_to_api_cost_ratio DOUBLE,  -- run_cost_usd / api_cost_usd (ratio; < 1: self-hosting was cheaper)
    break_even_utilisation DOUBLE,    -- batch_occupancy x self_host_to_api_cost_ratio: the batch occupancy at which self-hosting costs what the API costs, if requests served per GPU-hour grow in proportion to occupancy (ratio; > 1: unreachable on this configuration)
    prefix_cache_hit_rate DOUBLE,     -- client: hit_rate_cached_tokens / hit_rate_prompt_tokens (ratio 0-1; null when not reported)
    server_prefix_cache_hit_rate DOUBLE,  -- server: delta sglang:cached_tokens_total / delta sglang:prompt_tokens_total over the measured window (ratio 0-1; null without server samples)
    batch_occupancy DOUBLE,           -- how full the batch ran against what the endpoint runs inside its SLO: basis slo_batch, the sum over workers of the time-weighted mean of sglang:num_running_reqs over the sampled measured window / (running_requests_at_slo x those workers); basis kv_pool (no sweep), the workers' mean sglang:token_usage (ratio; 1 = the batch at SLO capacity, above 1 past it; null: no server samples)
    batch_occupancy_basis VARCHAR,    -- what batch_occupancy divides by: slo_batch (the sweep's running batch at capacity) | kv_pool (the KV pool's tokens) (null: no occupancy)
    running_cap_share DOUBLE,         -- the same running requests / the sum of the workers' caps (each one's server_info:max_running_requests row, else runs.max_running_requests): how near the admission cap, which no deployment approaches (ratio 0-1; null when a worker's cap is unknown)
    running_requests_at_slo DOUBLE,   -- runs.running_requests_at_slo (requests)
    kv_usage_mean DOUBLE,             -- time-weighted mean of sglang:token_usage, KV-pool fraction, summed over workers as stored (ratio)
    kv_usage_max DOUBLE,              -- largest sampled sglang:token_usage in the measured window (ratio)
    retractions BIGINT,               -- delta sglang:num_retracted_requests_total over the measured window (count; null when the server does not export it)
    eager_decode_share DOUBLE,        -- delta sglang:cuda_graph_passes_total{mode="decode_none"} / its decode_none + decode_cuda_graph over the measured window: the share of decode steps run without a CUDA graph, their batch per rank past --cuda-graph-max-bs (ratio 0-1; null when the server does not export the counter or decoded nothing)
    spec_accept_length DOUBLE,        -- time-weighted mean of the servers' sglang:spec_accept_length over the measured window: tokens a decode step gives a request with speculative decoding (tokens per step; null: no speculative decoding reported)
    prefill_token_weight DOUBLE,      -- GPU time of an uncached prompt token against an output token, both measured on this run: (mean running requests per worker) / (peak_prefill_tokens_per_ms x p50_tpot_ms), i.e. the fastest prefill seen against a decode step shared by the batch (ratio; null: no occupancy samples or TPOT)
    gpu_utilisation_pct DOUBLE,       -- mean of measured gpu_samples.utilisation_pct in the measured window (%; null when unmeasured)
    sm_active_pct DOUBLE,             -- mean of measured gpu_samples.sm_active_pct in the measured window (%; null when unmeasured)
    dram_active_pct DOUBLE,           -- mean of measured gpu_samples.dram_active_pct in the measured window (%; null when unmeasured)
    gpu_metrics_source VARCHAR,       -- where the GPU numbers come from: nvml | dcgm (measured) | twin (modelled from the twin's own steps) (null when unmeasured)
    server_sample_count BIGINT NOT NULL,  -- server_samples rows of the run (count)
    gpu_sample_count BIGINT NOT NULL, -- gpu_samples rows of the run with a measured utilisation (count)
    p50_ttft_ms DOUBLE,               -- median ttft_ms of completed requests, linear interpolation like every percentile here (ms)
    p90_ttft_ms DOUBLE,               -- 90th percentile ttft_ms of completed requests (ms)
    p95_ttft_ms DOUBLE,               -- 95th percentile ttft_ms of completed requests (ms)
    p99_ttft_ms DOUBLE,               -- 99th percentile ttft_ms of completed requests (ms)
    p50_ttfa_ms DOUBLE,               -- median time to first answer token from send, completed requests (ms)
    p90_ttfa_ms DOUBLE,               -- 90th percentile ttfa_ms (ms)
    p95_ttfa_ms DOUBLE,               -- 95th percentile ttfa_ms (ms)
    p99_ttfa_ms DOUBLE,               -- 99th percentile ttfa_ms (ms)
    p50_itl_ms DOUBLE,                -- median inter-token latency: every gap between consecutive chunks of completed requests divided by tokens_per_chunk_gap, one observation per gap (ms per token)
    p90_itl_ms DOUBLE,                -- 90th percentile of the same gaps (ms per token)
    p95_itl_ms DOUBLE,                -- 95th percentile of the same gaps (ms per token)
    p99_itl_ms DOUBLE,                -- 99th percentile of the same gaps (ms per token)
    p50_tpot_ms DOUBLE,               -- median tpot_ms of completed requests (ms per token)
    p90_tpot_ms DOUBLE,               -- 90th percentile tpot_ms (ms per token)
    p95_tpot_ms DOUBLE,               -- 95th percentile tpot_ms (ms per token)
    p99_tpot_ms DOUBLE,               -- 99th percentile tpot_ms (ms per token)
    p50_e2e_ms DOUBLE,                -- median e2e_ms of completed requests (ms)
    p90_e2e_ms DOUBLE,                -- 90th percentile e2e_ms (ms)
    p95_e2e_ms DOUBLE,                -- 95th percentile e2e_ms (ms)
    p99_e2e_ms DOUBLE,                -- 99th percentile e2e_ms (ms)
    p95_e2e_from_schedule_ms DOUBLE,  -- 95th percentile e2e_from_schedule_ms: latency the user saw, client delays included (ms)
    p95_queue_share DOUBLE,           -- over completed requests with e2e_from_schedule_ms >= its p95: sum of queue_ms / sum of e2e_from_schedule_ms; queue_ms = time from the schedule to the send (holds and lag) + max(0, server_queue_time_s) when every such request reports it (server), else max(0, ttft_from_schedule_ms - uncached prompt tokens / the run's fastest observed prefill rate) (modelled) (ratio 0-1)
    queue_share_source VARCHAR,       -- server (p95_queue_share from meta_info.queue_time) | modelled (the prefill-rate estimate: no queue_time reported) | null (no share)
    reasoning_token_share DOUBLE,     -- sum reasoning_tokens / sum completion_tokens over completed requests reporting both (ratio 0-1)
    slo_ttft_ms DOUBLE,               -- runs.slo_ttft_ms
    slo_tpot_ms DOUBLE,               -- runs.slo_tpot_ms
    good_requests BIGINT,             -- completed requests with ttft_from_schedule_ms <= slo_ttft_ms and tpot_ms <= slo_tpot_ms (a missing SLO or a null tpot passes that part) (count; null without an SLO)
    goodput DOUBLE,                   -- good_requests / (completed + failed requests) (ratio 0-1; null without an SLO)
    goodput_rps DOUBLE,               -- good_requests / window_s (requests/s)
    sustained_output_tokens_per_s DOUBLE,  -- output_tokens / window_s (tokens/s)
    target_rps DOUBLE,                -- runs.target_rps (requests/s)
    replicas_for_target DOUBLE,       -- workers of this endpoint's kind (gpu_count / replicas GPUs each) to carry the target inside the SLO: the fleet plan's chosen replicas (fleet_plan_shapes.chosen); without a plan, ceil(target_rps x replicas / capacity_rps_at_slo), or with no capacity ceil(target_rps x replicas / goodput_rps), conservative when the run was not saturated (count)
    replicas_for_target_source VARCHAR,  -- where replicas_for_target came from: fleet_plan | capacity | goodput (null: no target_rps)
    fleet_plan_policy VARCHAR,        -- the chosen plan's router policy (null: no plan, or no shape held the target)
    fleet_usd_per_hour DOUBLE,        -- replicas_for_target x gpu_count / replicas x usd_per_gpu_hour (USD per hour)
    budget_usd_per_request DOUBLE,    -- runs.budget_usd_per_request (USD)
    prefix_reuse_share DOUBLE,        -- runs.prefix_reuse_share (ratio 0-1)
    structured_requests BIGINT,       -- completed requests that carried a response format, their answer validated (answer_valid not null) (count)
    constrained_requests BIGINT,      -- of those, the ones whose format was sent to the server as a constraint (constrained) (count)
    valid_answers BIGINT,             -- of the structured requests, those whose answer validated against its format (count)
    valid_answer_rate DOUBLE,         -- valid_answers / structured_requests (ratio 0-1; null without structured requests)
    usd_per_valid_request DOUBLE,     -- realised_cost_per_request_usd / valid_answer_rate: what one parseable answer costs when every invalid one is sent again (USD; null when none valid)
    retries DOUBLE,                   -- structured_requests x (1 / valid_answer_rate - 1): extra requests expected until every structured answer is valid, each retry failing at the same rate (count; null when none valid)
    tpot_constrained_ms DOUBLE,       -- median tpot_ms of completed requests with constrained = true: decoding under the grammar (ms per token; null = none)
    tpot_unconstrained_ms DOUBLE,     -- median tpot_ms of the other completed requests (ms per token)
    min_valid_rate DOUBLE,            -- runs.min_valid_rate (ratio 0-1)
    role VARCHAR,                     -- runs.role: live | canary (null: not recorded)
    traffic_share DOUBLE,             -- runs.traffic_share (ratio 0-1)
    price_book VARCHAR,               -- runs.price_book: where usd_per_gpu_hour came from ('endpoint': the endpoint's own figure)
    capacity_rps_at_slo DOUBLE,       -- runs.capacity_rps_at_slo: highest rate sustained inside the SLO on this workload (requests/s; null: not measured)
    capacity_source VARCHAR,          -- runs.capacity_source: how capacity_rps_at_slo was found (twin_sweep | rate_ramp | shadow_twin; null: not measured)
    capacity_ramp_gpu_minutes DOUBLE, -- runs.capacity_ramp_gpu_minutes: the GPU time the real endpoint's rate ramp cost, on the run after whose replay it ran (GPU-minutes; null: no ramp)
    efficiency_cost_per_request_usd DOUBLE,  -- the efficiency cost: gpu_count x usd_per_gpu_hour / 3600 / capacity_rps_at_slo, what a request costs on this endpoint loaded to what it holds inside the SLO on this traffic; moves only with the runtime, the traffic's shape and the price, never with its volume (USD; null: no capacity)
    load_share_of_capacity DOUBLE,    -- completed_requests / window_s / capacity_rps_at_slo: how much of its SLO capacity the window's traffic used (ratio; above 1: overloaded)
    load_state VARCHAR,               -- idle_capacity (load_share_of_capacity <= 1) | overloaded (above 1) (null: no capacity)
    idle_cost_per_request_usd DOUBLE, -- realised_cost_per_request_usd - efficiency_cost_per_request_usd: the idle GPU time in each request's realised cost (USD; null when overloaded or without a capacity: never negative)
    load_note VARCHAR,                -- the load in words: the rate served against the capacity and the idle share, or that the run was overloaded and why its realised cost is below the efficiency cost
    break_even_rps DOUBLE,            -- gpu_count x usd_per_gpu_hour / 3600 / api_cost_per_request_usd: requests/s above which one replica costs less per request than the API; reachable inside the SLO only up to capacity_rps_at_slo (requests/s)
    replicas INTEGER,                 -- runs.replicas: SGLang workers serving the endpoint (count; null: recorded before fleets)
    router_policy VARCHAR,            -- runs.router_policy: the fleet's smg --policy (null: no router block, or recorded before fleets)
    router_args_json VARCHAR,         -- runs.router_args_json: the router's other flags (JSON list)
    single_replica_hit_rate DOUBLE,   -- runs.single_replica_hit_rate: one replica on the twin, the window's first 300 requests (ratio 0-1; null: not a twin fleet)
    fleet_model_hit_rate DOUBLE,      -- runs.fleet_model_hit_rate: the same requests through the fleet's router model (ratio 0-1; null: not a twin fleet)
    workers_served BIGINT,            -- run_workers rows with a named worker: workers that served at least one completed request (count; null: no request named its worker)
    max_worker_share DOUBLE,          -- largest run_workers.request_share of a named worker: the busiest worker's share of the completed requests (ratio 0-1; 1 / replicas is even; null: no request named its worker)
    degraded BOOLEAN,                 -- runs.degraded: a worker or the router stopped answering for part of the measured window; the run is priced for the whole fleet, served with less (null: not probed, or recorded before fleet health)
    degraded_reason VARCHAR,          -- runs.degraded_reason: each lost worker or router, when it stopped answering and for how long (null unless degraded)
    schedule_lag_p99_ms DOUBLE,       -- p99 send time minus scheduled time, from the client (ms)
    client_degraded BOOLEAN NOT NULL, -- the client fell behind its schedule: latency from send understates
    partial BOOLEAN NOT NULL,         -- the run did not finish
    shadow_output_tokens_per_s_ratio DOUBLE,  -- runs.shadow_output_tokens_per_s_ratio: twin / real sustained output tokens/s of the run's shadow canary (ratio; null: no shadow)
    shadow_p50_ttft_ratio DOUBLE,     -- runs.shadow_p50_ttft_ratio: twin / real median TTFT (ratio; null: no shadow)
    shadow_p50_tpot_ratio DOUBLE      -- runs.shadow_p50_tpot_ratio: twin / real median TPOT (ratio; null: no shadow)
);

-- One row per run x worker that served its completed requests: how the router spread them and what each
-- worker's cache realised (warehouse/sql/run_workers.sql). A single server's requests name no worker: one row,
-- worker null.
CREATE OR REPLACE TABLE run_workers (
    run_id VARCHAR NOT NULL,          -- the replay (runs.run_id)
    week_start DATE NOT NULL,         -- Monday that starts the week
    scenario VARCHAR NOT NULL,        -- scenario name
    worker VARCHAR,                   -- requests.worker: the URL smg named in x-smg-routed-worker-id (null: no router named one: a single server, or not through smg)
    completed_requests BIGINT NOT NULL,  -- completed requests this worker served (count)
    request_share DOUBLE NOT NULL,    -- completed_requests / the run's completed requests (ratio 0-1)
    hit_rate_prompt_tokens BIGINT,    -- sum of prompt_tokens over its completed requests reporting both prompt and cached tokens (tokens)
    hit_rate_cached_tokens BIGINT,    -- sum of cached_tokens over the same requests (tokens)
    prefix_cache_hit_rate DOUBLE,     -- hit_rate_cached_tokens / hit_rate_prompt_tokens: what this worker's cache realised (ratio 0-1; null when not reported)
    p95_ttft_ms DOUBLE                -- 95th percentile ttft_ms of its completed requests (ms)
);

-- Where the time to first token goes: one row per week x scenario, the mean over its completed requests of each part
-- of the TTFT the server reported (requests.ttft_*_ms) and of what no reported part accounts for
-- (warehouse/sql/ttft_parts.sql). A request without a part counts 0 there, so the parts' means and the unreported
-- mean add up to mean_ttft_ms.
CREATE OR REPLACE TABLE ttft_parts (
    week_start DATE NOT NULL,         -- Monday that starts the week
    scenario VARCHAR NOT NULL,        -- scenario name
    role VARCHAR,                     -- runs.role: live | canary (null: not recorded)
    completed_requests BIGINT NOT NULL,  -- completed requests of the week's runs of the scenario (count)
    reporting_requests BIGINT NOT NULL,  -- of those, the requests the server reported at least one part of the TTFT for (count)
    mean_ttft_ms DOUBLE NOT NULL,     -- mean ttft_ms of the completed requests (ms)
    mean_ttft_prealloc_ms DOUBLE,     -- mean requests.ttft_prealloc_ms, 0 where a request has none: the decode server's prealloc queue (ms; null: no request reported it)
    mean_ttft_bootstrap_ms DOUBLE,    -- mean requests.ttft_bootstrap_ms, the same way: the bootstrap with the prefill server (ms; null: no request reported it)
    mean_ttft_queue_ms DOUBLE,        -- mean requests.ttft_queue_ms, the same way: the waiting queue before the first forward batch (ms; null: no request reported it)
    mean_ttft_prefill_ms DOUBLE,      -- mean requests.ttft_prefill_ms, the same way: the first forward batch to the first token sampled (ms; null: no request reported it)
    mean_ttft_kv_transfer_ms DOUBLE,  -- mean requests.ttft_kv_transfer_ms, the same way: the KV transfer from prefill to decode (ms; null: no request reported it)
    mean_ttft_decode_wait_ms DOUBLE,  -- mean requests.ttft_decode_wait_ms, the same way: the KV's arrival to the decode server's first token (ms; null: no request reported it)
    mean_ttft_unreported_ms DOUBLE NOT NULL  -- mean of ttft_ms minus the parts each request reported: what the server did not report, and the network and router between client and server (ms)
);

-- The fleet plans priced: one row per run x shape tried x price book of the endpoint's GPU type (and the run's
-- own price when it is no book), from fleet_plan_shapes, run_summary and price_books (warehouse/sql/fleet_plans.sql).
-- Across books the chosen shape is the same: every GPU of a shape is priced alike, so fewer GPUs cost less in all.
CREATE OR REPLACE TABLE fleet_plans (
    run_id VARCHAR NOT NULL,          -- the run whose window was planned (runs.run_id)
    week_start DATE NOT NULL,         -- Monday that starts the week
    scenario VARCHAR NOT NULL,        -- scenario name
    endpoint VARCHAR NOT NULL,        -- the endpoint whose replica the shapes repeat
    gpu_type VARCHAR NOT NULL,        -- GPU model of every shape
    target_rps DOUBLE NOT NULL,       -- fleet_plan_shapes.target_rps (requests/s)
    slo_ttft_ms DOUBLE,               -- run_summary.slo_ttft_ms
    slo_tpot_ms DOUBLE,               -- run_summary.slo_tpot_ms
    replicas INTEGER NOT NULL,        -- fleet_plan_shapes.replicas (count)
    prefill_workers INTEGER NOT NULL, -- fleet_plan_shapes.prefill_workers (count; 0: aggregated replicas)
    decode_workers INTEGER NOT NULL,  -- fleet_plan_shapes.decode_workers (count; 0: aggregated replicas)
    decode_ep_size INTEGER NOT NULL,  -- fleet_plan_shapes.decode_ep_size (count; 0: the endpoint's kind of decode worker)
    router_policy VARCHAR NOT NULL,   -- fleet_plan_shapes.router_policy
    gpus INTEGER NOT NULL,            -- fleet_plan_shapes.gpus (count)
    holds_target BOOLEAN NOT NULL,    -- fleet_plan_shapes.holds_target
    good_share DOUBLE NOT NULL,       -- fleet_plan_shapes.good_share (ratio 0-1)
    p95_ttft_ms DOUBLE NOT NULL,      -- fleet_plan_shapes.p95_ttft_ms (ms)
    hit_rate DOUBLE NOT NULL,         -- fleet_plan_shapes.hit_rate (ratio 0-1)
    max_worker_share DOUBLE NOT NULL, -- fleet_plan_shapes.max_worker_share (ratio 0-1)
    capacity_rps_at_slo DOUBLE,       -- fleet_plan_shapes.capacity_rps_at_slo (requests/s; null: not swept)
    chosen BOOLEAN NOT NULL,          -- fleet_plan_shapes.chosen
    price_book VARCHAR NOT NULL,      -- the price book (price_books.name), or the run's own price_book ('endpoint': the endpoint's own figure)
    run_price BOOLEAN NOT NULL,       -- this is the price the run's own cost used (run_summary.usd_per_gpu_hour)
    usd_per_gpu_hour DOUBLE NOT NULL, -- the book's price of one GPU for one hour (USD)
    fleet_usd_per_hour DOUBLE NOT NULL,  -- gpus x usd_per_gpu_hour (USD per hour)
    usd_per_request_at_target DOUBLE NOT NULL,  -- fleet_usd_per_hour / 3600 / target_rps: a request's cost when the fleet carries the target (USD)
    usd_per_request_at_slo DOUBLE,    -- fleet_usd_per_hour / 3600 / capacity_rps_at_slo: a request's cost when the fleet carries as much as its SLO allows (USD; null: not swept)
    api_cost_per_request_usd DOUBLE,  -- run_summary.api_cost_per_request_usd: this window's requests at API prices (USD; null: no API price for the model)
    break_even_rps DOUBLE             -- fleet_usd_per_hour / 3600 / api_cost_per_request_usd: the rate above which this fleet costs less per request than the API (requests/s)
);

CREATE OR REPLACE TABLE cost_intervals (
    week_start DATE NOT NULL,         -- Monday that starts the week
    scenario VARCHAR NOT NULL,        -- scenario name
    endpoint VARCHAR NOT NULL,        -- endpoint name
    backend VARCHAR NOT NULL,         -- 'sim' or 'sglang'
    config_fingerprint VARCHAR,       -- configuration the row pools
    blocks BIGINT NOT NULL,           -- time blocks resampled (count)
    realised_cost_low_usd DOUBLE,     -- 2.5th percentile of the block-bootstrap realised cost per request (USD)
    realised_cost_high_usd DOUBLE,    -- 97.5th percentile of the block-bootstrap realised cost per request (USD)
    hit_rate_low DOUBLE,              -- 2.5th percentile of the block-bootstrap client prefix-cache hit rate (ratio 0-1)
    hit_rate_high DOUBLE,             -- 97.5th percentile of the same (ratio 0-1)
    p95_ttft_low_ms DOUBLE,           -- 2.5th percentile of the block-bootstrap p95 TTFT, from 1%-wide log bins (ms)
    p95_ttft_high_ms DOUBLE,          -- 97.5th percentile of the same (ms)
    efficiency_cost_low_usd DOUBLE,   -- the week's efficiency cost per request (request-weighted over runs with a capacity) x exp(-t(0.975, df) x efficiency_run_sd_log / sqrt(runs)): from the spread between the runs' own capacity sweeps; the point itself while that spread is unknown (USD; null: no capacity)
    efficiency_cost_high_usd DOUBLE,  -- the same with exp(+...) (USD)
    -- The bounds above are widened by the spread between runs (warehouse/marts/bootstrap_interval.py):
    runs BIGINT NOT NULL,             -- runs the row pools (count)
    run_spread_df BIGINT NOT NULL,    -- degrees of freedom of the pooled run-to-run spread (0: not known, one run a week)
    cost_run_sd_log DOUBLE,           -- sd between runs of ln(cost per request), pooled (null when run_spread_df is 0)
    p95_ttft_run_sd_log DOUBLE,       -- sd between runs of ln(p95 TTFT), pooled (null when run_spread_df is 0)
    hit_rate_run_sd DOUBLE,           -- sd between runs of the hit rate, pooled (ratio 0-1; null when run_spread_df is 0)
    efficiency_run_sd_log DOUBLE      -- sd between runs of ln(efficiency cost per request), pooled over runs with a capacity (null: unknown)
);

CREATE OR REPLACE TABLE weekly_trends (
    week_start DATE NOT NULL,         -- Monday that starts the week
    scenario VARCHAR NOT NULL,        -- scenario name
    endpoint VARCHAR NOT NULL,        -- endpoint name
    backend VARCHAR NOT NULL,         -- 'sim' or 'sglang'; never pooled together
    config_fingerprint VARCHAR,       -- configuration of the pooled runs (null: not recorded, runs written before schema version 2); baselines only use weeks with the same one
    role VARCHAR,                     -- the scenario's role (runs.role): canary rows are judged by the regression rule, live rows carry the cost trend (null: not recorded, judged like a canary)
    config_changed BOOLEAN NOT NULL,  -- the scenario and endpoint's most recent earlier week ran another configuration, both recorded (an unrecorded one is not a change)
    revision_note VARCHAR,            -- the runs' revision_note: why the endpoints.yaml revision in force changed the server's flags ('; '-joined when the runs differ; null: none)
    runs BIGINT NOT NULL,             -- replays pooled into this row (count)
    completed_requests BIGINT NOT NULL,  -- status ok, not warm-up, over the runs (count)
    failed_requests BIGINT NOT NULL,  -- status error or timeout, not warm-up, over the runs (count)
    efficiency_cost_per_request_usd DOUBLE,  -- the efficiency cost, the week's headline: sum over the runs with a capacity of run_summary.efficiency_cost_per_request_usd x completed_requests / their completed requests; what a request costs on this endpoint loaded to its SLO capacity on this traffic: moves with the runtime, the traffic's shape and the price, not with its volume (USD; null: no capacity measured or modelled)
    realised_cost_per_request_usd DOUBLE,  -- the realised cost: replay_cost_usd / completed requests of those runs; what the GPUs cost over the windows per request served: moves with the traffic's volume too (USD)
    idle_cost_per_request_usd DOUBLE, -- realised_cost_per_request_usd - efficiency_cost_per_request_usd: the idle capacity in each request's realised cost (USD; null when overloaded or without a capacity)
    load_state VARCHAR,               -- idle_capacity | overloaded (load_share_of_capacity above 1: the traffic was past what the SLO allows, so there is no idle part; the realised cost is then below the efficiency cost) (null: no capacity)
    load_share_of_capacity DOUBLE,    -- sum over those runs of completed_requests / capacity_rps_at_slo / their window_s: the share of the SLO capacity the traffic used (ratio; above 1: overloaded)
    capacity_rps_at_slo DOUBLE,       -- the runs' capacities at the SLO, pooled as the efficiency cost pools them: their completed requests / sum of completed_requests / capacity_rps_at_slo (requests/s)
    capacity_source VARCHAR,          -- run_summary.capacity_source of the runs: twin_sweep | rate_ramp | shadow_twin (null: none)
    replay_cost_usd DOUBLE,           -- sum of run_cost_usd over the runs with a known window: the replay windows' GPU cost, not the week's spend (USD)
    week_spend_usd DOUBLE,            -- the endpoint's GPUs for the whole week at its price: the largest run_summary.week_spend_usd of the runs (gpu_count x usd_per_gpu_hour x hours_per_week; one endpoint's runs of a week share it), whatever was replayed; every row of the endpoint's week carries it, so sum it per endpoint, not per scenario (USD)
    cost_per_mtok_output_usd DOUBLE,  -- replay_cost_usd / (output tokens of those runs / 1e6) (USD per million output tokens)
    api_cost_per_request_usd DOUBLE,  -- sum of api_cost_usd / completed requests of the runs with an API price (USD)
    p50_ttft_ms DOUBLE,               -- median ttft_ms over the completed requests of all runs (ms)
    p95_ttft_ms DOUBLE,               -- 95th percentile ttft_ms over the same requests (ms)
    p50_e2e_ms DOUBLE,                -- median e2e_ms over the same requests (ms)
    p95_e2e_ms DOUBLE,                -- 95th percentile e2e_ms over the same requests (ms)
    prefix_cache_hit_rate DOUBLE,     -- sum of cached / sum of prompt tokens over the runs (ratio 0-1; null when not reported)
    goodput DOUBLE,                   -- sum of good_requests / sum of completed + failed requests of the runs with an SLO (ratio 0-1)
    sustained_output_tokens_per_s DOUBLE,  -- sum of output tokens / sum of window_s over the runs (tokens/s)
    structured_requests BIGINT,       -- sum of run_summary.structured_requests: completed requests with a response format (count)
    constrained_requests BIGINT,      -- sum of run_summary.constrained_requests: those constrained on the server (count)
    valid_answers BIGINT,             -- sum of run_summary.valid_answers (count)
    valid_answer_rate DOUBLE,         -- valid_answers / structured_requests (ratio 0-1; null without structured requests)
    usd_per_valid_request DOUBLE,     -- realised_cost_per_request_usd / valid_answer_rate (USD; null when none valid)
    retries DOUBLE,                   -- structured_requests x (1 / valid_answer_rate - 1): extra requests expected until every answer is valid (count)
    tpot_constrained_ms DOUBLE,       -- median tpot_ms over the completed constrained requests of all runs (ms per token)
    tpot_unconstrained_ms DOUBLE,     -- median tpot_ms over the other completed requests of all runs (ms per token)
    min_valid_rate DOUBLE,            -- the strictest runs.min_valid_rate of the runs: the quality check fails the week when a constrained valid_answer_rate is below it (ratio 0-1)
    prev_week_start DATE,             -- the week the *_wow_* changes compare with: the scenario, endpoint and backend's most recent earlier week (its lake complete), whatever configuration it ran (config_changed: another one); its row of this configuration if it ran one, else its row with the most completed requests (null: no earlier week)
    efficiency_cost_wow_change_pct DOUBLE,  -- 100 x (efficiency_cost_per_request_usd - prev_week_start's) / prev_week_start's (%)
    realised_cost_wow_change_pct DOUBLE,  -- 100 x (realised_cost_per_request_usd - prev_week_start's) / prev_week_start's (%)
    p95_ttft_wow_change_pct DOUBLE,   -- 100 x (p95_ttft_ms - prev_week_start's) / prev_week_start's (%)
    hit_rate_wow_change_pts DOUBLE,   -- 100 x (prefix_cache_hit_rate - prev_week_start's) (percentage points)
    baseline_weeks BIGINT NOT NULL,   -- earlier weeks in the baseline: up to the 4 most recent with the same scenario, endpoint, backend and fingerprint; for a week whose configuration changed (or is not known to be the same) and has none, the 4 most recent of any configuration (count)
    baseline_source VARCHAR,          -- same_config | previous_config (the configuration changed this week) | unrecorded_config (this or the previous week's configuration was not recorded) | null (no baseline)
    baseline_efficiency_cost_per_request_usd DOUBLE,  -- median efficiency_cost_per_request_usd of the baseline weeks (USD; null when none)
    baseline_realised_cost_per_request_usd DOUBLE,  -- median realised_cost_per_request_usd of the baseline weeks (USD; null when none)
    baseline_p95_ttft_ms DOUBLE,      -- median p95_ttft_ms of the baseline weeks (ms)
    baseline_prefix_cache_hit_rate DOUBLE,  -- median prefix_cache_hit_rate of the baseline weeks (ratio 0-1)
    efficiency_cost_change_pct DOUBLE,  -- 100 x (efficiency_cost_per_request_usd - baseline) / baseline (%; null without a baseline): what the regression rule judges on cost
    realised_cost_change_pct DOUBLE,  -- 100 x (realised_cost_per_request_usd - baseline) / baseline (%; null without a baseline): not judged (traffic volume moves it); cost_attribution says why it moved
    p95_ttft_change_pct DOUBLE,       -- 100 x (p95_ttft_ms - baseline) / baseline (%)
    hit_rate_change_pts DOUBLE,       -- 100 x (prefix_cache_hit_rate - baseline) (percentage points)
    efficiency_cost_low_usd DOUBLE,   -- this week's 95% interval for the efficiency cost, low end: from the spread between runs' own capacity sweeps (cost_intervals) (USD)
    efficiency_cost_high_usd DOUBLE,  -- the same interval, high end (USD)
    realised_cost_low_usd DOUBLE,     -- this week's 95% block-bootstrap interval for the realised cost per request, low end (USD)
    realised_cost_high_usd DOUBLE,    -- the same interval, high end (USD)
    hit_rate_low DOUBLE,              -- this week's 95% block-bootstrap interval for the hit rate, low end (ratio 0-1)
    hit_rate_high DOUBLE,             -- the same interval, high end (ratio 0-1)
    p95_ttft_low_ms DOUBLE,           -- this week's 95% block-bootstrap interval for p95 TTFT, low end (ms)
    p95_ttft_high_ms DOUBLE,          -- the same interval, high end (ms)
    regression_verdict VARCHAR NOT NULL,  -- regression (a metric past its threshold and outside this week's noise) | sustained (a regression the week after one) | drift (a change point over the canary's weeks that no week's threshold caught: drift_start_week) | within_noise (past a threshold, inside the noise) | ok | no_baseline; judged on canary rows (and rows without a role) only: live rows are not_judged (their traffic moves), and so is a week whose lake is incomplete (caveats)
    regression_reasons VARCHAR,       -- JSON list of what moved, by how much, against which threshold and interval, led for a week whose configuration changed (config_changed, live rows too) by 'configuration changed this week: <field>: <before> -> <now>, ...' (each server fact that changed against the most recent earlier week, as cost_attribution.runtime_changes names them) with the revision_note; for a week whose lake is incomplete, why it is not judged and what the lake lacks (null when ok and the configuration did not change)
    regressed_metrics VARCHAR,        -- JSON list of the metrics that regressed (efficiency_cost_per_request_usd, p95_ttft_ms, prefix_cache_hit_rate; null unless regression or sustained)
    drift_start_week DATE,            -- drift: the Monday of the first week after the change point (null unless drift)
    drift_metrics VARCHAR,            -- drift: JSON list of the metrics that drifted (null unless drift)
    cost_threshold_pct DOUBLE,        -- the regression rule's threshold on efficiency_cost_change_pct (%)
    p95_ttft_threshold_pct DOUBLE,    -- the regression rule's threshold on p95_ttft_change_pct (%)
    hit_rate_threshold_pts DOUBLE,    -- the regression rule's threshold on hit_rate_change_pts (percentage points; negative: a fall)
    degraded_runs BIGINT NOT NULL,    -- runs of the row whose fleet lost a worker or its router mid-run (run_summary.degraded) (count)
    caveats VARCHAR                   -- JSON list of what makes the row's figures less than whole: 'lake: <table> partition missing: ...' or 'lake: <table> file quarantined: ...' (the week is then not judged) and 'fleet degraded: run <id>: <reason>' (null when none)
);

-- Cost attribution (warehouse/sql/cost_attribution.sql; docs/warehouse.md "Cost attribution"). Why the realised
-- cost per request moved against weekly_trends' baseline, in parts that add up to the change exactly:
--   change_usd = price_usd + traffic_usd + runtime_usd + unattributed_usd
--   traffic_usd = traffic_volume_usd (the idle share) + traffic_mix_usd + traffic_prefix_reuse_usd
--   runtime_usd = prefix_cache_usd + batching_usd + speculative_decoding_usd + routing_usd + structured_output_usd
-- Method: the realised cost per request is a product of pooled factors (price, paid over capacity GPU-hours, tokens
-- per request, offered and realised work, the runtime levers, and the work the batch gets through per GPU-hour at
-- capacity) that telescopes to it exactly; work weighs an uncached prompt token by prefill_token_weight.
-- Each factor's part is its log-mean (LMDI) share of the change, (c - c0) / (ln c - ln c0) x ln(f / f0): no
-- residual, no order. Against a median of an even number of weeks, the mean of the decompositions against the
-- middle two. unattributed_usd holds the parts whose factor is unknown on either side (0 when every factor is known).
CREATE OR REPLACE TABLE cost_attribution (
    week_start DATE NOT NULL,         -- Monday that starts the week
    scenario VARCHAR NOT NULL,        -- scenario name
    endpoint VARCHAR NOT NULL,        -- endpoint name
    backend VARCHAR NOT NULL,         -- 'sim' or 'sglang'
    config_fingerprint VARCHAR,       -- configuration of the pooled runs (weekly_trends.config_fingerprint)
    role VARCHAR,                     -- live | canary (weekly_trends.role)
    baseline_source VARCHAR,          -- weekly_trends.baseline_source: which earlier weeks the baseline is the median of (null: none)
    baseline_weeks BIGINT NOT NULL,   -- weekly_trends.baseline_weeks (count)
    baseline_median_weeks VARCHAR,    -- the baseline week(s) the median is made of, comma-separated: the parts are decomposed against them
    realised_cost_per_request_usd DOUBLE,  -- weekly_trends.realised_cost_per_request_usd (USD)
    baseline_realised_cost_per_request_usd DOUBLE,  -- the baseline median: equals weekly_trends.baseline_realised_cost_per_request_usd (USD; null without a baseline)
    change_usd DOUBLE,                -- realised_cost_per_request_usd - baseline_realised_cost_per_request_usd: what the parts add up to (USD per request)
    price_usd DOUBLE,                 -- part from the price per GPU-hour (the price book) (USD per request)
    traffic_usd DOUBLE,               -- traffic_volume_usd + traffic_mix_usd + traffic_prefix_reuse_usd (USD per request)
    traffic_volume_usd DOUBLE,        -- part from paid GPU-hours over the GPU-hours the requests need at the SLO capacity: the idle share, which falls as more traffic fills the same GPUs (USD per request)
    traffic_mix_usd DOUBLE,           -- part from input + output (reasoning included) tokens per request (USD per request)
    traffic_prefix_reuse_usd DOUBLE,  -- part from the work left after the prefix reuse the traffic offers (runs.prefix_reuse_share) (USD per request)
    runtime_usd DOUBLE,               -- the runtime's efficiency: prefix_cache_usd + batching_usd + speculative_decoding_usd + routing_usd + structured_output_usd (USD per request)
    prefix_cache_usd DOUBLE,          -- part from the work the prefix cache realised against what the traffic offered (cached_tokens; uncached prompt tokens weighed by prefill_token_weight) (USD per request)
    batching_usd DOUBLE,              -- part from the GPU-hours a unit of realised work takes at the SLO capacity, the three levers below taken out: how much work the runtime's batch gets through inside the SLO (batch size, scheduling, how prefill crowds decode under the TTFT SLO, kernels, the node's speed) (USD per request)
    speculative_decoding_usd DOUBLE,  -- part from decode steps per token, 1 / spec_accept_length (1 without speculative decoding) (USD per request)
    routing_usd DOUBLE,               -- part from the fleet's load imbalance, workers_served x max_worker_share (1: even, or one server) (USD per request)
    structured_output_usd DOUBLE,     -- part from constrained decoding's slower steps: 1 + constrained share x (tpot_constrained_ms / tpot_unconstrained_ms - 1) (USD per request)
    unattributed_usd DOUBLE,          -- change_usd minus the known parts: the parts of factors unknown on either side (USD per request; 0 when all are known)
    capacity_known BOOLEAN,           -- both sides had capacity_rps_at_slo, so the idle share is split from the runtime
    usd_per_gpu_hour DOUBLE,          -- this week's pooled price: cost / paid GPU-hours (USD)
    input_tokens_per_request DOUBLE,  -- prompt tokens per completed request (tokens)
    output_tokens_per_request DOUBLE, -- completion tokens, reasoning included, per completed request (tokens)
    reasoning_tokens_per_request DOUBLE,  -- reasoning tokens per completed request (tokens; null when not reported)
    prefill_token_weight DOUBLE,      -- this week's run_summary.prefill_token_weight, request-weighted (ratio; null: not measured on every run)
    replicas INTEGER,                 -- this week's run_summary.replicas (count; null: its runs differ, or one is not recorded)
    router_policy VARCHAR,            -- this week's run_summary.router_policy (null: no router, its runs differ, or not recorded)
    baseline_fleet VARCHAR,           -- the baseline median week(s)' fleet, e.g. '2 x round_robin' or '1 server', comma-separated when they differ (null: no baseline, or not recorded)
    routing_changed BOOLEAN,          -- the router's policy or flags, or the replica count, differ between this week and a baseline median week, both recorded: the runtime parts are (in part) a routing change's (null: no baseline, or a fleet not recorded)
    runtime_changes VARCHAR,          -- JSON list naming what changed in the runtime against the baseline median week(s): 'routing: <before> -> <now>', 'router flags: ...', 'replicas: ...', and each server fact of a new configuration that changed, '<field>: <before> -> <now>' ('configuration: <fingerprint> -> <fingerprint>' where the facts were not recorded) (null: no baseline; [] nothing recorded changed)
    revision_note VARCHAR             -- weekly_trends.revision_note: why the endpoints.yaml revision in force changed the server's flags (null: none)
);

CREATE OR REPLACE TABLE diagnoses (
    run_id VARCHAR NOT NULL,          -- the replay (run_summary.run_id)
    week_start DATE NOT NULL,         -- Monday that starts the week
    scenario VARCHAR NOT NULL,        -- scenario name
    endpoint VARCHAR NOT NULL,        -- endpoint name
    verdict VARCHAR NOT NULL,         -- runtime_lever | oversized | model_candidate | healthy | inconclusive (the four numbers, docs/warehouse.md)
    reasons VARCHAR NOT NULL,         -- JSON list of the reasons behind the verdict, each with its number and threshold
    prefix_cache_hit_rate DOUBLE,     -- client hit rate (server's when the client's is null) (ratio 0-1)
    prefix_reuse_share DOUBLE,        -- what an infinite cache could reuse in this workload (ratio 0-1)
    batch_occupancy DOUBLE,           -- run_summary.batch_occupancy (ratio; 1 = the batch at SLO capacity, above 1 past it)
    p95_queue_share DOUBLE,           -- run_summary.p95_queue_share (ratio 0-1)
    gpu_utilisation_pct DOUBLE,       -- run_summary.gpu_utilisation_pct (%)
    eager_decode_share DOUBLE,        -- run_summary.eager_decode_share: decode steps run without a CUDA graph (ratio 0-1; null: not exported)
    realised_cost_per_request_usd DOUBLE,      -- run_summary.realised_cost_per_request_usd (USD)
    efficiency_cost_per_request_usd DOUBLE,  -- run_summary.efficiency_cost_per_request_usd: what model_candidate and healthy judge against the budget where known (USD; null: no capacity, the realised cost is judged)
    budget_usd_per_request DOUBLE,    -- the scenario's budget, else the API-equivalent cost per request (USD)
    levers VARCHAR NOT NULL,          -- JSON list of the runtime levers that apply, by name: prefix_cache | routing | queueing | cuda_graphs ([] when none)
    replicas INTEGER,                 -- run_summary.replicas (count; null: recorded before fleets)
    router_policy VARCHAR,            -- run_summary.router_policy (null: no router block)
    single_replica_hit_rate DOUBLE,   -- runs.single_replica_hit_rate: one replica on the twin, the window's first requests (ratio 0-1; null: not a twin fleet)
    fleet_model_hit_rate DOUBLE       -- runs.fleet_model_hit_rate: the fleet's router model, the same requests; routing is judged on the gap (ratio 0-1; null: not a twin fleet)
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
