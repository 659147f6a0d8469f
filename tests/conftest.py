# Shared fixtures: a throwaway PostgreSQL cluster (postgres_cluster, postgres_database); ahead_of_other_tests.
import os

import pytest

pytest_plugins = ["postgres_cluster"]

# `make test` runs two pytest-xdist workers with --dist loadgroup; every test file is one group (its module
# fixtures set up once), except the files below, which share a group and so run one after the other: each
# drives a real Dagster instance whose replays keep a real-time schedule, and two at once on a 2-core
# machine push the replays' schedule lag past what the runs_quality check allows.
SHARED_GROUPS = {"test_pipelines_instance": "dagster-instance", "test_pipelines_instance_postgres": "dagster-instance"}


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config, items):
    for item in items:
        stem = item.path.stem
        item.add_marker(pytest.mark.xdist_group(SHARED_GROUPS.get(stem, stem)))


REALTIME_NICE = -5


@pytest.fixture(scope="module")
def ahead_of_other_tests():
    """For a module whose replays keep a real-time schedule: this worker, and the daemon, code servers, run
    workers and twins it starts (they inherit it), runs at a higher priority than the other xdist worker's
    tests, whose CPU would otherwise be what runs_quality's schedule-lag rule measures (CI, 2026-12-01: one run
    of the PostgreSQL instance file failed it beside the other worker). Where raising priority is not allowed
    (not root), nothing changes."""
    try:
        os.nice(REALTIME_NICE)
    except OSError:
        yield
        return
    try:
        yield
    finally:
        os.nice(-REALTIME_NICE)
