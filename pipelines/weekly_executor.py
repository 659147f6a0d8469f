"""The weekly job's own executor: a run's steps in its run worker, unless its scenario replays in shards.

Every run of the job, however launched (schedule, backfill, launchpad, `dagster job launch`), is started
by the run launcher in a run worker of its own; this executor then runs its steps. A scenario with one
shard has nothing to run in parallel, so its steps run one after the other in the run worker, which has
already imported the pipeline: no forkserver importing it and Great Expectations again before the first
step (6.2 s of CPU on the 2-core machine), no process per step. A scenario
with shards runs under the multiprocess executor, each step in its own process, so the shards replay at
once and meet at one t0 (assets/replay_asset.py).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import dagster as dg

import pipelines.pool_wait  # noqa: F401  (the in-process executor waits for a pool slot asleep)

SCENARIO_TAG = "dagster/partition/scenario"
# Steps in their own processes, forked from a server that has already imported the pipeline (and with it
# pandas) and Great Expectations, so a step starts in a fraction of a second instead of importing it all
# (spawn). Up to 4 steps at once: after the replay the lake steps are short and mostly wait on disk.
MULTIPROCESS_CONFIG: dict[str, object] = {
    "max_concurrent": 4,
    "start_method": {"forkserver": {"preload_modules": ["pipelines.definitions", "great_expectations"]}},
    "retries": {"enabled": {}},
}
IN_PROCESS_CONFIG: dict[str, object] = {"retries": {"enabled": {}}}


class _ByShards(dg.Executor):
    def __init__(self, in_process: dg.Executor, multiprocess: dg.Executor, shards_of: Callable[[str | None], int]):
        self._in_process = in_process
        self._multiprocess = multiprocess
        self._shards_of = shards_of

    @property
    def retries(self):
        return self._in_process.retries

    def execute(self, plan_context, execution_plan) -> Iterator:
        shards = self._shards_of(plan_context.dagster_run.tags.get(SCENARIO_TAG))
        chosen = self._multiprocess if shards > 1 else self._in_process
        return chosen.execute(plan_context, execution_plan)


def _created(definition: dg.ExecutorDefinition, init_context: dg.InitExecutorContext, config: dict) -> dg.Executor:
    context = dg.InitExecutorContext(
        job=init_context.job, executor_def=definition, executor_config=config, instance=init_context.instance
    )
    return definition.executor_creation_fn(context)  # type: ignore[misc]


def weekly_executor(shards_of: Callable[[str | None], int]) -> dg.ExecutorDefinition:
    """The executor for the weekly job; `shards_of(scenario name)` says how many shards a run's scenario has
    (1 for a run of no known scenario)."""

    @dg.executor(name="weekly", requirements=dg.multiple_process_executor_requirements())
    def weekly(init_context: dg.InitExecutorContext) -> dg.Executor:
        return _ByShards(
            _created(dg.in_process_executor, init_context, IN_PROCESS_CONFIG),
            _created(dg.multiprocess_executor, init_context, MULTIPROCESS_CONFIG),
            shards_of,
        )

    return weekly
