"""No sensor waits behind another: the shipped instance (dagster.yaml's `sensors` block) has the daemon evaluate
each sensor's tick in a thread of its own, with a thread for every sensor of the Definitions. Serially (Dagster's
default), a notice sensor held by a slow webhook for its whole tick budget would hold the endpoint lease sensor,
and a leased server would outlive its run for as long. Checked with the real `dagster-daemon`: a sensor whose tick
takes SLOW_TICK_S beside one that ticks as often as the daemon allows."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import dagster as dg

from pipelines.definitions import build_definitions

REPO = Path(__file__).resolve().parents[2]
SLOW_TICK_S = 20.0  # the notice sensors' tick budget (pipelines/failure_notice.py, WebhookPolicy.tick_budget_s)

TWO_SENSORS = f"""
import os, time
from pathlib import Path
import dagster as dg

PROBE = Path(os.environ["SENSOR_PROBE_DIR"])


def _note(name, text):
    with open(PROBE / name, "a") as out:
        out.write(f"{{text}} {{time.time()}}\\n")


@dg.sensor(name="slow_notice", minimum_interval_seconds=1, default_status=dg.DefaultSensorStatus.RUNNING)
def slow_notice(context):
    _note("slow.log", "start")
    time.sleep({SLOW_TICK_S})  # a tick held by a webhook for the whole budget
    _note("slow.log", "end")
    return dg.SkipReason("slow")


@dg.sensor(name="quick_lease", minimum_interval_seconds=1, default_status=dg.DefaultSensorStatus.RUNNING)
def quick_lease(context):
    _note("quick.log", "tick")
    return dg.SkipReason("quick")


defs = dg.Definitions(sensors=[slow_notice, quick_lease])
"""


def _times(path: Path, what: str) -> list[float]:
    lines = path.read_text().splitlines() if path.exists() else []
    return [float(t) for kind, t in (line.split() for line in lines) if kind == what]


def test_the_shipped_instance_gives_every_sensor_a_thread(tmp_path, monkeypatch):
    shutil.copy(REPO / "dagster.yaml", tmp_path / "dagster.yaml")
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path))
    with dg.DagsterInstance.get() as instance:
        settings = instance.get_sensor_settings()
    sensors = list(build_definitions(warehouse_root=tmp_path / "wh").sensors or ())
    assert settings["use_threads"] is True
    assert settings["num_workers"] >= len(sensors) == 4, [s.name for s in sensors]


def test_a_sensor_tick_held_by_a_slow_webhook_holds_no_other_sensor(tmp_path):
    home, probe = tmp_path / "home", tmp_path / "probe"
    home.mkdir()
    probe.mkdir()
    shutil.copy(REPO / "dagster.yaml", home / "dagster.yaml")
    (tmp_path / "two_sensors.py").write_text(TWO_SENSORS)
    env = {**os.environ, "DAGSTER_HOME": str(home), "SENSOR_PROBE_DIR": str(probe)}
    daemon = subprocess.Popen(
        [str(Path(sys.executable).parent / "dagster-daemon"), "run", "-f", "two_sensors.py"],
        cwd=tmp_path, env=env, stdout=subprocess.DEVNULL, stderr=open(tmp_path / "daemon.log", "wb"),
        start_new_session=True,  # its code server with it, stopped as one group below
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 120.0  # the daemon and its code server start first
        while not _times(probe / "slow.log", "start") and time.monotonic() < deadline:
            time.sleep(0.2)
        starts = _times(probe / "slow.log", "start")
        assert starts, (tmp_path / "daemon.log").read_text()[-3000:]
        slow_start = starts[0]
        # Two quick ticks while the slow one runs: not one in a serial daemon until the slow tick ends.
        while time.time() < slow_start + SLOW_TICK_S and not _times(probe / "slow.log", "end"):
            during = [t for t in _times(probe / "quick.log", "tick") if t > slow_start]
            if len(during) >= 2:
                break
            time.sleep(0.2)
        slow_end = min(_times(probe / "slow.log", "end"), default=time.time())
        during = [t for t in _times(probe / "quick.log", "tick") if slow_start < t < slow_end]
        held_s = slow_end - slow_start
        assert len(during) >= 2, f"the quick sensor ticked {len(during)} time(s) in the slow tick's {held_s:.0f} s"
    finally:
        os.killpg(daemon.pid, signal.SIGTERM)
        try:
            daemon.wait(timeout=15)
        except subprocess.TimeoutExpired:
            os.killpg(daemon.pid, signal.SIGKILL)
            daemon.wait()
        try:  # the code server, once its daemon is gone
            os.killpg(daemon.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
