# Shared fixtures: a throwaway PostgreSQL cluster (postgres_cluster, postgres_database); ahead_of_other_tests.
import os
import signal
from pathlib import Path

import pytest
from xdist.scheduler import LoadScopeScheduling

pytest_plugins = ["postgres_cluster"]

# `make test` runs three pytest-xdist workers (Makefile), each taking whole test files, so a file's module fixtures
# are set up once. xdist's own `--dist loadgroup` cannot do that here: it groups by a suffix it appends to each
# test's nodeid, which pytest 9 no longer lets it change, so every test went its own way (both workers set up each
# instance file's daemon, the PostgreSQL one twice). This scheduler groups by file instead, except the files
# below, which share a group and so run one after the other: each drives a real Dagster instance whose replays
# keep a real-time schedule, and two at once on a 2-core machine pushed the replays' schedule lag past what the
# runs_quality check allowed (CI, 2026-12-01; the files now give their real-time scenarios a 1 s bound, and the two at
# once have not been tried since). That group is handed out first: it is the longest, and the rest fills the other
# workers meanwhile, in xdist's order (Makefile: handing every long file out first was slower).
SHARED_GROUPS = {"test_pipelines_instance": "dagster-instance", "test_pipelines_instance_postgres": "dagster-instance"}
FIRST_GROUP = "dagster-instance"


class _ByFile(LoadScopeScheduling):
    def _split_scope(self, nodeid: str) -> str:
        path = nodeid.split("::", 1)[0]
        return SHARED_GROUPS.get(Path(path).stem, path)

    def _assign_work_unit(self, node) -> None:
        if FIRST_GROUP in self.workqueue:
            self.workqueue.move_to_end(FIRST_GROUP, last=False)
        super()._assign_work_unit(node)


# `make test-fast` (`pytest --fast`) leaves these files out, not even importing them: each takes a real Dagster
# instance or `dagster dev`, PostgreSQL, Chromium, or tens of seconds of replays and runs on 2 cores (their sum
# was 15.9 of the suite's 18.5 test-minutes, 2026-12-02). `make test` runs everything.
SLOW_FILES = frozenset(
    {
        "test_pipelines_instance",
        "test_pipelines_instance_postgres",
        "test_pipelines_demo_signals",
        "test_pipelines_run_command",
        "test_pipelines_dagster_dev",
        "test_pipelines_shards",
        "test_pipelines_partition_context",
        "test_pipelines_advertised_endpoint",
        "test_cli_errors",
        "test_docs_examples",
        "test_warehouse_analyst",
        "test_warehouse_ducklake",
        "test_warehouse_capacity",
        "test_replay_against_sim",
        "test_sim_speculative",
        "test_endpoints_provision",
        "test_replay_structured",
        "test_replay_durability",
        "test_pipelines_lease_sensor",
        "test_pipelines_sensor_threads",
        "test_pipelines_daemon_watchdog",
        "test_warehouse_notebook",
    }
)


def pytest_addoption(parser):
    parser.addoption("--fast", action="store_true", help="leave out the slow test files (tests/conftest.py SLOW_FILES)")


def pytest_ignore_collect(collection_path, config):
    if config.getoption("--fast") and collection_path.suffix == ".py" and collection_path.stem in SLOW_FILES:
        return True
    return None


def pytest_xdist_make_scheduler(config, log):
    if config.getvalue("dist") == "loadgroup":
        return _ByFile(config, log)
    return None


REALTIME_NICE = -10


def pytest_configure(config):
    """A suite started in the background by a script (`make test &`, nohup) inherits SIGINT ignored, and so would
    every command the tests start: the tests that stop one with Ctrl-C would wait out their bounds and leave it
    running (three did in a clean-clone .ci/run started that way, 2026-12-08). A Python handler here is reset to the
    default in every process started from this one."""
    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)


@pytest.fixture(scope="module")
def ahead_of_other_tests():
    """For a short test that measures a real-time twin (a capacity ramp, a shadow's latency ratio): this worker,
    and the twins it starts (they inherit it), run at a higher priority than the other xdist workers' tests, whose
    CPU would otherwise be what the test measures. Where raising priority is not allowed (not root), nothing
    changes. Not for the Dagster instance files: everything they start (daemon, code servers, run workers with
    their quality checks, dbt builds and reports) inherits it, and for minutes the other workers' tests ran
    several times slower than beside equals (one, 6 s alone, passed no 300 s timeout in CI, 2026-12-07); their
    real-time replays allow a schedule lag of 1 s at p99 instead."""
    try:
        os.nice(REALTIME_NICE)
    except OSError:
        yield
        return
    try:
        yield
    finally:
        os.nice(-REALTIME_NICE)
