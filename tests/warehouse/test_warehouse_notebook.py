"""The analyst's notebook (warehouse/notebook/, `make notebook`) run headless the way marimo runs it: every cell runs
without error and each of the docs' example questions is answered from its file, on a warehouse it opens read-only
beside an analyst's session in another process; without a warehouse it says to run `make demo`; a DuckLake is
attached read-only; `make notebook` serves marimo's editor on loopback from the installed wheel. marimo runs in
subprocesses only: it registers display hooks (a matplotlib backend, plotly's show) in the process that runs a
notebook."""

from __future__ import annotations

import hashlib
import html
import importlib.util
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from datetime import date, timedelta
from http.cookiejar import CookieJar
from pathlib import Path

import duckdb
import pandas as pd
import pytest

from warehouse.backends.backend import open_warehouse
from warehouse.backends.store import LAKE_TABLES, Warehouse
from warehouse.marts.run_rows import RunContext
from warehouse.notebook.example_questions import example_file_names, example_question
from warehouse.notebook.notebook_plots import COST_TREND_COLUMNS, cost_trend_figure, missing_columns
from warehouse.notebook.read_only_connection import NotebookWarehouseError, open_read_only
from warehouse.parquet.lake import list_partitions
from warehouse.sql_files import read_sql
from warehouse_builders import endpoint, request, run_info, write_run

REPO = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
NOTEBOOK = Path(str(importlib.util.find_spec("warehouse.notebook.analyst_notebook").origin))  # not imported
WEEKS = [date(2025, 2, 3) + timedelta(days=7 * i) for i in range(3)]
TOTAL_ROWS = re.compile(r"<marimo-table [^>]*data-total-rows='(\d+)'")
TIMEOUT_S = 120

# An analyst's session in another process: one read-only connection, answering on each line of stdin.
ANALYST = """
import sys, duckdb
con = duckdb.connect(sys.argv[1], read_only=True, config={"file_search_path": sys.argv[2]})
runs = lambda: con.execute("SELECT count(*) FROM run_summary").fetchone()[0]
print("ready", runs(), flush=True)
for _ in sys.stdin:
    print("answer", runs(), flush=True)
"""


@pytest.fixture(scope="module")
def store(tmp_path_factory) -> Warehouse:
    store = Warehouse(tmp_path_factory.mktemp("notebook") / "wh")
    for week, window_s, cached in zip(WEEKS, (90.0, 92.0, 130.0), (600, 620, 200)):  # the last week regresses
        run_id = f"chat-v3-{week.isoformat()}"
        records = [request(run_id, f"q{i}", 100 + i, 2000 + i, cached_tokens=cached) for i in range(20)]
        context = RunContext(capacity_rps_at_slo=20 / window_s / 0.8, capacity_source="twin_sweep")
        write_run(store.lake_root, week, "chat-v3", run_info(run_id, window_s), endpoint(), records, context)
    store.refresh()
    return store


def _env(home: Path) -> dict[str, str]:
    """marimo's config and state under `home`; no warehouse named by the environment; no display."""
    drop = {"COSTBENCH_WAREHOUSE", "DISPLAY", "WAYLAND_DISPLAY"}
    env = {k: v for k, v in os.environ.items() if k not in drop and not k.startswith("XDG_")}
    return {**env, "HOME": str(home), "PYTHONUNBUFFERED": "1"}


def _export_session(location: Path, folder: Path) -> tuple[subprocess.CompletedProcess[str], list[dict]]:
    """Run the notebook headless (`marimo export session`) on a copy, so its snapshot is written beside the copy, and
    return marimo's exit and every cell's outputs."""
    folder.mkdir()
    copy = folder / NOTEBOOK.name
    shutil.copyfile(NOTEBOOK, copy)
    done = subprocess.run(
        [str(BIN / "marimo"), "export", "session", str(copy), "--", "--warehouse", str(location)],
        cwd=folder, env=_env(folder), capture_output=True, text=True, timeout=TIMEOUT_S,
    )  # fmt: skip
    snapshot = folder / "__marimo__" / "session" / f"{NOTEBOOK.name}.json"
    assert snapshot.exists(), done.stdout + done.stderr
    outputs = [o for cell in json.loads(snapshot.read_text())["cells"] for o in cell["outputs"]]
    return done, outputs


def _html(outputs: list[dict]) -> list[str]:
    return [html.unescape(json.dumps(o["data"])) for o in outputs if o["type"] == "data"]


def _text(outputs: list[dict]) -> str:
    """What the outputs say, without markup (marimo nests some HTML as escaped JSON in attributes)."""
    text = "\n".join(_html(outputs))
    text = re.sub(r"\\+u([0-9a-f]{4})", lambda m: chr(int(m.group(1), 16)), html.unescape(text))
    return re.sub(r"<[^>]+>", "", text)


def _rows(store: Warehouse, file_name: str) -> int:
    with store.connect(read_only=True) as con:
        return len(con.execute(read_sql(f"sql/{file_name}")).fetchall())


def _digest(path: Path) -> tuple[str, int]:
    return hashlib.sha256(path.read_bytes()).hexdigest(), path.stat().st_mtime_ns


def test_every_example_question_is_in_the_notebook_as_its_file_has_it():
    named = sorted(set(re.findall(r"example_\w+\.sql", NOTEBOOK.read_text())))
    assert named and named == example_file_names()  # a new example file needs its cell
    for name in named:
        question = example_question(name)
        text = read_sql(f"sql/{name}").strip()
        comment = text[: len(text) - len(question.sql.strip())].strip()
        assert question.sql.strip() and not question.sql.startswith("--") and text.endswith(question.sql.strip())
        assert comment.startswith("-- ") and question.question == " ".join(
            line.removeprefix("--").strip() for line in comment.splitlines()
        )


def test_a_headless_run_answers_every_question_read_only_beside_an_analyst(store, tmp_path):
    analyst = subprocess.Popen(
        [sys.executable, "-c", ANALYST, str(store.db_path), str(store.root)],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert analyst.stdout is not None and analyst.stdin is not None
        assert analyst.stdout.readline().split() == ["ready", "3"]
        before = _digest(store.db_path)
        done, outputs = _export_session(store.root, tmp_path / "run")
        assert done.returncode == 0, done.stdout + done.stderr
        assert [o for o in outputs if o["type"] == "error"] == []
        shown = _html(outputs)
        answered = sorted(int(n) for text in shown for n in TOTAL_ROWS.findall(text))
        assert answered == sorted(_rows(store, name) for name in example_file_names())
        assert all(answered), "every example question has an answer on this warehouse"
        assert sum("<marimo-plotly" in text for text in shown) == 2  # the cost trend; hit rate against cost
        said = _text(outputs)
        assert f"Reading {store.root}, read-only." in said
        assert [name for name in example_file_names() if f"(warehouse/sql/{name})" not in said] == []
        assert _digest(store.db_path) == before
        analyst.stdin.write("again\n")
        analyst.stdin.flush()
        assert analyst.stdout.readline().split() == ["answer", "3"]  # the analyst was never held up
    finally:
        analyst.kill()
        analyst.wait(10)


def test_without_a_warehouse_it_says_to_run_make_demo(tmp_path):
    empty = tmp_path / "no-warehouse"
    empty.mkdir()
    done, outputs = _export_session(empty, tmp_path / "run")
    assert done.returncode == 0, done.stdout + done.stderr  # stopped, not failed
    assert {o.get("ename") for o in outputs if o["type"] == "error"} == {"ancestor-stopped"}
    said = _text(outputs)
    assert f"There is no warehouse at {empty / 'costbench.duckdb'} yet. Run make demo in the repository" in said
    assert [text for text in _html(outputs) if TOTAL_ROWS.search(text)] == []  # no query ran
    assert list(empty.iterdir()) == []


def test_its_connection_refuses_a_write(store):
    read_only = open_read_only(str(store.root))
    try:
        with pytest.raises(duckdb.Error, match="read-only"):
            read_only.connection.execute("CREATE TABLE scribble AS SELECT 1")
        assert read_only.connection.execute("SELECT count(*) FROM run_summary").fetchone() == (3,)
    finally:
        read_only.close()
    with pytest.raises(NotebookWarehouseError, match="make demo"):
        open_read_only(str(store.root / "elsewhere"))


def test_a_ducklake_warehouse_is_attached_read_only(store, postgres_database, tmp_path, monkeypatch):
    db = postgres_database()
    lake = open_warehouse(
        f"ducklake:postgresql://{db.user}:{db.password}@{db.host}:{db.port}/{db.dbname}?data_path={tmp_path / 'data'}",
        tmp_path / "scratch",
    )
    try:  # the local warehouse's lake, written as DuckLake transactions, then refreshed
        for table in LAKE_TABLES:
            for p in list_partitions(store.lake_root, table):
                data = store.read_partition(table, p.week_start, p.scenario)
                lake.write_partition(table, p.week_start, p.scenario, data)
        lake.refresh()
    finally:
        lake.close()
    monkeypatch.setenv("PGPASSWORD", db.password)  # as `make sql`: the URL without it, libpq reads it here
    read_only = open_read_only(f"ducklake:postgresql://{db.user}@{db.host}:{db.port}/{db.dbname}")
    try:
        sql = read_sql("sql/example_cost_trend.sql")
        with store.connect(read_only=True) as local:
            assert read_only.connection.execute(sql).fetchall() == local.execute(sql).fetchall()
        with pytest.raises(duckdb.Error, match="read-only"):
            read_only.connection.execute("CREATE TABLE scribble AS SELECT 1")
    finally:
        read_only.close()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_make_notebook_serves_the_editor_on_loopback_from_the_wheel(store, tmp_path):
    port = _free_port()
    log = tmp_path / "notebook.log"
    with open(log, "w") as out:
        # -o: the environment is the one running these tests; make must not try to rebuild it.
        server = subprocess.Popen(
            ["make", "-s", "-C", str(REPO), "-o", ".venv/.installed-stamp", f"BIN={BIN}", "notebook",
             f"NOTEBOOK_PORT={port}"],
            env={**_env(tmp_path), "COSTBENCH_WAREHOUSE": str(store.root)},
            stdout=out, stderr=subprocess.STDOUT, start_new_session=True,
        )  # fmt: skip
    try:
        deadline = time.monotonic() + TIMEOUT_S
        while not (found := re.search(r"URL: http://localhost:(\d+)\?access_token=(\S+)", log.read_text())):
            assert server.poll() is None and time.monotonic() < deadline, log.read_text()
            time.sleep(0.2)
        assert int(found.group(1)) == port
        opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(CookieJar()))
        while True:  # the URL is printed as the server starts listening
            try:
                with opener.open(f"http://127.0.0.1:{port}/?access_token={found.group(2)}", timeout=30) as page:
                    text = page.read().decode()
                break
            except urllib.error.URLError as exc:
                assert isinstance(exc.reason, ConnectionRefusedError) and time.monotonic() < deadline, exc
                time.sleep(0.2)
        assert "analyst_notebook.py" in text
        assets = re.findall(r'(?:src|href)="([^"]+)"', text)
        assert assets and [a for a in assets if not a.startswith("./")] == []  # nothing from another host
        script = next(a for a in assets if a.endswith(".js"))
        with opener.open(f"http://127.0.0.1:{port}/{script.removeprefix('./')}", timeout=30) as served:
            assert served.status == 200 and len(served.read()) > 10_000
        with opener.open(f"http://127.0.0.1:{port}/api/status", timeout=30) as status:
            assert json.loads(status.read())["mode"] == "edit"
        with pytest.raises(urllib.error.HTTPError, match="401"):  # without the printed URL's token: refused
            urllib.request.urlopen(f"http://127.0.0.1:{port}/api/status", timeout=30)
    finally:
        _stop_group(server)


def _stop_group(leader: subprocess.Popen) -> None:
    """Stop make, marimo and marimo's children (one process group), waiting until none is left."""
    os.killpg(leader.pid, signal.SIGTERM)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        leader.poll()
        try:
            os.killpg(leader.pid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.1)
    os.killpg(leader.pid, signal.SIGKILL)
    leader.wait(10)


def test_a_plot_draws_the_answer_or_names_the_columns_an_edited_query_lost():
    answer = pd.DataFrame(
        {
            "week_start": [WEEKS[1], WEEKS[0], WEEKS[0]],
            "scenario": ["chat", "chat", "code"],
            "endpoint": ["v3", "v3", "v3"],
            "efficiency_cost_per_request_usd": [0.02, 0.01, 0.03],
        }
    )
    figure = cost_trend_figure(answer)
    assert [(t.name, list(t.y)) for t in figure.data] == [("chat (v3)", [0.01, 0.02]), ("code (v3)", [0.03])]
    assert missing_columns(answer, COST_TREND_COLUMNS) is None
    edited = answer.drop(columns=["efficiency_cost_per_request_usd"])
    assert missing_columns(edited, COST_TREND_COLUMNS) == (
        "No plot: the query above no longer returns `efficiency_cost_per_request_usd`."
    )
