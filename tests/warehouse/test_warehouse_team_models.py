"""A team's own dbt model (docs/warehouse.md, "Adding your own models"): the docs' example, put in models/team/ of a
copy of the project ($COSTBENCH_DBT_PROJECT, so nothing is written into the package), is built by the refresh command
into the schema `team` with the rows it says; a broken one fails the refresh by name and leaves the database as it
was."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from datetime import date
from pathlib import Path

import duckdb
import pytest

from warehouse.marts.dbt_build import PROJECT_ENV, project_dir
from warehouse_builders import capacity_context, endpoint, request, run_info, write_run

REPO = Path(__file__).resolve().parents[2]
WEEKS = (date(2025, 3, 3), date(2025, 3, 10))
SCENARIOS = ("chat", "agent", "batch")  # the example maps chat and agent to teams; batch is unowned


def _docs_example() -> str:
    """The model the docs show: the first ```jinja block of "Adding your own models"."""
    text = (REPO / "docs" / "warehouse.md").read_text()
    section = text.split("### Adding your own models", 1)[1]
    match = re.search(r"```jinja\n(.*?)```", section, re.S)
    assert match, "docs/warehouse.md lost its example team model"
    return match.group(1)


@pytest.fixture()
def warehouse(tmp_path) -> Path:
    root = tmp_path / "wh"
    for i, week in enumerate(WEEKS):
        for j, scenario in enumerate(SCENARIOS):
            run_id = f"{scenario}-{i}"
            records = [request(run_id, f"q{k}", 100 + 10 * k, 900, sent_mono_s=0.5 * k + 0.01) for k in range(6 + j)]
            info = run_info(run_id, 20.0 + 5 * i + j, requests_total=len(records), requests_recorded=len(records))
            write_run(
                root / "lake", week, scenario, info, endpoint(usd_per_gpu_hour=2.0), records, capacity_context(0.2)
            )
    return root


def _project_copy(tmp_path: Path, model: str) -> Path:
    copy = tmp_path / "project"
    shutil.copytree(project_dir(), copy, ignore=shutil.ignore_patterns("__pycache__"))
    (copy / "models" / "team" / "cost_per_team.sql").write_text(model)
    return copy


def _refresh(root: Path, project: Path, tmp_path: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, PROJECT_ENV: str(project), "COSTBENCH_DBT_CACHE": str(tmp_path / "dbt-cache")}
    return subprocess.run(
        [sys.executable, "-m", "warehouse", "refresh", "--root", str(root)],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip


def test_the_docs_team_model_is_built_into_the_team_schema_and_a_broken_one_fails_by_name(warehouse, tmp_path):
    done = _refresh(warehouse, _project_copy(tmp_path, _docs_example()), tmp_path)
    assert done.returncode == 0, done.stderr
    with duckdb.connect(str(warehouse / "costbench.duckdb"), read_only=True) as con:
        built = con.execute("SELECT week_start, team, realised_cost_per_request_usd FROM team.cost_per_team").fetchall()
        trends = con.execute("SELECT week_start, scenario, replay_cost_usd, completed_requests FROM weekly_trends")
        expected: dict[tuple, list[float]] = {}
        for week, scenario, cost_usd, completed in trends.fetchall():
            team = {"chat": "assistant", "agent": "tools"}.get(scenario, "unowned")
            totals = expected.setdefault((week, team), [0.0, 0])
            totals[0] += cost_usd
            totals[1] += completed
    assert sorted((w, t) for w, t, _ in built) == sorted(expected) and len(built) == len(WEEKS) * 3
    for week, team, cost in built:
        assert cost == pytest.approx(expected[(week, team)][0] / expected[(week, team)][1], rel=1e-12)

    # The model broken: the refresh fails naming it, and the database it built stays.
    shutil.rmtree(tmp_path / "project")
    broken = _project_copy(tmp_path, "SELECT * FROM {{ ref('weekly_trends') }} WHERE no_such_column > 0\n")
    done = _refresh(warehouse, broken, tmp_path)
    assert done.returncode == 1
    assert "model cost_per_team" in done.stderr and "no_such_column" in done.stderr
    with duckdb.connect(str(warehouse / "costbench.duckdb"), read_only=True) as con:
        assert con.execute("SELECT count(*) FROM team.cost_per_team").fetchone() == (len(WEEKS) * 3,)


def test_a_project_copy_without_dbt_project_yml_is_refused_by_name(warehouse, tmp_path):
    done = _refresh(warehouse, tmp_path / "nowhere", tmp_path)
    assert done.returncode == 1
    assert f"${PROJECT_ENV}" in done.stderr and "no dbt_project.yml" in done.stderr
    assert not (warehouse / "costbench.duckdb").exists()
