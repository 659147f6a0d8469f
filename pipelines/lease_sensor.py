"""No endpoint outlives its run: the sensor that stops the leased servers of runs no longer running.

A run that succeeds or fails stops its own endpoint (finish_replay, the failure hook). A run terminated
from the UI, or whose run worker was killed, may never get there: its server (on a GPU host, an SGLang
process holding 8 GPUs) would run on, reparented to init. Every tick this sensor reads the lease files
(endpoints/lease_file.py) and ends each whose run is finished or cancelling, or whose run worker no
longer exists; a run left marked as started by a dead worker is marked failed.
A lease of a run this instance does not know (another instance sharing the warehouse) is ended only
when its run worker is gone. A file in the leases folder that is not a lease (torn, or another release's
shape) is moved aside into `unreadable/` and logged once; it never stops the sensor from ending the others.
"""

from __future__ import annotations

import dagster as dg

from assets.resources import WarehouseResource
from endpoints.lease_file import LeaseRecord, end_lease, scan_leases, set_aside

LEASE_SENSOR_INTERVAL_S = 10
_OVER = {dg.DagsterRunStatus.SUCCESS, dg.DagsterRunStatus.FAILURE, dg.DagsterRunStatus.CANCELED,
         dg.DagsterRunStatus.CANCELING}  # fmt: skip


def lease_over(lease: LeaseRecord, run: dg.DagsterRun | None) -> str | None:
    """Why this lease must end now, or None while its run may still use the endpoint."""
    if run is None:
        # Another instance's run on a shared warehouse, or a run deleted from this one: only its
        # worker's death is ours to act on.
        return (
            f"run {lease.owner_run_id} is not in this instance and its run worker is gone"
            if lease.owner_alive() is False
            else None
        )
    if run.status in _OVER:
        return f"run {run.run_id} is {run.status.value}"
    if lease.owner_alive() is False:
        return f"run {run.run_id}'s run worker (pid {lease.owner_pid}) is gone"
    return None


@dg.sensor(
    minimum_interval_seconds=LEASE_SENSOR_INTERVAL_S,
    default_status=dg.DefaultSensorStatus.RUNNING,
    description="Stops the endpoint of any run that is no longer running (terminated, or its run worker killed).",
)
def endpoint_lease_sensor(context: dg.SensorEvaluationContext, warehouse: WarehouseResource) -> dg.SkipReason:
    ended = []
    scan = scan_leases(warehouse.leases_dir())
    for error in scan.unreadable:
        context.log.warning(f"unreadable lease {error.path.name}, moved to {set_aside(error.path)}: {error}")
    for lease in scan.leases:
        run = context.instance.get_run_by_id(lease.owner_run_id)
        reason = lease_over(lease, run)
        if reason is None:
            continue
        if end_lease(warehouse.leases_dir(), lease.owner_run_id):
            ended.append(f"{lease.endpoint} ({reason})")
            context.log.info(f"stopped endpoint {lease.endpoint}: {reason}")
        if run is not None and not run.is_finished and run.status is not dg.DagsterRunStatus.CANCELING:
            context.instance.report_run_failed(run, f"{reason}; its endpoint {lease.endpoint} was stopped")
    return dg.SkipReason(f"stopped {', '.join(ended)}" if ended else "every leased endpoint belongs to a running run")
