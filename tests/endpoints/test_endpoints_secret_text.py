"""Text an endpoint chooses reaches no file with a secret in it: /metrics label values (server_samples.parquet),
a parser's complaint about them (probes.json), a DCGM exporter's Hostname (gpu_samples.parquet), a dying
server's log tail (the error Dagster's event log keeps). Secrets come from tests/secret_corpus.py."""

from __future__ import annotations

import json
import sys

import orjson
import pyarrow.parquet as pq
import pytest
from aiohttp import web

from common.run_folder import PROBES_SUMMARY_FILE, SERVER_SAMPLES_FILE
from endpoints.probes.dcgm_sampler import DcgmSampler
from endpoints.probes.gpu_protocol import NoGpuSampler
from endpoints.probes.metrics_scrape import LABEL_MAX_CHARS, parse_router_metrics, parse_sglang_metrics
from endpoints.probes.probe_session import ProbeSession
from endpoints.provision import EndpointStartError, provision
from endpoints.spec import EndpointMode, EndpointSpec
from endpoints_loopback import serve_in_thread
from redaction.secret_redaction import REDACTED
from secret_corpus import ordinary_strings, secret_cases

CASES = secret_cases()
API_KEY = "costbench-test-key-7f3a"  # no shape a rule knows: only the run's own header says it is the key


def _label(value: str) -> str:
    """A label value as the exposition format escapes it."""
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _exposition(values: list[str], family: str = "sglang:num_running_reqs") -> str:
    lines = [f"# TYPE {family} gauge"]
    lines += [f'{family}{{model_name="ds",case="{i}",note="{_label(v)}"}} 1' for i, v in enumerate(values)]
    return "\n".join(lines) + "\n"


def _stored_label_values(series) -> dict[str, str]:
    return {labels["case"]: labels["note"] for labels in (json.loads(s.labels_json) for s in series)}


def test_every_corpus_secret_as_a_label_value_is_redacted():
    stored = _stored_label_values(parse_sglang_metrics(_exposition([case.text for case in CASES])))
    missed = [case.shape for i, case in enumerate(CASES) if any(s in stored[str(i)] for s in case.secrets)]
    assert (len(stored), missed) == (len(CASES), [])


def test_a_router_series_label_is_redacted_too():
    case = next(case for case in CASES if case.shape == "postgres url")
    series = parse_router_metrics(_exposition([case.text], family="smg_worker_requests_active"))
    assert case.secrets[0] not in series[0].labels_json and REDACTED in series[0].labels_json


def test_ordinary_label_values_are_kept():
    values = ordinary_strings()
    assert _stored_label_values(parse_sglang_metrics(_exposition(values))) == {str(i): v for i, v in enumerate(values)}


def test_a_label_past_the_bound_is_replaced_whole():
    long = "a " * LABEL_MAX_CHARS
    assert _stored_label_values(parse_sglang_metrics(_exposition([long]))) == {"0": REDACTED}


def _hostile_metrics_app(pages: list[str]) -> web.Application:
    async def metrics(request: web.Request) -> web.Response:
        return web.Response(text=pages.pop(0) if len(pages) > 1 else pages[0], content_type="text/plain")

    app = web.Application()
    app.router.add_get("/metrics", metrics)
    return app


def test_scraped_labels_and_parse_errors_keep_no_secret_on_disk(tmp_path):
    """The run's own key echoed in a label (found by its value), shaped secrets in labels, and a malformed
    line whose parse error quotes a secret: none reaches server_samples.parquet or probes.json."""
    shaped = [case for case in CASES if case.shape in ("slack webhook", "gcp service account json", "azure sas url")]
    good = _exposition([f"key {API_KEY} in use", *(case.text for case in shaped)])
    broken = f'sglang:num_running_reqs{{note="{shaped[0].secrets[0]}" 1\n'
    headers = {"Authorization": f"Bearer {API_KEY}"}
    with serve_in_thread(_hostile_metrics_app([good, broken, good])) as url:
        session = ProbeSession("run-1", (url,), headers, NoGpuSampler("h", "no gpu"), tmp_path, 1.0)
        for _ in range(3):
            session.tick()
        summary = session.stop(final_tick=False)
    assert summary.scrape_failures == 1 and any("not Prometheus text" in note for note in summary.notes)
    rows = pq.read_table(tmp_path / SERVER_SAMPLES_FILE).to_pylist()
    labels = [row["labels_json"] for row in rows if row["metric"] == "sglang:num_running_reqs"]
    assert len(labels) == 2 * (1 + len(shaped)) and f"key {REDACTED} in use" in labels[0]
    written = (tmp_path / SERVER_SAMPLES_FILE).read_bytes() + (tmp_path / PROBES_SUMMARY_FILE).read_bytes()
    seen = str(rows) + written.decode("utf-8", "replace")
    for secret in (API_KEY, *(s for case in shaped for s in case.secrets)):
        assert secret not in seen


def test_a_dcgm_hostname_and_an_exporter_complaint_are_redacted(tmp_path):
    case = next(case for case in CASES if case.shape == "github classic token")
    host = case.text  # a Hostname label carrying a clone URL with its token
    page = f'# TYPE DCGM_FI_DEV_GPU_UTIL gauge\nDCGM_FI_DEV_GPU_UTIL{{gpu="0",Hostname="{host}"}} 97\n'
    bad = f"DCGM_FI_DEV_GPU_UTIL{{gpu=0,Hostname={case.secrets[0]}}} 97\n"
    apps = [web.Application(), web.Application()]
    apps[0].router.add_get("/metrics", lambda request: web.Response(text=page, content_type="text/plain"))
    apps[1].router.add_get("/metrics", lambda request: web.Response(text=bad, content_type="text/plain"))
    with serve_in_thread(apps[0]) as good_url, serve_in_thread(apps[1]) as bad_url:
        rows = DcgmSampler(f"{good_url}/metrics").sample("r", 1.0) + DcgmSampler(f"{bad_url}/metrics").sample("r", 1.0)
    assert rows[0].host.startswith("git clone https://x-access-token:") and rows[0].utilisation_pct == 97
    assert "unparsable" in (rows[1].note or "")
    assert case.secrets[0] not in orjson.dumps([row.host for row in rows] + [row.note for row in rows]).decode()


def test_a_dying_servers_log_tail_keeps_no_secret(tmp_path):
    """SGLang logs its ServerArgs as it starts; the tail goes into the error a Dagster run keeps."""
    key = next(case for case in CASES if case.shape == "openai key").secrets[0]
    script = (f"print(\"server_args=ServerArgs(model_path='m', api_key='{API_KEY}', note='{key}')\", flush=True); "
              "print('loading weights... out of memory', flush=True); raise SystemExit(3)")  # fmt: skip
    spec = EndpointSpec(
        name="dying", mode=EndpointMode.SIM, model="m", server_args=("--tp", "8"), gpu_type="H200", gpu_count=8,
        usd_per_gpu_hour=3.5, ready_timeout_s=30.0, command=(sys.executable, "-c", script),
    )  # fmt: skip
    with pytest.raises(EndpointStartError, match="exited with code 3") as error:
        with provision(spec, tmp_path):
            pass
    message = str(error.value)
    assert "out of memory" in message and "model_path='m'" in message
    assert API_KEY not in message and key not in message
