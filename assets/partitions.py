"""Partitions: week (Monday start, UTC) x scenario (from workloads/scenarios.yaml); the week alone for the twin's
calibration."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date

import dagster as dg

# The first week the pipeline knows about; backfills start here.
FIRST_WEEK = "2026-01-05"  # a Monday


def build_weeks() -> dg.WeeklyPartitionsDefinition:
    """The week dimension alone, for what is measured once a week for no scenario in particular (the twin's
    calibration)."""
    return dg.WeeklyPartitionsDefinition(start_date=FIRST_WEEK, day_offset=1, timezone="UTC")  # Monday starts


def build_partitions(scenario_names: list[str]) -> dg.MultiPartitionsDefinition:
    return dg.MultiPartitionsDefinition(
        {"week": build_weeks(), "scenario": dg.StaticPartitionsDefinition(scenario_names)}
    )


@dataclass(frozen=True, slots=True)
class WeekScenario:
    week_start: date
    scenario: str

    @staticmethod
    def of(
        context: dg.OpExecutionContext | dg.AssetExecutionContext | dg.AssetCheckExecutionContext,
    ) -> "WeekScenario":
        key = context.partition_key
        if not isinstance(key, dg.MultiPartitionKey):
            raise TypeError(f"expected a (week, scenario) partition key, got {key!r}")
        keys = key.keys_by_dimension
        return WeekScenario(date.fromisoformat(keys["week"]), keys["scenario"])
