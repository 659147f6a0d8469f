"""Resources: where the scenarios, endpoints and warehouse live. Paths only; no I/O at construction."""

from __future__ import annotations

import functools
import os
from collections.abc import Callable, Mapping
from pathlib import Path
from types import MappingProxyType
from typing import TypeVar

import dagster as dg

from assets.partition_context import PartitionContext
from assets.partitions import WeekScenario
from common import run_folder
from endpoints.spec import ENDPOINTS_ENV, EndpointSpec, load_endpoint_specs
from warehouse.backends.backend import WAREHOUSE_ENV, WarehouseBackend, local_root, open_warehouse
from workloads.scenarios import SCENARIOS_ENV, ScenarioError, ScenarioFile, load_scenario_file

REPO_ROOT = Path(__file__).resolve().parent.parent
T = TypeVar("T")
__all__ = ["ENDPOINTS_ENV", "REPO_ROOT", "SCENARIOS_ENV", "WAREHOUSE_ENV", "ScenarioCatalog", "WarehouseResource"]


# (st_dev, st_ino, st_size, st_mtime_ns): a file edited or replaced since it was read is read again.
_FileStamp = tuple[int, int, int, int]


def _stamp(path: Path) -> _FileStamp | None:
    try:
        stat = path.stat()
    except OSError:
        return None  # not cached: the loader says what is wrong with the file
    return (stat.st_dev, stat.st_ino, stat.st_size, stat.st_mtime_ns)


# A per-process memo, keyed on the file's stamp (the argument is the key; the loader reads `path`): every step of
# a run resolves its partition (ScenarioCatalog.partition), and the steps that share a process (a one-shard run's
# run worker) read and validate the two files once. A failed load raises and is not memoized.
@functools.lru_cache(maxsize=16)
def _memoized(load: Callable[..., T], path: Path, stamp: _FileStamp, *args: object) -> T:
    loaded = load(path, *args)
    return MappingProxyType(loaded) if isinstance(loaded, dict) else loaded  # type: ignore[return-value]  # read-only


def _load_once(load: Callable[..., T], path: Path, *args: object) -> T:
    """`load(path, *args)`, from the memo while the file is unchanged (a file that cannot be stat'ed: read, so
    the loader says what is wrong with it)."""
    stamp = _stamp(path)
    return load(path, *args) if stamp is None else _memoized(load, path, stamp, *args)


class ScenarioCatalog(dg.ConfigurableResource):
    """Scenarios and the endpoints they replay against.

    Endpoints file: `endpoints_path` when set, else $COSTBENCH_ENDPOINTS (read when a run uses it, so
    the demo's dated copy reaches the runs the daemon launches), else workloads/endpoints.yaml.
    """

    scenarios_path: str = str(REPO_ROOT / "workloads" / "scenarios.yaml")
    endpoints_path: str | None = None
    repo_root: str = str(REPO_ROOT)

    def partition(
        self, context: dg.OpExecutionContext | dg.AssetExecutionContext, endpoint: str | None = None
    ) -> PartitionContext:
        """The step's partition: its week, its scenario and that scenario's endpoint as of the week.

        `endpoint`: the endpoint a run replayed (its server facts), for the steps after the replay, should the
        scenario have been pointed at another since the run started.
        """
        part = WeekScenario.of(context)
        # The endpoints file is checked whole at a run's first step, before any endpoint starts; of the scenarios
        # file, the run's own scenario (another's typo is that scenario's failure, not this run's).
        specs = self._endpoint_specs()
        loaded = self._scenarios(frozenset(specs))
        if part.scenario in loaded.broken:
            raise ScenarioError(loaded.broken[part.scenario])
        if part.scenario not in loaded.scenarios:
            raise KeyError(f"{self.scenarios_path}: no scenario named {part.scenario!r}")
        scenario = loaded.scenarios[part.scenario]
        spec = self._named(specs, endpoint or scenario.endpoint)
        return PartitionContext(part.week_start, scenario, spec.as_of(part.week_start))

    def endpoints_file(self) -> Path:
        return Path(self.endpoints_path or os.environ.get(ENDPOINTS_ENV) or REPO_ROOT / "workloads" / "endpoints.yaml")

    def endpoint(self, name: str) -> EndpointSpec:
        return self._named(self._endpoint_specs(), name)

    def _named(self, specs: Mapping[str, EndpointSpec], name: str) -> EndpointSpec:
        if name not in specs:
            raise KeyError(f"{self.endpoints_file()}: no endpoint named {name!r}")
        return specs[name]

    def _endpoint_specs(self) -> Mapping[str, EndpointSpec]:
        return _load_once(load_endpoint_specs, self.endpoints_file())

    def _scenarios(self, endpoint_names: frozenset[str]) -> ScenarioFile:
        return _load_once(load_scenario_file, Path(self.scenarios_path), Path(self.repo_root), endpoint_names)


class WarehouseResource(dg.ConfigurableResource):
    """The warehouse: a local folder (Parquet lake + DuckDB file) or a shared DuckLake (warehouse/backends/backend.py).

    Location: `root` when set, else $COSTBENCH_WAREHOUSE (read when a run uses it, e.g. a shared volume or a
    `ducklake:postgresql://...` URL on Kubernetes), else warehouse/ in the repository. With a DuckLake URL the
    run folders and spooled workloads stay in warehouse/ in the repository.
    """

    root: str | None = None

    def root_path(self) -> Path:
        return local_root(self.root, REPO_ROOT / "warehouse")

    def warehouse(self) -> WarehouseBackend:
        return open_warehouse(self.root, REPO_ROOT / "warehouse")

    def run_dir(self, week: str, scenario: str, run_id: str) -> Path:
        return run_folder.run_dir(self.root_path(), week, scenario, run_id)

    def workloads_dir(self) -> Path:
        """Traces spooled to canonical Parquet, reused by every week that replays the same file
        (workloads/workload_file.py)."""
        return self.root_path() / "workloads"

    def leases_dir(self) -> Path:
        """Lease files of endpoints started by runs (endpoints/lease_file.py)."""
        return run_folder.leases_dir(self.root_path())
