"""Resources: where the scenarios, endpoints and warehouse live. Paths only; no I/O at construction."""

from __future__ import annotations

import os
from pathlib import Path

import dagster as dg

from endpoints.spec import EndpointSpec, load_endpoint_specs
from warehouse.backends.backend import WAREHOUSE_ENV, WarehouseBackend, local_root, open_warehouse
from workloads.scenarios import Scenario, load_scenarios

REPO_ROOT = Path(__file__).resolve().parent.parent
__all__ = ["ENDPOINTS_ENV", "REPO_ROOT", "SCENARIOS_ENV", "WAREHOUSE_ENV", "ScenarioCatalog", "WarehouseResource"]


ENDPOINTS_ENV = "COSTBENCH_ENDPOINTS"
# Read where the code location loads (its partitions are the scenarios' names), so it must be set for the
# process that loads pipelines.definitions: `dagster dev`, the daemon's code server.
SCENARIOS_ENV = "COSTBENCH_SCENARIOS"


def scenarios_file() -> Path:
    """$COSTBENCH_SCENARIOS, else workloads/scenarios.yaml."""
    return Path(os.environ.get(SCENARIOS_ENV) or REPO_ROOT / "workloads" / "scenarios.yaml")


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
        return self.root_path() / "runs" / f"week={week}" / f"scenario={scenario}" / run_id

    def workloads_dir(self) -> Path:
        """Traces spooled to canonical Parquet, reused by every week that replays the same file
        (workloads/workload_file.py)."""
        return self.root_path() / "workloads"

    def leases_dir(self) -> Path:
        """Lease files of endpoints started by runs (endpoints/lease_file.py)."""
        return self.root_path() / "runs" / "leases"
