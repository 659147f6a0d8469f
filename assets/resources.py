"""Resources: where the scenarios, endpoints and warehouse live. Paths only; no I/O at construction."""

from __future__ import annotations

import os
from pathlib import Path

import dagster as dg

from endpoints.spec import EndpointSpec, load_endpoint_specs
from warehouse.store import Warehouse
from workloads.scenarios import Scenario, load_scenarios

REPO_ROOT = Path(__file__).resolve().parent.parent


ENDPOINTS_ENV = "COSTBENCH_ENDPOINTS"


class ScenarioCatalog(dg.ConfigurableResource):
    """Scenarios and the endpoints they replay against.

    Endpoints file: `endpoints_path` when set, else $COSTBENCH_ENDPOINTS (read when a run uses it, so
    the demo's dated copy reaches the runs the daemon launches), else workloads/endpoints.yaml.
    """

    scenarios_path: str = str(REPO_ROOT / "workloads" / "scenarios.yaml")
    endpoints_path: str | None = None
    repo_root: str = str(REPO_ROOT)

    def scenario(self, name: str) -> Scenario:
        # Both files are checked whole at a run's first step, before any endpoint starts.
        endpoints = load_endpoint_specs(self.endpoints_file())
        scenarios = load_scenarios(Path(self.scenarios_path), Path(self.repo_root), endpoint_names=endpoints)
        if name not in scenarios:
            raise KeyError(f"{self.scenarios_path}: no scenario named {name!r}")
        return scenarios[name]

    def endpoints_file(self) -> Path:
        return Path(self.endpoints_path or os.environ.get(ENDPOINTS_ENV) or REPO_ROOT / "workloads" / "endpoints.yaml")

    def endpoint(self, name: str) -> EndpointSpec:
        path = self.endpoints_file()
        specs = load_endpoint_specs(path)
        if name not in specs:
            raise KeyError(f"{path}: no endpoint named {name!r}")
        return specs[name]


WAREHOUSE_ENV = "COSTBENCH_WAREHOUSE"


class WarehouseResource(dg.ConfigurableResource):
    """The Parquet lake and the DuckDB file beside it.

    Root: `root` when set, else $COSTBENCH_WAREHOUSE (read when a run uses it, e.g. a shared volume on
    Kubernetes), else warehouse/ in the repository.
    """

    root: str | None = None

    def root_path(self) -> Path:
        return Path(self.root or os.environ.get(WAREHOUSE_ENV) or REPO_ROOT / "warehouse")

    def warehouse(self) -> Warehouse:
        return Warehouse(self.root_path())

    def run_dir(self, week: str, scenario: str, run_id: str) -> Path:
        return self.root_path() / "runs" / f"week={week}" / f"scenario={scenario}" / run_id

    def workloads_dir(self) -> Path:
        """Traces spooled to canonical Parquet, reused by every week that replays the same file
        (workloads/workload_file.py)."""
        return self.root_path() / "workloads"

    def leases_dir(self) -> Path:
        """Lease files of endpoints started by runs (endpoints/lease_file.py)."""
        return self.root_path() / "runs" / "leases"
