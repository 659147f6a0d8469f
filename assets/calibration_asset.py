"""The twin's error as a series: each week the twin's fit and validation tables (endpoints/sim/calibration/
calibration_tables.py, what bench/twin_calibration.py prints) are recomputed and stored in the lake, one row per
published point and metric (warehouse/schema.sql, twin_calibration), and checked against the target of docs/twin.md
("Calibration"). Partitioned by week only: the figures belong to no scenario."""

import time
from datetime import date

import dagster as dg

from assets.column_schemas import column_schema
from assets.resources import WarehouseResource
from endpoints.sim.calibration.calibration_tables import (
    MAX_MEDIAN_ERROR_FACTOR,
    RATIO_BOUNDS,
    CalibrationFigure,
    PointSet,
    ValidationVerdict,
    calibration_figures,
    run_calibration,
    twin_version,
    validation_verdict,
)
from warehouse.parquet.calibration_columns import (
    TWIN_CALIBRATION_PARTITION,
    TWIN_CALIBRATION_TABLE,
    calibration_figures_of,
    twin_calibration_table,
)

TWIN_CALIBRATION_ASSET = "twin_calibration"


class TwinCalibrationConfig(dg.Config):
    """Which published points to run: full (every one, about a minute: the weekly schedule's) or quick (six, a few
    seconds, the same figures for them)."""

    point_set: str = PointSet.FULL.value


def _shown(figure: CalibrationFigure) -> dict[str, object]:
    return {
        "point_key": figure.point_key,
        "metric": figure.metric,
        "ratio": round(figure.ratio, 4),
        "twin_value": round(figure.twin_value, 4),
        "published_value": figure.published_value,
        "setup": figure.setup,
    }


def _verdict_metadata(verdict: ValidationVerdict) -> dict[str, dg.MetadataValue]:
    factor = verdict.median_error_factor
    return {
        "validation_figures": dg.MetadataValue.int(verdict.figures),
        "validation_median_error_factor": dg.MetadataValue.float(float("nan") if factor is None else factor),
        "outside_bounds": dg.MetadataValue.json([_shown(f) for f in verdict.outside_bounds]),
    }


def build_calibration_asset(weeks: dg.PartitionsDefinition) -> tuple[dg.AssetsDefinition, dg.AssetChecksDefinition]:
    @dg.asset(
        name=TWIN_CALIBRATION_ASSET,
        partitions_def=weeks,
        group_name="twin",
        kinds={"parquet"},
        metadata=column_schema(TWIN_CALIBRATION_TABLE),
        description="The twin's fit and validation tables recomputed for the week: every published calibration "
        "point on the twin in virtual time, one row per point and metric with the ratio twin / published, the twin's "
        "version and the SGLang releases its constants were fitted against (table twin_calibration).",
    )
    def twin_calibration(
        context: dg.AssetExecutionContext, config: TwinCalibrationConfig, warehouse: WarehouseResource
    ) -> None:
        run = run_calibration(PointSet(config.point_set))
        figures = calibration_figures(run, twin_version(), time.time())
        week_start = date.fromisoformat(context.partition_key)
        table = twin_calibration_table(figures)
        where = warehouse.warehouse().write_partition(
            TWIN_CALIBRATION_TABLE, week_start, TWIN_CALIBRATION_PARTITION, table
        )
        for point, why in run.not_modelled:
            context.log.warning(f"{point.key} ({point.setup}): not modelled ({why})")
        context.add_output_metadata(
            {
                "rows": table.num_rows,
                "path": dg.MetadataValue.path(where),
                "point_set": run.point_set.value,
                "fit_points": len(run.fit),
                "validation_points": len(run.validation),
                "calibration_wall_s": round(run.wall_s, 1),
                **_verdict_metadata(validation_verdict(figures)),
            }
        )

    @dg.asset_check(
        asset=TWIN_CALIBRATION_ASSET,
        partitions_def=weeks,
        description=f"The validation set (predictions, not fitted points) meets the twin's target: median error "
        f"factor exp(median |log ratio|) at most {MAX_MEDIAN_ERROR_FACTOR} and every throughput, mean TTFT and mean "
        f"TPOT ratio within {RATIO_BOUNDS[0]}-{RATIO_BOUNDS[1]}; the figures outside are in the metadata.",
    )
    def twin_calibration_target(
        context: dg.AssetCheckExecutionContext, warehouse: WarehouseResource
    ) -> dg.AssetCheckResult:
        week_start = date.fromisoformat(context.partition_key)
        stored = warehouse.warehouse().read_partition(TWIN_CALIBRATION_TABLE, week_start, TWIN_CALIBRATION_PARTITION)
        verdict = validation_verdict(calibration_figures_of(stored))
        return dg.AssetCheckResult(
            passed=verdict.passed, severity=dg.AssetCheckSeverity.ERROR, metadata=_verdict_metadata(verdict)
        )

    return twin_calibration, twin_calibration_target
