"""Every way a command line can fail, run as the user runs it (the installed `costbench` script, or
`python -m ...`) in a real subprocess: it exits non-zero with the documented status, says on ONE stderr line
what was wrong and where (the path or the option, and the reason), shows no traceback, and leaves no file
behind. Endpoints are 127.0.0.1 only: a closed port for an unreachable one, a held socket for a taken one."""

from __future__ import annotations

import fnmatch
import os
import re
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import duckdb
import pytest

REPO = Path(__file__).resolve().parents[2]
COSTBENCH = str(Path(sys.executable).parent / "costbench")  # the console script of the installed project
WAREHOUSE = (sys.executable, "-m", "warehouse")
SIM = (sys.executable, "-m", "endpoints.sim")
GATEWAY_LOG = str(REPO / "docs/examples/gateway_log.jsonl")
AZURE_TRACE = str(REPO / "workloads/traces/azure_conv_2023.csv")
SHAREGPT = str(REPO / "docs/examples/sharegpt_sample.json")
SIM_OK = ("--tp", "8", "--sim-warmup-s", "0", "--host", "127.0.0.1")
IS_ROOT = hasattr(os, "geteuid") and os.geteuid() == 0


@dataclass(frozen=True)
class Case:
    argv: tuple[str, ...]  # "{port}" is replaced by the case's port (closed, or held by the test)
    status: int
    says: tuple[str, ...]  # regular expressions the one line must match: the thing, then the reason
    prefix: str = "costbench"  # how the line starts: the program that failed
    setup: Callable[[Path], None] | None = None  # files the case needs, made in its own folder (the cwd)
    port: str | None = None  # "closed": nothing listens there; "held": a socket of the test listens there
    may_leave: tuple[str, ...] = field(
        default_factory=tuple
    )  # fnmatch patterns (`*` spans folders) of files a failure may write: its own state


def _mkdir(name: str) -> Callable[[Path], None]:
    return lambda tmp: (tmp / name).mkdir()


def _file(name: str, text: str = "") -> Callable[[Path], None]:
    return lambda tmp: (tmp / name).write_text(text)


def _bad_late_log(tmp: Path) -> None:
    """A gateway log whose first lines are good and whose last one is not: the failure comes after reading."""
    (tmp / "late.jsonl").write_text(
        Path(GATEWAY_LOG).read_text() + '{"timestamp": "2025-03-01T12:00:09Z", "request": \n'
    )


def _read_only_folder(tmp: Path) -> None:
    (tmp / "ro").mkdir()
    (tmp / "ro").chmod(0o555)


def _corrupt_db(tmp: Path) -> None:
    (tmp / "wh").mkdir()
    (tmp / "wh" / "costbench.duckdb").write_bytes(b"not a duckdb file\n" * 100)


def _newer_db(tmp: Path) -> None:
    (tmp / "wh").mkdir()
    con = duckdb.connect(str(tmp / "wh" / "costbench.duckdb"))
    con.execute("CREATE TABLE schema_version (version INTEGER NOT NULL, applied_wall_s DOUBLE, note VARCHAR)")
    con.execute("INSERT INTO schema_version VALUES (99, 0, 'from the future')")
    con.close()


# What a failed refresh may leave besides the database it must not touch: the lake's own stand-ins, its lock.
WAREHOUSE_STATE = ("wh/lake/*", "wh/.*lock*")

# An output folder nobody may write in: a read-only folder for a normal user; for root, who may write
# anywhere, sysfs (which takes no new files, even from root).
UNWRITABLE = "/sys/costbench-out" if IS_ROOT else "ro/out"
UNWRITABLE_SETUP = None if IS_ROOT else _read_only_folder

CASES: dict[str, Case] = {
    # -- costbench itself -----------------------------------------------------------------------
    "no-command": Case((COSTBENCH,), 2, (r"command",)),
    "unknown-command": Case((COSTBENCH, "nope"), 2, (r"'nope'", r"invalid choice")),
    # -- costbench capture ----------------------------------------------------------------------
    "capture-out-is-a-folder": Case(
        (COSTBENCH, "capture", GATEWAY_LOG, "-o", "out"), 2, (r"-o out", r"is a folder"), setup=_mkdir("out")
    ),
    "capture-out-under-a-file": Case(
        (COSTBENCH, "capture", GATEWAY_LOG, "-o", "afile/w.parquet"),
        2,
        (r"afile/w\.parquet", r"not a folder"),
        setup=_file("afile"),
    ),  # fmt: skip
    "capture-out-unwritable": Case(
        (COSTBENCH, "capture", GATEWAY_LOG, "-o", f"{UNWRITABLE}/w.parquet"),
        2,
        (re.escape(f"{UNWRITABLE}/w.parquet"), r"cannot write in"),
        setup=UNWRITABLE_SETUP,
    ),  # fmt: skip
    "capture-out-missing": Case((COSTBENCH, "capture", GATEWAY_LOG), 2, (r"-o", r"required")),
    "capture-log-missing": Case(
        (COSTBENCH, "capture", "nope.jsonl", "-o", "w.parquet"), 2, (r"nope\.jsonl", r"no such file")
    ),
    "capture-log-is-a-folder": Case(
        (COSTBENCH, "capture", "logs", "-o", "w.parquet"), 2, (r"logs", r"is a folder"), setup=_mkdir("logs")
    ),
    "capture-log-not-json": Case(
        (COSTBENCH, "capture", "bad.jsonl", "-o", "w.parquet"),
        2,
        (r"bad\.jsonl:1", r"JSON"),
        setup=_file("bad.jsonl", "garbage\n"),
    ),  # fmt: skip
    "capture-log-bad-last-line": Case(
        (COSTBENCH, "capture", "late.jsonl", "-o", "w.parquet"), 2, (r"late\.jsonl:5",), setup=_bad_late_log
    ),
    "capture-block-size-zero": Case(
        (COSTBENCH, "capture", GATEWAY_LOG, "-o", "w.parquet", "--block-size", "0"), 2, (r"--block-size", r"> 0")
    ),
    "capture-block-size-not-a-number": Case(
        (COSTBENCH, "capture", GATEWAY_LOG, "-o", "w.parquet", "--block-size", "abc"), 2, (r"--block-size", r"'abc'")
    ),
    "capture-tokenizer-missing": Case(
        (COSTBENCH, "capture", GATEWAY_LOG, "-o", "w.parquet", "--tokenizer", "nope.json"),
        2,
        (r"nope\.json", r"not found"),
    ),  # fmt: skip
    # -- costbench workload inspect -------------------------------------------------------------
    "inspect-missing-file": Case(
        (COSTBENCH, "workload", "inspect", "nope.csv", "--format", "azure"), 2, (r"nope\.csv", r"no such file")
    ),
    "inspect-folder": Case(
        (COSTBENCH, "workload", "inspect", "traces", "--format", "azure"),
        2,
        (r"traces", r"director|folder"),
        setup=_mkdir("traces"),
    ),  # fmt: skip
    "inspect-bad-content": Case(
        (COSTBENCH, "workload", "inspect", "bad.jsonl", "--format", "mooncake"),
        2,
        (r"bad\.jsonl:1",),
        setup=_file("bad.jsonl", "garbage\n"),
    ),  # fmt: skip
    "inspect-unknown-format": Case(
        (COSTBENCH, "workload", "inspect", AZURE_TRACE, "--format", "nope"), 2, (r"--format", r"'nope'")
    ),
    "inspect-block-size-zero": Case(
        (COSTBENCH, "workload", "inspect", SHAREGPT, "--format", "sharegpt", "--block-size", "0"),
        2,
        (r"sharegpt_sample\.json", r"block size"),
    ),  # fmt: skip
    "inspect-tokenizer-missing": Case(
        (COSTBENCH, "workload", "inspect", SHAREGPT, "--format", "sharegpt", "--tokenizer", "nope.json"),
        2,
        (r"nope\.json", r"not found"),
    ),  # fmt: skip
    # -- costbench replay -----------------------------------------------------------------------
    "replay-unreachable": Case(
        (
            COSTBENCH,
            "replay",
            "--trace",
            AZURE_TRACE,
            "--format",
            "azure",
            "--url",
            "http://127.0.0.1:{port}",
            "--max-requests",
            "2",
            "--out",
            "run",
        ),
        2,
        (r"127\.0\.0\.1:\d+", r"unreachable"),
        port="closed",
    ),  # fmt: skip
    "replay-bad-url": Case(
        (COSTBENCH, "replay", "--trace", AZURE_TRACE, "--format", "azure", "--url", "notaurl", "--out", "run"),
        2,
        (r"notaurl", r"http://"),
    ),  # fmt: skip
    "replay-trace-missing": Case(
        (
            COSTBENCH,
            "replay",
            "--trace",
            "nope.csv",
            "--format",
            "azure",
            "--url",
            "http://127.0.0.1:9",
            "--out",
            "run",
        ),
        2,
        (r"nope\.csv", r"no such file"),
    ),  # fmt: skip
    "replay-unknown-format": Case(
        (
            COSTBENCH,
            "replay",
            "--trace",
            AZURE_TRACE,
            "--format",
            "nope",
            "--url",
            "http://127.0.0.1:9",
            "--out",
            "run",
        ),
        2,
        (r"'nope'", r"format"),
    ),  # fmt: skip
    "replay-bad-shard": Case(
        (
            COSTBENCH,
            "replay",
            "--trace",
            AZURE_TRACE,
            "--format",
            "azure",
            "--url",
            "http://127.0.0.1:9",
            "--shard",
            "5/2",
            "--out",
            "run",
        ),
        2,
        (r"5/2",),
    ),  # fmt: skip
    "replay-bad-speedup": Case(
        (
            COSTBENCH,
            "replay",
            "--trace",
            AZURE_TRACE,
            "--format",
            "azure",
            "--url",
            "http://127.0.0.1:9",
            "--speedup",
            "-1",
            "--out",
            "run",
        ),
        2,
        (r"speedup", r"> 0"),
    ),  # fmt: skip
    "replay-speedup-not-a-number": Case(
        (
            COSTBENCH,
            "replay",
            "--trace",
            AZURE_TRACE,
            "--format",
            "azure",
            "--url",
            "http://127.0.0.1:9",
            "--speedup",
            "fast",
        ),
        2,
        (r"--speedup", r"'fast'"),
    ),  # fmt: skip
    "replay-api-key-env-unset": Case(
        (
            COSTBENCH,
            "replay",
            "--trace",
            AZURE_TRACE,
            "--format",
            "azure",
            "--url",
            "http://127.0.0.1:9",
            "--api-key-env",
            "COSTBENCH_TEST_UNSET_KEY",
            "--out",
            "run",
        ),
        2,
        (r"COSTBENCH_TEST_UNSET_KEY", r"not set"),
    ),  # fmt: skip
    "replay-out-is-a-file": Case(
        (
            COSTBENCH,
            "replay",
            "--trace",
            AZURE_TRACE,
            "--format",
            "azure",
            "--url",
            "http://127.0.0.1:9",
            "--out",
            "afile",
        ),
        2,
        (r"afile", r"output directory"),
        setup=_file("afile"),
    ),  # fmt: skip
    # -- costbench sim / python -m endpoints.sim --------------------------------------------------
    "sim-unknown-flag": Case((COSTBENCH, "sim", "--nope"), 2, (r"--nope",), prefix="costbench sim: error:"),
    "sim-port-not-a-number": Case((*SIM, "--port", "abc"), 2, (r"--port", r"'abc'"), prefix="costbench sim: error:"),
    "sim-port-out-of-range": Case(
        (COSTBENCH, "sim", "--port", "99999"), 2, (r"--port", r"99999"), prefix="costbench sim: error:"
    ),
    "sim-bad-fault-rate": Case(
        (*SIM, "--fault-error-rate", "2"), 2, (r"--fault-error-rate", r"\[0, 1\]"), prefix="costbench sim: error:"
    ),
    "sim-weights-do-not-fit": Case((*SIM, "--tp", "1"), 2, (r"--tp-size 1", r"GB"), prefix="costbench sim: error:"),
    "sim-port-taken": Case(
        (COSTBENCH, "sim", *SIM_OK, "--port", "{port}"),
        1,
        (r"127\.0\.0\.1:\d+", r"in use"),
        prefix="costbench sim: error:",
        port="held",
    ),  # fmt: skip
    # -- costbench demo (every check is made before the daemon starts) ---------------------------
    "demo-weeks-zero": Case((COSTBENCH, "demo", "--weeks", "0"), 2, (r"--weeks", r"> 0")),
    "demo-home-is-a-file": Case(
        (COSTBENCH, "demo", "--dagster-home", "afile", "--warehouse", "wh"),
        2,
        (r"--dagster-home \S*afile", r"is a file"),
        setup=_file("afile"),
    ),  # fmt: skip
    "demo-warehouse-under-a-file": Case(
        (COSTBENCH, "demo", "--warehouse", "afile/wh", "--dagster-home", "home"),
        2,
        (r"--warehouse \S*afile/wh", r"is a file"),
        setup=_file("afile"),
    ),  # fmt: skip
    # -- python -m warehouse --------------------------------------------------------------------
    "warehouse-no-command": Case(WAREHOUSE, 2, (r"command",), prefix="python -m warehouse: error:"),
    "warehouse-root-is-a-file": Case(
        (*WAREHOUSE, "refresh", "--root", "afile"),
        2,
        (r"--root afile", r"is a file"),
        prefix="python -m warehouse: error:",
        setup=_file("afile"),
    ),  # fmt: skip
    "warehouse-root-under-a-file": Case(
        (*WAREHOUSE, "refresh", "--root", "afile/wh"),
        2,
        (r"--root afile/wh", r"is a file"),
        prefix="python -m warehouse: error:",
        setup=_file("afile"),
    ),  # fmt: skip
    "warehouse-corrupt-database": Case(
        (*WAREHOUSE, "refresh", "--root", "wh"),
        1,
        (r"wh/costbench\.duckdb", r"not a valid DuckDB"),
        prefix="python -m warehouse: error:",
        setup=_corrupt_db,
        may_leave=WAREHOUSE_STATE,
    ),  # fmt: skip
    "warehouse-newer-database": Case(
        (*WAREHOUSE, "refresh", "--root", "wh"),
        1,
        (r"wh/costbench\.duckdb", r"newer"),
        prefix="python -m warehouse: error:",
        setup=_newer_db,
        may_leave=WAREHOUSE_STATE,
    ),  # fmt: skip
    "warehouse-root-unusable-in-sql": Case(
        (*WAREHOUSE, "refresh", "--root", "we*rd"),
        1,
        (r"we\*rd", r"glob"),
        prefix="python -m warehouse: error:",
        may_leave=("we*rd/*",),
    ),  # fmt: skip
}


def _files(root: Path) -> dict[str, bytes]:
    """Every file under `root`, hidden ones included, with its content; a folder as an empty entry ending in /."""
    return {
        str(p.relative_to(root)) + ("/" if p.is_dir() else ""): p.read_bytes() if p.is_file() else b""
        for p in root.rglob("*")
        if p.is_file() or p.is_dir()
    }


@pytest.fixture
def port(request: pytest.FixtureRequest) -> Iterator[int | None]:
    """A loopback port: "closed" (bound, then released: nothing listens) or "held" (listening all along)."""
    kind = request.param
    if kind is None:
        yield None
        return
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    number = sock.getsockname()[1]
    if kind == "closed":
        sock.close()
        yield number
        return
    sock.listen()
    try:
        yield number
    finally:
        sock.close()


def _cases() -> Iterator:
    for name, case in CASES.items():
        yield pytest.param(case, case.port, id=name)


@pytest.mark.timeout(60)
@pytest.mark.parametrize(("case", "port"), _cases(), indirect=["port"])
def test_a_failure_is_one_line_naming_what_and_why_and_leaves_no_file(case: Case, port: int | None, tmp_path: Path):
    if case.setup is not None:
        case.setup(tmp_path)
    before = _files(tmp_path)
    argv = [arg.replace("{port}", str(port)) for arg in case.argv]
    env = {k: v for k, v in os.environ.items() if k != "COSTBENCH_TEST_UNSET_KEY"}
    done = subprocess.run(argv, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=50)

    assert done.returncode == case.status, done.stderr
    assert "Traceback" not in done.stderr, done.stderr
    lines = done.stderr.splitlines()
    assert len(lines) == 1, done.stderr
    line = lines[0]
    assert line.startswith(case.prefix), line
    for pattern in case.says:
        assert re.search(pattern, line), f"{pattern!r} not in {line!r}"
    after = _files(tmp_path)
    left = {
        name for name, data in after.items()
        if before.get(name) != data and not any(fnmatch.fnmatch(name, p) for p in case.may_leave)
    }  # fmt: skip
    assert left == set(), f"left behind or changed: {sorted(left)}"


@pytest.mark.timeout(60)
def test_ctrl_c_while_capture_reads_its_log_is_one_line_exit_130_and_no_file(tmp_path: Path):
    """The log is a named pipe with a writer that sends nothing, so the capture is reliably inside its read
    (the pipe has a reader) when Ctrl-C comes."""
    log = tmp_path / "log.fifo"
    os.mkfifo(log)
    process = subprocess.Popen([COSTBENCH, "capture", log.name, "-o", "w.parquet"], cwd=tmp_path,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)  # fmt: skip
    writer = None
    try:
        deadline = time.monotonic() + 30
        while writer is None:
            try:
                writer = os.open(log, os.O_WRONLY | os.O_NONBLOCK)  # fails until the capture opened the pipe
            except OSError:
                assert process.poll() is None, process.communicate()
                assert time.monotonic() < deadline, "the capture never opened its log"
                time.sleep(0.01)
        process.send_signal(signal.SIGINT)
        _, stderr = process.communicate(timeout=20)
    finally:
        if writer is not None:
            os.close(writer)
        if process.poll() is None:
            process.kill()
            process.wait()
    assert process.returncode == 130, stderr
    assert stderr.splitlines() == ["costbench: interrupted"], stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["log.fifo"]
