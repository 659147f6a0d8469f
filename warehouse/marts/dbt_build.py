"""The marts' build: `dbt build` of the project in warehouse/dbt/, in this process, on one DuckDB file.

Both backends build this way (docs/warehouse.md, "The marts are a dbt project"). The caller has created the
sources in the file (warehouse/schema.sql: the lake's views, the prices, the lake's audit), committed them, and keeps
its own connection open while dbt runs: dbt-duckdb connects to the same path with the same (default) configuration,
so DuckDB hands it the same database instance, with whatever the caller attached and loaded (DuckLake's catalog,
its extensions), and nothing reaches dbt's profile but the file's path. The file must be named costbench.duckdb:
DuckDB names a database by its file, and dbt writes that name into every relation it creates.

dbt runs the models in their lineage order and each model's tests after it; a failed model or an ERROR test fails
the build, and the caller keeps the previous marts. The project is parsed once per process (about 0.6 s); each build
reuses the parsed manifest. Nothing is downloaded: no packages, no version check, no usage statistics.

dbt changes the process's working directory to the project's while it runs (and back after): every path handed to
it is absolute, and nothing else in a refreshing process may rely on a relative path during a build.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import tempfile
import threading
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

import duckdb
import yaml

from common.atomic_file import write_bytes_atomically
from warehouse.duckdb_offline import OFFLINE_CONFIG
from warehouse.errors import WarehouseError

PROFILE = "costbench"
PROJECT_ENV = "COSTBENCH_DBT_PROJECT"
STAGING_SCHEMA = "staging"  # dbt_project.yml: the stages of the marts, internal
DB_FILE = "costbench.duckdb"  # the database's name in every relation dbt writes is this file's stem
_LOCK = threading.Lock()  # dbt keeps process-wide state (flags, adapters): one invocation at a time
_manifest: Any = None  # the parsed project, reused by every build of this process


@dataclass(frozen=True, slots=True)
class DataTest:
    """One dbt data test of the build: what Dagster shows as the asset check of the model it tests."""

    name: str  # the test node's name (e.g. unique_run_summary_run_id)
    model: str  # the model it tests
    passed: bool
    severity: str  # dbt's: "error" fails the build, "warn" does not
    message: str  # dbt's, when it did not pass (e.g. "Got 2 results, configured to fail if != 0")


class MartBuildError(WarehouseError):
    """A model or an ERROR test failed: the build is not published."""

    def __init__(self, message: str, tests: tuple[DataTest, ...] = ()) -> None:
        super().__init__(message)
        self.tests = tests  # the tests that ran before it stopped, passed or not


@dataclass(frozen=True, slots=True)
class DbtBuild:
    models: tuple[tuple[str, str], ...]  # (schema, name) of each model built, in the order dbt finished them
    tests: tuple[DataTest, ...]  # every data test that ran
    seconds: tuple[tuple[str, float], ...]  # (node name, seconds dbt took on it) for every model and test
    warnings: tuple[str, ...]  # WARN-severity tests that failed: '<test>: <message>'


def project_dir() -> Path:
    """warehouse/dbt, the dbt project (dbt_project.yml), as a folder on disk; or the copy $COSTBENCH_DBT_PROJECT names
    (to try a model of your own on a copy before it goes in: docs/warehouse.md, "Adding your own models")."""
    copy = os.environ.get(PROJECT_ENV)
    if not copy:
        return Path(str(resources.files("warehouse").joinpath("dbt")))
    if not (Path(copy) / "dbt_project.yml").is_file():
        raise WarehouseError(
            f"${PROJECT_ENV} is {copy!r}, which holds no dbt_project.yml: name a copy of warehouse/dbt"
        )
    return Path(copy).absolute()


def connect_build(db_path: Path) -> duckdb.DuckDBPyConnection:
    """The caller's connection to the file dbt will build in: the configuration dbt's profile gives too (equal
    configurations share one database instance), which installs and autoloads no extension."""
    if db_path.name != DB_FILE:
        raise WarehouseError(f"{db_path}: dbt builds the marts in a file named {DB_FILE}")
    return duckdb.connect(str(db_path.absolute()), config=dict(OFFLINE_CONFIG))


def model_sql(name: str) -> str:
    """The text of the dbt model `name` (warehouse/dbt/models/*/<name>.sql), as dbt reads it."""
    [path] = Path(project_dir(), "models").rglob(f"{name}.sql")
    return path.read_text()


def build_marts(
    con: duckdb.DuckDBPyConnection,
    db_path: Path,
    work_dir: Path,
    select: str | None = None,
    variables: dict[str, object] | None = None,
) -> DbtBuild:
    """`dbt build` every model and test (or those `select` names, in dbt's selection syntax) into `db_path` (named
    DB_FILE), which `con` holds open; dbt's profile, target and logs go under `work_dir`; `variables` are dbt's
    --vars (warehouse/marts/week_scope.py's). Raises WarehouseError naming each model or test that failed."""
    del con  # from connect_build, held by the caller for its whole build: dbt's connection shares its instance
    # Absolute: dbt changes the process's working directory to the project's while it runs, and back after.
    work_dir, db_path = work_dir.absolute(), db_path.absolute()
    work_dir.mkdir(parents=True, exist_ok=True)
    _write_profile(work_dir, db_path)
    with _LOCK:
        try:
            selection = ["--select", select] if select else []
            selection += ["--vars", json.dumps(variables)] if variables else []
            flags = [*_flags(work_dir, work_dir / "target"), "--no-write-json", "--no-populate-cache"]
            result = _invoke(["build", *flags, *selection], _parsed())
        finally:
            _close_dbt_connection()
    return _outcome(result, db_path)


def _close_dbt_connection() -> None:
    """Close the connection dbt-duckdb keeps for the process after a run: left open, it would keep the built file's
    database instance alive (DuckDB would hand it to the next build at the same path) after the file is renamed."""
    from dbt.adapters.duckdb.connections import DuckDBConnectionManager

    env, DuckDBConnectionManager._ENV = DuckDBConnectionManager._ENV, None
    if env is not None:
        env.close()


def _flags(work_dir: Path, target_dir: Path) -> list[str]:
    return [
        "--project-dir", str(project_dir()), "--profiles-dir", str(work_dir),
        "--target-path", str(target_dir), "--log-path", str(work_dir / "logs"),
        "--log-level", "none", "--log-level-file", "none",
        "--no-send-anonymous-usage-stats", "--no-version-check", "--no-use-colors", "--threads", "1",
    ]  # fmt: skip


def parse_cache_dir() -> Path:
    """Where parses keep dbt's partial-parse file, shared by every process of this user and project text: a process's
    first parse reads it (0.66 s here, against 1.81 s for a full parse). dbt parses in full when the file is missing,
    stale or unreadable (a concurrent writer's), so sharing it is safe. $COSTBENCH_DBT_CACHE overrides the place."""
    base = os.environ.get("COSTBENCH_DBT_CACHE") or Path(tempfile.gettempdir()) / f"costbench-dbt-{os.getuid()}"
    return Path(base) / project_digest()[:16]


@functools.cache
def project_digest() -> str:
    """sha256 of the project's text: every file under warehouse/dbt, by its path there (hashed once a process)."""
    digest = hashlib.sha256()
    for path in sorted(project_dir().rglob("*")):
        if path.is_file() and "__pycache__" not in path.parts:
            digest.update(path.relative_to(project_dir()).as_posix().encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()


def project_vars() -> dict[str, Any]:
    """The project's vars (dbt_project.yml): constants its SQL and costbench's Python share."""
    return dict(yaml.safe_load((project_dir() / "dbt_project.yml").read_text())["vars"])


def manifest_path() -> Path:
    """The parsed project's manifest.json (what dagster-dbt reads when the code location loads): parsed once per
    project text (parse_cache_dir), then read from there; written by rename, so a reader never sees half of it."""
    path = parse_cache_dir() / "assets-manifest.json"
    if not path.exists():
        manifest = _parsed()
        write_bytes_atomically(path, json.dumps(manifest.writable_manifest().to_dict(omit_none=False)).encode())
    return path


def _parsed() -> Any:
    global _manifest
    if _manifest is None:
        # Parsed against a profile of its own, the same every time: dbt parses in full when the profile changed, and
        # each build's names another file (of the same name, so every relation the manifest holds is the same).
        cache = parse_cache_dir()
        cache.mkdir(parents=True, exist_ok=True)
        _write_profile(cache, cache / DB_FILE)
        result = _invoke(["parse", *_flags(cache, cache)], None)
        if not result.success:
            raise WarehouseError(f"dbt could not parse {project_dir()}: {result.exception}")
        _manifest = result.result
    return _manifest


def _invoke(args: list[str], manifest: Any) -> Any:
    from dbt.cli.main import dbtRunner  # about a second to import: only when a refresh builds

    return dbtRunner(manifest=manifest).invoke(args)


def _write_profile(work_dir: Path, db_path: Path) -> None:
    output = {"type": "duckdb", "path": str(db_path.absolute()), "threads": 1, "config_options": dict(OFFLINE_CONFIG)}
    profile = {PROFILE: {"target": "build", "outputs": {"build": output}}}
    # Whole: another process parsing meanwhile reads the cache's profile.
    write_bytes_atomically(work_dir / "profiles.yml", yaml.safe_dump(profile).encode())


def _outcome(result: Any, db_path: Path) -> DbtBuild:
    if result.result is None:  # dbt stopped before running anything (a profile or project error)
        raise WarehouseError(f"dbt build of {db_path} failed: {result.exception}")
    models, failed, warnings, tests = [], [], [], []
    seconds = tuple((run.node.name, float(run.execution_time or 0.0)) for run in result.result.results)
    for run in result.result.results:
        node, status, message = run.node, str(run.status), " ".join((run.message or "").split())
        name = f"{node.resource_type} {node.name}"
        if node.resource_type == "test":
            tested = node.attached_node or (node.depends_on.nodes[-1] if node.depends_on.nodes else "")
            severity = str(node.config.severity).lower()
            tests.append(DataTest(node.name, tested.split(".")[-1], status == "pass", severity, message))
        if status in ("error", "fail", "runtime error"):
            failed.append(f"{name}: {status}: {message or status}")
        elif status == "warn":
            warnings.append(f"{node.name}: {message}")
        elif status == "success" and node.resource_type == "model":
            models.append((node.schema, node.name))
    if failed or not result.success:
        skipped = sum(1 for run in result.result.results if str(run.status) == "skipped")
        detail = "; ".join(failed) or str(result.exception)
        raise MartBuildError(
            f"dbt build of {db_path} failed ({skipped} nodes skipped after it): {detail}", tuple(tests)
        )
    return DbtBuild(tuple(models), tuple(tests), seconds, tuple(warnings))
