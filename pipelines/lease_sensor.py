"""No endpoint outlives its run: the sensor that stops the leased servers of runs no longer running.

A run that succeeds or fails stops its own endpoint (finish_replay, the failure hook). A run terminated
from the UI, or whose run worker was killed, may never get there: its server (on a GPU host, an SGLang
process holding 8 GPUs) would run on, reparented to init. Every tick this sensor reads the lease files
(endpoints/lease_file.py) and ends each whose run is finished or cancelling, or whose run worker no
longer exists; a run left marked as started by a dead worker is marked failed.
A lease of a run this instance does not know (another instance sharing the warehouse) is ended only
when its run worker is gone. A file in the leases folder that is not a lease (torn, another release's
shape, a directory or a FIFO named *.json: never opened) is moved aside into `unreadable/` and logged once;
it never stops the sensor from ending the others. Only a process group proven to be the lease's server is
signalled (endpoints/lease_file.py: check_group): never group 0 or 1, this sensor's own, its daemon's or an
ancestor's, nor one whose leader has exited. A lease that proves nothing (no leader's start recorded, say) is
moved into `unproven/`, unsignalled, with a warning naming the group and what is left in it.
"""

from __future__ import annotations

import dagster as dg

from assets.resources import WarehouseResource
from endpoints.lease_file import LeaseFileError, LeaseRecord, end_lease, scan_leases, set_aside

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
    ended, aside = [], []
    scan = scan_leases(warehouse.leases_dir())
    for error in scan.unreadable:
        _set_aside_unreadable(context, error)
    for lease in scan.leases:
        run = context.instance.get_run_by_id(lease.owner_run_id)
        reason = lease_over(lease, run)
        if reason is None:
            continue
        try:
            done = end_lease(warehouse.leases_dir(), lease.owner_run_id)
        except LeaseFileError as exc:  # replaced since the scan by something that is not a lease
            _set_aside_unreadable(context, exc)
            continue
        except OSError as exc:  # one lease that cannot be ended never stops the sensor from ending the others
            context.log.error(f"could not end the lease of endpoint {lease.endpoint} ({reason}): {exc}")
            continue
        if done is not None and done.set_aside_to is not None:
            aside.append(lease.endpoint)
            context.log.warning(
                f"lease of endpoint {lease.endpoint} ({reason}) set aside to {done.set_aside_to}, its process group "
                f"not signalled: {done.check.why}"
            )
        elif done is not None:
            ended.append(f"{lease.endpoint} ({reason})")
            what = "stopped" if done.signalled else "ended the lease of"
            context.log.info(f"{what} endpoint {lease.endpoint}: {reason}; {done.check.why}")
        if run is not None and not run.is_finished and run.status is not dg.DagsterRunStatus.CANCELING:
            fate = "its lease was set aside, unsignalled" if done is not None and done.set_aside_to else "was stopped"
            context.instance.report_run_failed(run, f"{reason}; its endpoint {lease.endpoint} {fate}")
    said = [f"stopped {', '.join(ended)}"] if ended else []
    said += [f"set aside, not signalled: {', '.join(aside)} (see the warnings)"] if aside else []
    return dg.SkipReason("; ".join(said) or "every leased endpoint belongs to a running run")


def _set_aside_unreadable(context: dg.SensorEvaluationContext, error: LeaseFileError) -> None:
    try:
        context.log.warning(f"unreadable lease {error.path.name}, moved to {set_aside(error.path)}: {error}")
    except FileNotFoundError:
        return  # removed meanwhile
    except OSError as exc:  # logged on every tick until a person moves it: it is not read as a lease either way
        context.log.warning(f"unreadable lease {error.path.name}, left in place (cannot move it aside: {exc}): {error}")
