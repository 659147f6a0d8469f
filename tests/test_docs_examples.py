"""Every example of the README and docs/ runs as written, or says in the page why it cannot run here.

A fenced `sh`/`bash`/`python` block is run in a scratch folder that sees the repository's
`workloads/` and `docs/` (the bundled traces and the example logs), with the virtualenv's `costbench`
and `python` first on PATH. A `costbench sim ...` block is started as the server the other blocks send
to: its port 30000 becomes a free loopback port, in every block. A block preceded by an HTML comment
`<!-- not run: reason -->` is not run (a GPU host, a tool costbench does not install, minutes of
runtime). SQL blocks must be the example files they name, endpoint YAML blocks must load.
"""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import textwrap
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import pytest

from endpoints.spec import load_endpoint_specs

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
RUN_LANGS = {"sh", "bash", "python"}
NOT_RUN = re.compile(r"<!--\s*not run:\s*(\S.*?)\s*-->")
FENCE = re.compile(r"^```(\S*)\s*$")
DOC_PORT = "30000"
# What the examples write, read back after they ran (a background job's failure shows up here).
EXPECTED_OUTPUTS = [
    "captured/prod-week10.parquet",
    "runs/run1/requests.parquet",
    "runs/run1/run.json",
    "runs/big/shard0/requests.parquet",
    "runs/big/shard1/requests.parquet",
    "runs/first/requests.parquet",
    "warehouse/costbench.duckdb",
]


@dataclass(frozen=True)
class Block:
    page: Path
    line: int  # 1-based line of the opening fence
    lang: str
    text: str
    not_run: str | None  # the reason, when the page marks the block

    @property
    def where(self) -> str:
        return f"{self.page.relative_to(ROOT)}:{self.line}"

    @property
    def is_server(self) -> bool:
        return self.lang in {"sh", "bash"} and self.text.lstrip().startswith("costbench sim ")


def blocks(page: Path) -> list[Block]:
    lines = page.read_text().splitlines()
    found: list[Block] = []
    i = 0
    while i < len(lines):
        match = FENCE.match(lines[i])
        if not match:
            i += 1
            continue
        start, lang = i, match.group(1)
        i += 1
        while i < len(lines) and lines[i].rstrip() != "```":
            i += 1
        before = next((lines[j] for j in range(start - 1, -1, -1) if lines[j].strip()), "")
        marker = NOT_RUN.search(before)
        found.append(Block(page, start + 1, lang, "\n".join(lines[start + 1 : i]) + "\n", marker and marker.group(1)))
        i += 1
    return found


ALL_BLOCKS = [b for page in PAGES for b in blocks(page)]


def test_the_pages_exist_and_have_examples():
    names = {p.name for p in PAGES}
    assert {"README.md", "workloads.md", "replay.md", "endpoints.md", "twin.md", "warehouse.md", "pipeline.md"} <= names
    assert sum(1 for b in ALL_BLOCKS if b.lang in RUN_LANGS and not b.not_run) >= 10


def test_readme_fits_on_three_screens():
    assert len((ROOT / "README.md").read_text().splitlines()) <= 150


def test_every_block_says_what_it_is():
    assert [b.where for b in ALL_BLOCKS if not b.lang] == [], "a fence needs a language (text for pictures)"


def test_a_not_run_mark_is_only_on_runnable_blocks():
    assert [b.where for b in ALL_BLOCKS if b.not_run and b.lang not in RUN_LANGS] == []


def test_no_example_names_a_missing_repository_file():
    # Paths into the repository's own folders must exist (outputs of earlier examples excepted).
    made = {"captured/", "runs/", "warehouse/costbench.duckdb"}
    missing = []
    for b in ALL_BLOCKS:
        if b.lang not in RUN_LANGS:
            continue
        for path in re.findall(r"\b((?:workloads|docs|warehouse|bench)/[\w./-]+\.\w+)", b.text):
            if not any(path.startswith(m) for m in made) and not (ROOT / path).exists():
                missing.append(f"{b.where}: {path}")
    assert missing == []


def test_sql_blocks_are_the_example_files():
    examples = {p.read_text().strip(): p.name for p in (ROOT / "warehouse" / "sql").glob("example_*.sql")}
    sql_blocks = [b for b in ALL_BLOCKS if b.lang == "sql"]
    assert sorted(examples.get(b.text.strip(), f"{b.where}: not an example file") for b in sql_blocks) == sorted(
        examples.values()
    )


def test_endpoint_yaml_blocks_load(tmp_path):
    for b in ALL_BLOCKS:
        if b.lang != "yaml" or "- name:" not in b.text:
            continue
        entries = textwrap.dedent(b.text)
        path = tmp_path / "endpoints.yaml"
        path.write_text("endpoints:\n" + textwrap.indent(entries, "  "))
        assert load_endpoint_specs(path), b.where


def test_links_between_pages_resolve():
    broken = []
    for page in PAGES:
        for target in re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", page.read_text()):
            if "://" not in target and not (page.parent / target).exists():
                broken.append(f"{page.relative_to(ROOT)}: {target}")
    assert broken == []


def test_no_citation_outside_the_repository():
    # A user of the repository has only the repository: docs and comments cite files inside it.
    cited = []
    listed = subprocess.run(
        ["git", "ls-files", "-co", "--exclude-standard"], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout.split()
    for path in [ROOT / name for name in listed if name.endswith((".py", ".sql", ".yaml", ".md", ".toml"))]:
        if path == Path(__file__) or not path.is_file():
            continue
        text = path.read_text(errors="replace")
        for needle in ("shared/reference", "DESIGN.md", "sglang-api.md", "calibration.md", "loadgen-anchors.md"):
            if needle in text:
                cited.append(f"{path.relative_to(ROOT)}: {needle}")
    assert cited == []


# --- running them -------------------------------------------------------------------------------


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _env(sandbox: Path) -> dict[str, str]:
    env = dict(os.environ)
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    env["CI"] = "1"  # no live progress bar
    env.pop("COSTBENCH_WAREHOUSE", None)
    env["HOME"] = str(sandbox)
    return env


def _with_port(text: str, port: int) -> str:
    return text.replace(f"127.0.0.1:{DOC_PORT}", f"127.0.0.1:{port}").replace(f"--port {DOC_PORT}", f"--port {port}")


def _healthy(port: int, timeout_s: float) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2) as response:
                if response.status == 200:
                    return True
        except OSError:
            pass
        time.sleep(0.3)
    return False


def _run(block: Block, sandbox: Path, port: int) -> tuple[str, int, str]:
    text = _with_port(block.text, port)
    argv = ["bash", "-e", "-o", "pipefail", "-c", text] if block.lang != "python" else [sys.executable, "-c", text]
    done = subprocess.run(argv, cwd=sandbox, env=_env(sandbox), capture_output=True, text=True, timeout=180)
    return block.where, done.returncode, (done.stdout + done.stderr)[-2000:]


def _run_page(page_blocks: list[Block], sandbox: Path, port: int) -> list[tuple[str, int, str]]:
    results = []
    for block in page_blocks:  # in page order: an example may read what the one above it wrote
        results.append(_run(block, sandbox, port))
        if results[-1][1] != 0:
            break
    return results


@pytest.fixture(scope="module")
def sandbox(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("docs_examples")
    for name in ("workloads", "docs"):  # read only by the examples; what they write goes beside
        (folder / name).symlink_to(ROOT / name)
    return folder


def test_every_example_runs_or_says_why(sandbox):
    runnable = [b for b in ALL_BLOCKS if b.lang in RUN_LANGS and not b.not_run]
    servers = [b for b in runnable if b.is_server]
    assert servers, "the docs start a twin for the replay examples"
    started: list[tuple[Block, int, subprocess.Popen]] = []
    try:
        for block in servers:
            port = _free_port()
            log = open(sandbox / f"sim-{port}.log", "w")
            proc = subprocess.Popen(
                ["bash", "-c", "exec " + _with_port(block.text.strip(), port)],
                cwd=sandbox,
                env=_env(sandbox),
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
            started.append((block, port, proc))
        for block, port, _proc in started:
            assert _healthy(port, 60), (
                f"{block.where}: the twin did not become healthy: " + (sandbox / f"sim-{port}.log").read_text()[-2000:]
            )
        port = started[0][1]
        by_page: dict[Path, list[Block]] = {}
        for block in runnable:
            if not block.is_server:
                by_page.setdefault(block.page, []).append(block)
        with ThreadPoolExecutor(max_workers=len(by_page)) as pool:
            outcomes = [r for rs in pool.map(lambda bs: _run_page(bs, sandbox, port), by_page.values()) for r in rs]
        failed = [f"{where}: exit {rc}\n{out}" for where, rc, out in outcomes if rc != 0]
        assert failed == []
        assert len(outcomes) == sum(len(bs) for bs in by_page.values())
        assert [p for p in EXPECTED_OUTPUTS if not (sandbox / p).exists()] == []
        for _, _, proc in started:
            assert proc.poll() is None, "a twin exited while the examples ran"
    finally:
        for _, _, proc in started:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGTERM)
                try:
                    proc.wait(10)
                except subprocess.TimeoutExpired:
                    os.killpg(proc.pid, signal.SIGKILL)
                    proc.wait(10)
