-- costbench warehouse schema: the documented contract for everything in warehouse/costbench.duckdb.
-- Every stored number carries its unit in its name (_s, _ms, _usd, _tokens, _pct) and a one-line
-- definition here. The lake (Parquet, one folder per week x scenario) is the source of truth; `runs`
-- and `requests` are views over it, `run_summary` and `weekly_trends` are tables rebuilt from them
-- by warehouse/sql/*.sql on every refresh.
--
-- @runs_files@ and @requests_files@ are replaced by warehouse/store.py with a quoted list of Parquet
-- paths: a zero-row file that pins the current columns and types, plus the lake glob when the lake
-- has files for the table. DuckDB cannot bind parameters in CREATE VIEW, so this is the one
-- substitution, of paths the store controls and escapes.
-- Times called *_mono_s are seconds on the replay's monotonic clock from the run's t0.

CREATE TABLE IF NOT EXISTS schema_version (
    version INTEGER NOT NULL  -- revision of this file the database was built with; bumped on incompatible changes
);
DELETE FROM schema_version;
INSERT INTO schema_version VALUES (1);

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
    usd_per_gpu_hour,         -- price of one GPU for one hour (USD)
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
    window_s,                 -- measured window, t0 to the last finish (s); the cost basis
    requests_total,           -- requests in the workload window (count)
    requests_recorded,        -- requests with a record (count)
    requests_ok,              -- requests with status ok, as the client counted them (count)
    schedule_lag_p50_ms,      -- median send time minus scheduled time (ms)
    schedule_lag_p99_ms,      -- p99 send time minus scheduled time (ms)
    schedule_lag_max_ms,      -- worst send time minus scheduled time (ms)
    client_degraded,          -- the client fell behind its schedule (lag p99 past the threshold)
    partial                   -- the run did not finish: only the requests that completed are recorded
FROM read_parquet(@runs_files@, hive_partitioning = true, union_by_name = true,
                  hive_types = {'week': DATE, 'scenario': VARCHAR});

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
    completion_tokens,        -- output length the server reported (tokens; null = not reported)
    cached_tokens,            -- prompt tokens served from the prefix cache, server-reported (tokens; null = not reported)
    reasoning_tokens,         -- reasoning tokens the server reported (tokens; null = not reported)
    finish_reason,            -- length | stop | abort
    http_status,              -- HTTP status code of the response
    status,                   -- ok | error | timeout | cancelled
    error_kind,               -- class of failure (null when ok)
    error_message,            -- failure detail (null when ok)
    server_e2e_latency_s,     -- end-to-end latency measured by the server (s)
    is_warmup,                -- sent before the measured window; excluded from every metric
    status = 'ok' AND NOT is_warmup AS is_completed,                     -- counts as a completed request of the measured window
    status IN ('error', 'timeout') AND NOT is_warmup AS is_failed,       -- counts as a failed request of the measured window
    (sent_mono_s - scheduled_mono_s) * 1000 AS schedule_lag_ms,          -- how late the client sent it (ms)
    (first_token_mono_s - sent_mono_s) * 1000 AS ttft_ms,                -- time to first token from send (ms)
    (first_token_mono_s - scheduled_mono_s) * 1000 AS ttft_from_schedule_ms,  -- time to first token from the schedule (ms)
    (first_answer_mono_s - sent_mono_s) * 1000 AS ttfa_ms,               -- time to first answer (non-reasoning) token from send (ms)
    (finish_mono_s - sent_mono_s) * 1000 AS e2e_ms,                      -- end-to-end latency from send (ms)
    (finish_mono_s - scheduled_mono_s) * 1000 AS e2e_from_schedule_ms,   -- end-to-end latency from the schedule; a lagging client cannot hide it (ms)
    (finish_mono_s - first_token_mono_s) * 1000
        / CASE WHEN completion_tokens > 1 THEN completion_tokens - 1 END AS tpot_ms  -- time per output token after the first (ms)
FROM read_parquet(@requests_files@, hive_partitioning = true, union_by_name = true,
                  hive_types = {'week': DATE, 'scenario': VARCHAR});

CREATE OR REPLACE TABLE run_summary (
    run_id VARCHAR NOT NULL,          -- the replay (runs.run_id)
    week_start DATE NOT NULL,         -- Monday that starts the week
    scenario VARCHAR NOT NULL,        -- scenario name
    endpoint VARCHAR NOT NULL,        -- endpoint name
    backend VARCHAR NOT NULL,         -- 'sim' (the twin: modelled cost) or 'sglang' (measured)
    model VARCHAR NOT NULL,           -- served model path
    gpu_type VARCHAR NOT NULL,        -- GPU model the price refers to
    gpu_count INTEGER NOT NULL,       -- GPUs the endpoint occupies (count)
    usd_per_gpu_hour DOUBLE NOT NULL, -- price of one GPU for one hour (USD)
    window_s DOUBLE,                  -- measured window, t0 to the last finish (s; warm-up excluded)
    run_cost_usd DOUBLE,              -- gpu_count x usd_per_gpu_hour x window_s / 3600 (USD)
    completed_requests BIGINT NOT NULL,  -- status ok, not warm-up (count)
    failed_requests BIGINT NOT NULL,  -- status error or timeout, not warm-up (count)
    cancelled_requests BIGINT NOT NULL,  -- status cancelled (the run stopped), not warm-up (count)
    output_tokens BIGINT,             -- sum of server-reported completion_tokens of completed requests (tokens; null = none reported)
    hit_rate_prompt_tokens BIGINT,    -- sum of prompt_tokens over completed requests reporting both prompt and cached tokens (tokens)
    hit_rate_cached_tokens BIGINT,    -- sum of cached_tokens over the same requests (tokens)
    cost_per_request_usd DOUBLE,      -- run_cost_usd / completed_requests (USD; null when none completed)
    cost_per_mtok_output_usd DOUBLE,  -- run_cost_usd / (output_tokens / 1e6) (USD per million output tokens)
    p50_ttft_ms DOUBLE,               -- median ttft_ms of completed requests (ms)
    p95_ttft_ms DOUBLE,               -- 95th percentile ttft_ms of completed requests, linear interpolation (ms)
    p50_e2e_ms DOUBLE,                -- median e2e_ms of completed requests (ms)
    p95_e2e_ms DOUBLE,                -- 95th percentile e2e_ms of completed requests, linear interpolation (ms)
    prefix_cache_hit_rate DOUBLE,     -- hit_rate_cached_tokens / hit_rate_prompt_tokens (ratio 0-1; null when not reported)
    output_tokens_per_s DOUBLE,       -- output_tokens / window_s (tokens/s)
    schedule_lag_p99_ms DOUBLE,       -- p99 send time minus scheduled time, from the client (ms)
    client_degraded BOOLEAN NOT NULL, -- the client fell behind its schedule: latency from send understates
    partial BOOLEAN NOT NULL          -- the run did not finish
);

CREATE OR REPLACE TABLE weekly_trends (
    week_start DATE NOT NULL,         -- Monday that starts the week
    scenario VARCHAR NOT NULL,        -- scenario name
    endpoint VARCHAR NOT NULL,        -- endpoint name
    backend VARCHAR NOT NULL,         -- 'sim' or 'sglang'; never pooled together
    runs BIGINT NOT NULL,             -- replays pooled into this row (count)
    completed_requests BIGINT NOT NULL,  -- status ok, not warm-up, over the runs (count)
    failed_requests BIGINT NOT NULL,  -- status error or timeout, not warm-up, over the runs (count)
    cost_usd DOUBLE,                  -- sum of run_cost_usd over the runs with a known window (USD)
    cost_per_request_usd DOUBLE,      -- cost_usd / completed requests of those runs (USD)
    cost_per_mtok_output_usd DOUBLE,  -- cost_usd / (output tokens of those runs / 1e6) (USD per million output tokens)
    p50_ttft_ms DOUBLE,               -- median ttft_ms over the completed requests of all runs (ms)
    p95_ttft_ms DOUBLE,               -- 95th percentile ttft_ms over the same requests, linear interpolation (ms)
    p50_e2e_ms DOUBLE,                -- median e2e_ms over the completed requests of all runs (ms)
    p95_e2e_ms DOUBLE,                -- 95th percentile e2e_ms over the same requests, linear interpolation (ms)
    prefix_cache_hit_rate DOUBLE,     -- sum of cached / sum of prompt tokens over the runs (ratio 0-1; null when not reported)
    baseline_weeks BIGINT NOT NULL,   -- earlier weeks (up to 4, same scenario, endpoint, backend) with a cost in the baseline (count)
    baseline_cost_per_request_usd DOUBLE,  -- median cost_per_request_usd of those weeks (USD; null when none)
    cost_change_pct DOUBLE            -- 100 x (cost_per_request_usd - baseline) / baseline (%; null without a baseline)
);
