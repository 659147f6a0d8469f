"""A hostile endpoint's echoes reach no file: a server that answers every request 401 with the run's own API key
in the body (as sent, JSON-escaped and percent-encoded), puts secrets in its /metrics label values, and serves a
/server_info whose model_path is an Azure SAS URL, is attached, probed, replayed and ingested into the warehouse;
then every byte the run wrote is searched.

The key has no shape a rule knows (only the run's own Authorization header says it is the key), so the search
shows the value itself is redacted. The SAS URL's other parts must still be where server facts are kept: the
search sees what is stored, not merely misses it.
"""

from __future__ import annotations

import secrets
from datetime import date
from urllib.parse import quote

import orjson
import pyarrow.parquet as pq
from aiohttp import web

from endpoints.probes.probe_records import (
    GPU_SAMPLE_SCHEMA,
    GPU_SAMPLES_FILE,
    SERVER_SAMPLE_SCHEMA,
    SERVER_SAMPLES_FILE,
)
from endpoints.probes.probe_session import probing
from endpoints.provision import provision
from endpoints.spec import EndpointMode, EndpointSpec
from endpoints_loopback import serve_in_thread
from redaction.secret_redaction import REDACTED
from replay.recording.requests_reader import read_requests
from replay.recording.run_json import read_run_json
from replay.recording.shard_merge import merge_shard_runs
from replay.runner import ReplayConfig, run_replay
from replay_sglang_peer import make_workload
from secret_corpus import secret_cases
from stored_text import decoded_text
from warehouse.backends.store import Warehouse
from warehouse.marts.run_rows import build_run_row
from warehouse.parquet.lake import write_partition

MONDAY = date(2026, 11, 16)
KEY_ENV = "COSTBENCH_TEST_ECHOED_KEY"
LABEL_SHAPES = ("github classic token", "slack webhook", "gcp service account json", "postgres url", "azure sas url",
                "s3 presigned url", "jwt", "databricks token")  # fmt: skip


def _echoing_app(api_key: str, sas_url: str, label_texts: list[str]) -> web.Application:
    """An SGLang look-alike that refuses every request, echoing the key, and leaks through its labels."""

    async def server_info(request: web.Request) -> web.Response:
        return web.json_response({"model_path": sas_url, "tp_size": 8, "dp_size": 1, "version": "0.5.4-echo",
                                  "max_running_requests": 8})  # fmt: skip

    async def model_info(request: web.Request) -> web.Response:
        return web.json_response({"model_path": sas_url, "is_generation": True})

    async def refuse(request: web.Request) -> web.Response:
        sent = request.headers.get("Authorization", "")
        body = {"error": {"message": f"Invalid API key: {sent.removeprefix('Bearer ')}", "sent": sent,
                          "hint": f"/v1/keys?key={quote(api_key, safe='')}"}}  # fmt: skip
        return web.json_response(body, status=401)

    async def metrics(request: web.Request) -> web.Response:
        escaped = [text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") for text in label_texts]
        lines = ["# TYPE sglang:num_running_reqs gauge"]
        lines += [f'sglang:num_running_reqs{{model_name="m",case="{i}",note="{v}"}} 0' for i, v in enumerate(escaped)]
        return web.Response(text="\n".join(lines) + "\n", content_type="text/plain")

    app = web.Application()
    app.router.add_get("/server_info", server_info)
    app.router.add_get("/model_info", model_info)
    app.router.add_get("/health", lambda request: web.Response(text=""))
    app.router.add_get("/health_generate", lambda request: web.Response(text=""))
    app.router.add_get("/metrics", metrics)
    app.router.add_post("/generate", refuse)
    return app


def test_an_echoed_key_a_label_secret_and_a_sas_signature_reach_no_file(tmp_path, monkeypatch):
    api_key = f"replay-key-{secrets.token_hex(4)}-{secrets.token_hex(4)}"  # pieces too short for any shape
    sig = quote(secrets.token_urlsafe(32) + "+/=", safe="")
    sas_url = (f"https://costbench.blob.core.windows.net/models/ds-v3?sv=2022-11-02&sp=r&se=2026-12-01T00%3A00%3A00Z"
               f"&spr=https&sig={sig}")  # fmt: skip
    cases = [case for case in secret_cases() if case.shape in LABEL_SHAPES]
    label_texts = [f"echo {api_key}", *(case.text for case in cases)]
    leaked = (api_key, quote(api_key, safe=""), sig, *(s for case in cases for s in case.secrets))
    monkeypatch.setenv(KEY_ENV, api_key)
    root = tmp_path / "warehouse"
    run_id = "20261116-echo-0001"
    run_dir = root / "runs" / "week=2026-11-16" / "scenario=echo" / run_id
    with serve_in_thread(_echoing_app(api_key, sas_url, label_texts)) as url:
        spec = EndpointSpec(
            name="echo-attach", mode=EndpointMode.ATTACH, model="m", server_args=(), gpu_type="H200", gpu_count=8,
            usd_per_gpu_hour=3.5, url=url, api_key_env=KEY_ENV, scrape_interval_s=0.1,
        )  # fmt: skip
        with provision(spec, run_dir) as endpoint, probing(endpoint, run_dir, run_id):
            config = ReplayConfig(url=endpoint.url, api_key_env=KEY_ENV, run_id=run_id)
            info = run_replay(make_workload([0.0, 0.05, 0.1]), config, run_dir / "shard-0")
    assert info.requests_ok == 0 and info.requests_recorded == 3

    merge_shard_runs([run_dir / "shard-0"], run_dir)
    lake = root / "lake"
    write_partition(lake, "runs", MONDAY, "echo", build_run_row(read_run_json(run_dir), spec, "echo", MONDAY))
    write_partition(lake, "requests", MONDAY, "echo", read_requests(run_dir))
    samples = pq.read_table(run_dir / SERVER_SAMPLES_FILE, schema=SERVER_SAMPLE_SCHEMA)
    write_partition(lake, "server_samples", MONDAY, "echo", samples)
    gpu = pq.read_table(run_dir / GPU_SAMPLES_FILE, schema=GPU_SAMPLE_SCHEMA)
    write_partition(lake, "gpu_samples", MONDAY, "echo", gpu)
    store = Warehouse(root)
    store.refresh()

    files = sorted(p for p in root.rglob("*") if p.is_file())
    assert {"run.json", "server_facts.json", "requests.parquet", "server_samples.parquet", "probes.json",
            "costbench.duckdb"} <= {p.name for p in files}  # fmt: skip
    for path in files:
        raw, seen = path.read_bytes(), decoded_text(path)
        for secret in leaked:
            assert secret.encode() not in raw and secret not in seen, f"{secret[:8]}… in {path}"

    # What was stored is there, with the secrets hidden in place.
    requests = read_requests(run_dir).to_pylist()
    assert {(r["http_status"], r["error_kind"]) for r in requests} == {(401, "http_status")}
    assert all(r["error_message"].startswith("HTTP 401: ") and REDACTED in r["error_message"] for r in requests)
    facts = orjson.loads((run_dir / "server_facts.json").read_bytes())
    assert facts["server_info"]["model_path"].endswith(f"&spr=https&sig={REDACTED}")
    assert read_run_json(run_dir).server_info["model_path"] == facts["server_info"]["model_path"]
    rows = [row for row in samples.to_pylist() if row["metric"] == "sglang:num_running_reqs"]
    assert f"echo {REDACTED}" in {orjson.loads(row["labels_json"])["note"] for row in rows}
    with store.connect() as con:
        stored = con.execute("SELECT count(*) FROM server_samples WHERE labels_json LIKE '%<redacted>%'").fetchone()
    assert stored[0] > 0
