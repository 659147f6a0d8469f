"""Stage 4: the marts, one Dagster asset per model of the dbt project (warehouse/dbt/), through dagster-dbt.

Each model is its own asset (group `marts`; their stages `marts_staging`; a team's own models `team`), with the
lineage the project declares: the lake assets (requests_lake, runs_lake, ...) are the project's sources, so the
graph runs from the replay down to each mart. The marts' dbt data tests are these assets' checks, with the test's
severity. One step builds them all: a warehouse refresh (warehouse/backends/), which checks the lake, runs `dbt
build` in its own process and swaps the new database in whole, on either backend. Without a passing build nothing is
published, so a failed model or ERROR test fails the step and its checks say which.
"""

from collections.abc import Mapping
from typing import Any

import dagster as dg

from assets.partitions import WeekScenario
from assets.resources import WarehouseResource
from assets.trend_assets import partition_trend_metadata
from common.scoped_imports import hidden_imports
from warehouse.backends.store import RefreshResult
from warehouse.marts.dbt_build import STAGING_SCHEMA, DataTest, MartBuildError, manifest_path

# The project's sources that are assets of the pipeline (assets/lake_assets.py); the others (prices, the lake's audit)
# are made by the refresh itself and show as external assets under their own names.
_LAKE_ASSETS = {
    "runs": "runs_lake",
    "requests": "requests_lake",
    "server_samples": "server_samples_lake",
    "gpu_samples": "gpu_samples_lake",
}
_GROUPS = {STAGING_SCHEMA: "marts_staging", "team": "team"}


# dbt-core out of view while dagster-dbt imports. dagster-dbt only reads the manifest here; the build imports dbt-core
# itself, in the refresh (warehouse/marts/dbt_build.py). With dbt-core in view, dagster-dbt imports much of it at once
# (its compat module, then dbt's selector for the default select-all), in every process that loads this code location:
# a code server, each `dagster` command, a run worker long before (or without) its marts step. Importing
# pipelines.definitions took 3.6 s of CPU with it and 2.1 s without (three runs each, this 2-core box, 2026-12-07).
# Without it, dagster-dbt takes its own types and reads the default selection (every node) from the manifest: a mode
# it supports (it does not require dbt-core). tests/pipelines/test_pipelines_dagster.py checks that the graph is the
# same either way. Where dbt is already imported (a process that refreshed first), nothing is hidden.
with hidden_imports("dbt"):
    from dagster_dbt import DagsterDbtTranslator, DagsterDbtTranslatorSettings, dbt_assets  # noqa: E402


class MartTranslator(DagsterDbtTranslator):
    """A model's asset key is its name (weekly_trends, run_summary, ...); a lake source's, the lake asset's."""

    def get_asset_key(self, dbt_resource_props: Mapping[str, Any]) -> dg.AssetKey:
        name = dbt_resource_props["name"]
        if dbt_resource_props["resource_type"] == "source":
            return dg.AssetKey(_LAKE_ASSETS.get(name, name))
        return dg.AssetKey(name)

    def get_group_name(self, dbt_resource_props: Mapping[str, Any]) -> str | None:
        return _GROUPS.get(dbt_resource_props.get("schema", ""), "marts")


def build_mart_assets(partitions: dg.PartitionsDefinition) -> dg.AssetsDefinition:
    translator = MartTranslator(settings=DagsterDbtTranslatorSettings(enable_asset_checks=True))

    @dbt_assets(
        manifest=manifest_path(),
        name="marts",
        partitions_def=partitions,
        dagster_dbt_translator=translator,
        pool="warehouse_writer",  # DuckDB takes one writing process
    )
    def marts(context: dg.AssetExecutionContext, warehouse: WarehouseResource):
        store = warehouse.warehouse()
        part = WeekScenario.of(context)
        try:  # the partition's week, and any other week whose lake changed since the last refresh
            refreshed = store.refresh(weeks=[part.week_start])
        except MartBuildError as failed:
            yield from _check_results(context, failed.tests)
            raise
        for message in [q.message for q in refreshed.quarantined] + [m.message for m in refreshed.missing]:
            context.log.error(message)  # the lake_intact check fails the affected weeks
        # In dbt's order (each model after those it reads), as a multi-asset must yield them.
        selected = {key.path[-1]: key for key in context.selected_asset_keys}
        for name, seconds in refreshed.dbt_seconds:
            key = selected.pop(name, None)
            if key is None:
                continue  # a test, or a model not selected
            metadata = {"dbt_s": round(seconds, 3)}
            if key == dg.AssetKey("weekly_trends"):
                metadata.update(_refresh_metadata(refreshed, store.location))
                metadata.update(partition_trend_metadata(store, part))
            yield dg.MaterializeResult(asset_key=key, metadata=metadata)
        if selected:  # dbt built every model; one it did not name would be a project this code does not know
            raise dg.Failure(f"the marts' build did not report {sorted(selected)}")
        yield from _check_results(context, refreshed.dbt_tests)

    return marts


def _check_results(context: dg.AssetExecutionContext, tests: tuple[DataTest, ...]):
    by_name = {test.name: test for test in tests}
    for check in context.selected_asset_check_keys:
        test = by_name.get(check.name)
        if test is None:
            continue  # not run: the build stopped before it (a model it tests failed)
        severity = dg.AssetCheckSeverity.WARN if test.severity == "warn" else dg.AssetCheckSeverity.ERROR
        yield dg.AssetCheckResult(
            asset_key=check.asset_key,
            check_name=check.name,
            passed=test.passed,
            severity=severity,
            metadata={"dbt_message": test.message} if test.message else {},
        )


def _refresh_metadata(refreshed: RefreshResult, location: str) -> dict:
    # A local warehouse is a DuckDB file; a DuckLake one a catalog URL (printed without its password).
    where = dg.MetadataValue.path(str(refreshed.db_path)) if refreshed.db_path else dg.MetadataValue.text(location)
    metadata: dict = {"duckdb": where, "lake_files": refreshed.lake_files}
    if refreshed.scope is not None:  # which weeks the week tables were computed for, and why
        weeks = refreshed.scope.weeks
        metadata["rebuilt_weeks"] = "every week" if weeks is None else ", ".join(w.isoformat() for w in weeks)
        metadata["refresh_scope"] = refreshed.scope.reason
    if refreshed.quarantined:
        metadata["quarantined"] = dg.MetadataValue.json([q.message for q in refreshed.quarantined])
    if refreshed.missing:
        metadata["missing"] = dg.MetadataValue.json([m.message for m in refreshed.missing])
    return metadata
