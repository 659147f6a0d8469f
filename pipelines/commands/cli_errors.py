"""How `costbench` fails: one line on stderr, `costbench: error: <what and where>`, and an exit status.

Only failures a user can act on become a line: the project's typed errors (a bad trace or config file, a bad
option, an unreachable endpoint, a warehouse that cannot be read or written) and OSError (a path the user
gave, a port, a connection). Anything else is a bug and keeps its traceback. Exit statuses: docs/README.md.
"""

from __future__ import annotations

import duckdb

from common.config_file import ConfigFileError
from replay.recording.shard_merge import ShardMergeError
from replay.replay_config import ReplayInputError
from replay.schedule.rendezvous import RendezvousError
from warehouse.backends.store import WarehouseError
from warehouse.parquet.lake import LakeError
from warehouse.schema_migrations import SchemaVersionError
from workloads.workload import TraceFormatError

EXIT_FAILED = 1  # it ran, and what it ran failed (a run of the demo, or its runs did not finish)
EXIT_BAD_INPUT = 2  # it could not do what was asked: bad input, bad option, unusable path or endpoint
EXIT_INTERRUPTED = 130  # Ctrl-C (128 + SIGINT)


class CommandInputError(ValueError):
    """A command's own check of what the user typed failed; the message names the option or path and why."""


# Most specific first: the first match gives the exit status.
USER_ERRORS: tuple[tuple[type[BaseException], int], ...] = (
    (CommandInputError, EXIT_BAD_INPUT),
    (TraceFormatError, EXIT_BAD_INPUT),
    (ConfigFileError, EXIT_BAD_INPUT),  # scenarios, endpoints, prices: bad YAML or bad values
    (ReplayInputError, EXIT_BAD_INPUT),
    (RendezvousError, EXIT_BAD_INPUT),  # a shard that did not come, a ready file that is not one
    (ShardMergeError, EXIT_BAD_INPUT),
    (WarehouseError, EXIT_BAD_INPUT),
    (LakeError, EXIT_BAD_INPUT),
    (SchemaVersionError, EXIT_BAD_INPUT),
    (duckdb.Error, EXIT_BAD_INPUT),
    (OSError, EXIT_BAD_INPUT),
)


def exit_status(exc: BaseException) -> int | None:
    """The exit status for a failure the user can act on; None for a bug (let it show its traceback)."""
    return next((status for kind, status in USER_ERRORS if isinstance(exc, kind)), None)


def one_line(exc: BaseException) -> str:
    """The failure as one line: an OSError as `<path>: <reason>`, any message's lines joined by "; "."""
    if isinstance(exc, OSError) and exc.strerror and exc.filename is not None:
        target = f"{exc.filename} -> {exc.filename2}" if exc.filename2 is not None else f"{exc.filename}"
        text = f"{target}: {exc.strerror}"
    else:
        text = str(exc) or type(exc).__name__
    # Some messages span lines (YAML's marks, one line per config problem): keep every line's words, drop the
    # lines that only point at a column.
    lines = [line.strip() for line in text.splitlines()]
    return "; ".join(line for line in lines if line.strip("^ "))
