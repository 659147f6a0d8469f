"""A live progress bar for a terminal: sent, done, errors, in flight, schedule lag.

It reads `ReplayProgress` counters from rich's refresh thread a few times a second, so the replay's
event loop does no rendering work. Off when the output is not a terminal or the CI variable is set:
logs stay clean in CI and in Dagster.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping
from contextlib import contextmanager

from rich.console import Console, Group
from rich.live import Live
from rich.progress_bar import ProgressBar
from rich.text import Text

from replay.recording.progress_counters import ReplayProgress

REFRESH_PER_S = 4


def progress_wanted(console: Console, environ: Mapping[str, str] = os.environ) -> bool:
    return console.is_terminal and not environ.get("CI")


def render_progress(progress: ReplayProgress, lag_degraded_ms: float) -> Group:
    total = progress.total or None
    lag_style = "bold red" if progress.lag_max_ms > lag_degraded_ms else "green"
    line = Text.assemble(
        f"sent {progress.sent}", f"/{progress.total}" if total else "", "  ",
        f"done {progress.done}  ",
        ("errors " + str(progress.errors), "bold red" if progress.errors else ""), "  ",
        f"in flight {progress.in_flight}  ",
        ("lag " + f"{progress.lag_last_ms:.1f} ms (max {progress.lag_max_ms:.1f})", lag_style),
    )  # fmt: skip
    return Group(ProgressBar(total=total, completed=progress.done, width=60), line)


@contextmanager
def progress_display(
    progress: ReplayProgress, console: Console, enabled: bool, lag_degraded_ms: float
) -> Iterator[None]:
    if not enabled:
        yield
        return
    with Live(
        get_renderable=lambda: render_progress(progress, lag_degraded_ms),
        console=console,
        refresh_per_second=REFRESH_PER_S,
        transient=True,
    ):
        yield
