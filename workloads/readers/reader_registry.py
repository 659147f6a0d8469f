"""One entry point for every trace format, picked from a registry: `scan_trace(path, format, options)` streams
a trace of any size; `read_trace` collects a small one into memory (workloads/trace_scan.py)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from workloads.canonical_parquet import scan_canonical
from workloads.prompts.block_hasher import DEFAULT_BLOCK_TOKENS
from workloads.prompts.token_counter import load_token_counter
from workloads.readers.azure_reader import scan_azure
from workloads.readers.burstgpt_reader import scan_burstgpt
from workloads.readers.gateway_reader import scan_gateway
from workloads.readers.mooncake_reader import scan_mooncake
from workloads.readers.sharegpt_reader import scan_sharegpt
from workloads.trace_scan import TraceScan, collect
from workloads.workload import TraceFormat, TraceFormatError, Workload


@dataclass(frozen=True, slots=True)
class ReadOptions:
    """Options some formats take; a format ignores the ones it has no use for."""

    tokenizer_path: Path | None = None  # ShareGPT, gateway: a local tokenizer.json (else the approximation)
    block_size: int = DEFAULT_BLOCK_TOKENS  # ShareGPT, gateway: tokens per prefix block
    model: str | None = None  # BurstGPT, gateway: keep only this model's requests


TraceScanner = Callable[[Path, ReadOptions], TraceScan]

READERS: dict[TraceFormat, TraceScanner] = {
    TraceFormat.MOONCAKE: lambda path, _: scan_mooncake(path),
    TraceFormat.AZURE: lambda path, _: scan_azure(path),
    TraceFormat.BURSTGPT: lambda path, options: scan_burstgpt(path, options.model),
    TraceFormat.SHAREGPT: lambda path, options: scan_sharegpt(
        path, load_token_counter(options.tokenizer_path), options.block_size
    ),
    TraceFormat.CANONICAL: lambda path, _: scan_canonical(path),
    TraceFormat.GATEWAY: lambda path, options: scan_gateway(
        path, load_token_counter(options.tokenizer_path), options.block_size, options.model
    ),
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


def read_trace(path: str | Path, trace_format: TraceFormat | str, options: ReadOptions | None = None) -> Workload:
    """Read `path` as `trace_format` into the canonical Workload, all in memory (see scan_trace for big files).

    Raises TraceFormatError (a ValueError) naming the file for a missing file, an unknown format, an
    unusable option (tokenizer file, block size) or bad content.
    """
    scan = scan_trace(path, trace_format, options)
    try:
        return collect(scan)
    except TraceFormatError:
        raise
    except ValueError as exc:
        raise TraceFormatError(scan.source_path, None, str(exc)) from None


def checked_reader(path: Path, trace_format: TraceFormat | str, options: ReadOptions) -> TraceScanner:
    """The format's reader, once the file, the format and the options are fit to read (nothing read yet)."""
    try:
        reader = READERS[parse_trace_format(trace_format)]
    except ValueError as exc:
        raise TraceFormatError(str(path), None, str(exc)) from None
    if not path.is_file():
        reason = "is a directory, not a trace file" if path.is_dir() else "no such file"
        raise TraceFormatError(str(path), None, reason)
    if options.block_size <= 0:
        raise TraceFormatError(str(path), None, f"block size must be > 0, got {options.block_size}")
    return reader


def scan_trace(path: str | Path, trace_format: TraceFormat | str, options: ReadOptions | None = None) -> TraceScan:
    """Start reading `path` as `trace_format`: its facts now, its rows as the batches are consumed.

    Raises TraceFormatError like read_trace, here for what is wrong before the first row and while
    the batches are consumed for bad content.
    """
    path = Path(path)
    options = options if options is not None else ReadOptions()
    reader = checked_reader(path, trace_format, options)
    try:
        return reader(path, options)
    except TraceFormatError:
        raise
    except ValueError as exc:  # an unusable tokenizer file: name it, and the trace it was for
        raise TraceFormatError(str(path), None, str(exc)) from None
