"""One entry point for every trace format: `read_trace(path, format)` picks the reader from a registry."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from workloads.azure_reader import read_azure
from workloads.mooncake_reader import read_mooncake
from workloads.workload import TraceFormat, TraceFormatError, Workload

TraceReader = Callable[[Path], Workload]

READERS: dict[TraceFormat, TraceReader] = {
    TraceFormat.MOONCAKE: read_mooncake,
    TraceFormat.AZURE: read_azure,
}


def known_formats() -> list[str]:
    return [trace_format.value for trace_format in READERS]


def parse_trace_format(trace_format: TraceFormat | str) -> TraceFormat:
    """The TraceFormat named by `trace_format`; ValueError listing the known formats otherwise."""
    try:
        parsed = TraceFormat(trace_format)
    except ValueError:
        parsed = None
    if parsed is None or parsed not in READERS:
        raise ValueError(f"unknown trace format {trace_format!r}: known formats are {', '.join(known_formats())}")
    return parsed


def read_trace(path: str | Path, trace_format: TraceFormat | str) -> Workload:
    """Read `path` as `trace_format` into the canonical Workload.

    Raises TraceFormatError (a ValueError) naming the file for a missing file, an unknown format or bad content.
    """
    path = Path(path)
    try:
        reader = READERS[parse_trace_format(trace_format)]
    except ValueError as exc:
        raise TraceFormatError(str(path), None, str(exc)) from None
    if not path.is_file():
        reason = "is a directory, not a trace file" if path.is_dir() else "no such file"
        raise TraceFormatError(str(path), None, reason)
    return reader(path)
