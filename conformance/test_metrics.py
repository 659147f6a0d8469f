"""The twin's /metrics against SGLang's own collectors (sglang.srt.observability.metrics_collector).

Every `sglang:*` family the twin exposes is one SGLang defines, with the same type and the same label
names; every `sglang:*` series the warehouse reads (its SQL, read here) and the probe averages
(endpoints/probes/metrics_scrape.py) is one SGLang defines with the type the probe stores; and the ones the twin
models come out of the twin's exposition through the probe's own parser.
"""

from __future__ import annotations

import re
import socket
from concurrent.futures import ThreadPoolExecutor

import pytest
import requests
from prometheus_client.parser import text_string_to_metric_families
from sglang_metrics import sglang_metric_definitions
from twin_http import post_json, post_sse
from twin_server import REPO_ROOT, start_twin

from endpoints.probes.metrics_scrape import MEAN_GAUGES, parse_sglang_metrics

SPEC_FLAGS = [
    "--model-path", "deepseek-ai/DeepSeek-R1", "--tp", "8", "--speculative-algorithm", "EAGLE", "--enable-metrics",
    "--skip-server-warmup",
]  # fmt: skip
SUFFIXES = ("_total", "_bucket", "_count", "_sum", "_created")


def family_of(sample_name: str) -> str:
    for suffix in SUFFIXES:
        if sample_name.endswith(suffix):
            return sample_name[: -len(suffix)]
    return sample_name


def warehouse_metrics() -> set[str]:
    """The sglang:* sample names the warehouse's SQL reads."""
    names = set()
    for sql in (REPO_ROOT / "warehouse").rglob("*.sql"):
        names |= set(re.findall(r"sglang:[a-z_]+", sql.read_text()))
    return names


@pytest.fixture(scope="module")
def definitions(twin_r1):
    model_name = requests.get(twin_r1.base_url + "/v1/models", timeout=30).json()["data"][0]["id"]
    return sglang_metric_definitions(model_name)


@pytest.fixture(scope="module")
def exposition(twin_r1) -> str:
    """/metrics after streamed and whole requests, a repeated prompt (cached tokens) and a bad one."""
    body = {"input_ids": list(range(100, 400)), "sampling_params": {"max_new_tokens": 8, "ignore_eos": True}}
    post_sse(twin_r1.base_url, "/generate", {**body, "stream": True})
    post_json(twin_r1.base_url, "/generate", body)
    chat = {"messages": [{"role": "user", "content": "hello " * 50}], "max_tokens": 6, "stream": True}
    post_sse(twin_r1.base_url, "/v1/chat/completions", chat)
    return requests.get(twin_r1.base_url + "/metrics", timeout=30).text


def _family_problems(exposition: str, definitions: dict) -> tuple[int, list[str]]:
    problems, n = [], 0
    for family in text_string_to_metric_families(exposition):
        if not family.name.startswith("sglang:"):
            continue
        n += 1
        theirs = definitions.get(family.name)
        if theirs is None:
            problems.append(f"{family.name}: SGLang defines no such metric")
            continue
        if family.type != theirs.kind:
            problems.append(f"{family.name}: a {family.type} in the twin, a {theirs.kind} in SGLang")
        labels = {k for s in family.samples for k in s.labels} - {"le", "quantile"}
        if family.samples and labels != theirs.label_names:  # no series yet (nothing cached): nothing to compare
            problems.append(
                f"{family.name}: labels {sorted(labels)} in the twin, {sorted(theirs.label_names)} in SGLang"
            )
    return n, problems


def test_every_family_the_twin_exposes_is_sglangs_with_the_same_type_and_labels(
    exposition, definitions, record_property
):
    n, problems = _family_problems(exposition, definitions)
    record_property("checked", f"{n} twin families vs {len(definitions)} SGLang definitions (type, label names)")
    assert not problems, "\n".join(problems)


def test_the_speculative_series_are_sglangs_too(definitions, record_property):
    server = start_twin(SPEC_FLAGS)
    try:
        body = {"input_ids": list(range(100, 300)), "sampling_params": {"max_new_tokens": 12, "ignore_eos": True}}
        post_sse(server.base_url, "/generate", {**body, "stream": True})
        exposition = requests.get(server.base_url + "/metrics", timeout=30).text
    finally:
        server.stop()
    n, problems = _family_problems(exposition, definitions)
    spec = sorted(f.name for f in text_string_to_metric_families(exposition) if f.name.startswith("sglang:spec"))
    record_property("checked", f"{n} families under --speculative-algorithm EAGLE, {', '.join(spec)}")
    assert spec and not problems, "\n".join(problems)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_the_disaggregation_series_of_both_roles_are_sglangs_too(definitions, record_property):
    """A prefill and a decode twin, one request sent to both with the bootstrap fields SGLang's router adds."""
    port = _free_port()
    prefill = start_twin(["--tp", "8", "--enable-metrics", "--skip-server-warmup", "--disaggregation-mode", "prefill",
                          "--disaggregation-bootstrap-port", str(port)])  # fmt: skip
    decode = start_twin(["--tp", "8", "--enable-metrics", "--skip-server-warmup", "--disaggregation-mode", "decode"])
    try:
        body = {"input_ids": list(range(100, 600)), "sampling_params": {"max_new_tokens": 8, "ignore_eos": True},
                "bootstrap_host": "127.0.0.1", "bootstrap_port": port, "bootstrap_room": 2**63 + 5}  # fmt: skip
        with ThreadPoolExecutor(2) as pool:
            answers = list(pool.map(lambda url: post_json(url, "/generate", body), (prefill.base_url, decode.base_url)))
        expositions = [requests.get(s.base_url + "/metrics", timeout=30).text for s in (prefill, decode)]
    finally:
        prefill.stop()
        decode.stop()
    assert [status for status, _ in answers] == [200, 200] and answers[1][1]["meta_info"]["completion_tokens"] == 8
    problems, shown = [], []
    for role, exposition in zip(("prefill", "decode"), expositions, strict=True):
        n, found = _family_problems(exposition, definitions)
        problems += [f"{role}: {p}" for p in found]
        families = [f for f in text_string_to_metric_families(exposition) if f.name.startswith("sglang:")]
        types = {s.labels["engine_type"] for f in families for s in f.samples if "engine_type" in s.labels}
        if types != {role}:
            problems.append(f"{role}: engine_type {sorted(types)}")
        pd = sorted(f.name for f in families if "prefill_" in f.name or "decode_" in f.name or "kv_transfer" in f.name)
        shown.append(f"{role}: {n} families, {', '.join(pd)}")
    record_property("checked", "; ".join(shown))
    assert not problems, "\n".join(problems)


def test_every_metric_the_warehouse_reads_is_sglangs_and_the_twin_serves_it(exposition, definitions, record_property):
    problems = []
    used = warehouse_metrics()
    series = {s.metric: s.kind for s in parse_sglang_metrics(exposition)}
    for name in sorted(used):
        theirs = definitions.get(family_of(name))
        if theirs is None:
            problems.append(f"{name}: read by the warehouse, not defined by SGLang")
        elif name not in series:
            problems.append(f"{name}: read by the warehouse, absent from the twin's /metrics")
        elif series[name] != theirs.kind:
            problems.append(f"{name}: the probe stores a {series[name]}, SGLang defines a {theirs.kind}")
    for name in sorted(MEAN_GAUGES):
        theirs = definitions.get(name)
        if theirs is None or theirs.kind != "gauge":
            problems.append(f"{name}: averaged over DP ranks by the probe, but SGLang has {theirs}")
    record_property(
        "checked", f"warehouse reads {len(used)}: {', '.join(sorted(used))}; {len(MEAN_GAUGES)} mean gauges"
    )
    assert not problems, "\n".join(problems)


def test_histogram_buckets_are_sglangs_defaults(exposition, definitions, record_property):
    problems, checked = [], []
    for family in text_string_to_metric_families(exposition):
        if family.type != "histogram" or not family.name.startswith("sglang:"):
            continue
        le = {s.labels["le"] for s in family.samples if s.name.endswith("_bucket")} - {"+Inf"}
        bounds = tuple(sorted(float(b) for b in le))
        checked.append(f"{family.name.removeprefix('sglang:')} ({len(bounds)})")
        if bounds != definitions[family.name].buckets:
            problems.append(
                f"{family.name}: buckets {bounds} in the twin, {definitions[family.name].buckets} in SGLang"
            )
    record_property("checked", ", ".join(checked))
    assert checked and not problems, "\n".join(problems)
