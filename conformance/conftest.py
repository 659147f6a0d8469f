"""The conformance suite: the twin checked with SGLang's own code (docs/twin.md, "Conformance").

Run by `make conformance` in its own environment (build/conformance-venv, sglang from PyPI, CPU torch);
`make test` never collects it. Every check records what it covered (`record_property("checked", ...)`) and
the suite ends with one table: each check, pass or fail, and what it covered.
"""

from __future__ import annotations

import importlib.metadata
import textwrap
from collections.abc import Iterator
from dataclasses import dataclass

import pytest
from twin_server import TwinServer, start_twin

# The twin as the warehouse's weekly runs start it: R1 with its reasoning parser, metrics and cache report.
R1_FLAGS = [
    "--model-path", "deepseek-ai/DeepSeek-R1", "--tp", "8", "--sim-hardware", "h200",
    "--reasoning-parser", "deepseek-r1", "--enable-metrics", "--enable-cache-report", "--skip-server-warmup",
]  # fmt: skip
V3_FLAGS = ["--model-path", "deepseek-ai/DeepSeek-V3", "--tp", "8", "--enable-metrics", "--skip-server-warmup"]
# Every request aborted with a 500 after its first token (the twin's fault injection).
FAULT_FLAGS = [
    "--model-path",
    "deepseek-ai/DeepSeek-V3",
    "--tp",
    "8",
    "--skip-server-warmup",
    "--fault-error-rate",
    "1",
]


@dataclass(frozen=True, slots=True)
class CheckRow:
    area: str
    check: str
    outcome: str
    checked: str


class _Ledger:
    def __init__(self) -> None:
        self.rows: list[CheckRow] = []

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if report.when == "call" or (report.when == "setup" and report.outcome != "passed"):
            checked = "; ".join(str(v) for k, v in report.user_properties if k == "checked")
            module, _, name = report.nodeid.partition("::")
            area = module.rsplit("/", 1)[-1].removeprefix("test_").removesuffix(".py")
            outcome = report.outcome.upper() if report.outcome != "passed" else "pass"
            self.rows.append(CheckRow(area, name, outcome, checked or "-"))

    def pytest_terminal_summary(self, terminalreporter, exitstatus, config) -> None:
        write = terminalreporter.write_line
        terminalreporter.section(f"twin conformance against SGLang {_version('sglang')}")
        widths = [max([len(h)] + [len(getattr(r, f)) for r in self.rows]) for h, f in _COLUMNS[:-1]]
        indent = " " * (sum(widths) + 2 * len(widths))
        write("  ".join(h.ljust(w) for (h, _), w in zip(_COLUMNS, widths)) + "  " + _COLUMNS[-1][0])
        for row in self.rows:
            cells = "  ".join(getattr(row, f).ljust(w) for (_, f), w in zip(_COLUMNS, widths))
            lines = textwrap.wrap(row.checked, _CHECKED_WIDTH) or ["-"]
            write(f"{cells}  {lines[0]}")
            for line in lines[1:]:
                write(indent + line)
        failed = sum(r.outcome != "pass" for r in self.rows)
        write(f"{len(self.rows) - failed} passed, {failed} failed")


_COLUMNS = (("area", "area"), ("check", "check"), ("result", "outcome"), ("what it checked", "checked"))
_CHECKED_WIDTH = 90


def _version(dist: str) -> str:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return "not installed"


def pytest_configure(config: pytest.Config) -> None:
    config.pluginmanager.register(_Ledger(), "conformance-ledger")
    # sglang's quantization modules warn at import that they need a GPU; nothing here runs them.
    config.addinivalue_line("filterwarnings", "ignore:Only CUDA:UserWarning")


def pytest_report_header(config: pytest.Config) -> str:
    return f"conformance: sglang {_version('sglang')}, torch {_version('torch')} (no GPU), twin from endpoints/sim"


@pytest.fixture(scope="session")
def twin_r1() -> Iterator[TwinServer]:
    server = start_twin(R1_FLAGS)
    yield server
    server.stop()


@pytest.fixture(scope="session")
def twin_v3() -> Iterator[TwinServer]:
    server = start_twin(V3_FLAGS)
    yield server
    server.stop()


@pytest.fixture(scope="session")
def twin_failing() -> Iterator[TwinServer]:
    server = start_twin(FAULT_FLAGS)
    yield server
    server.stop()
