"""One owner of a run folder's names (common/run_folder.py): the manual's table lists exactly them, no other module
of the project spells one out, and the layout is where the weekly job has always put its runs."""

from __future__ import annotations

import ast
import re
from pathlib import Path

from common import run_folder

REPO_ROOT = Path(__file__).resolve().parents[2]
MANUAL = REPO_ROOT / "docs" / "endpoints.md"
SECTION = "## What a run's folder holds"
PACKAGES = ("common", "workloads", "replay", "endpoints", "warehouse", "assets", "pipelines")


def _owner_names() -> dict[str, str]:
    """Every name a run folder holds, by constant: the module's *_FILE and *_DIR constants."""
    return {k: v for k, v in vars(run_folder).items() if k.endswith(("_FILE", "_DIR")) and isinstance(v, str)}


def _pattern(name: str) -> str:
    """`shard-{}.ready` (code) and `shard-<k>.ready` (manual) alike: shard-*.ready."""
    return re.sub(r"\{[^}]*\}|<[^>]*>", "*", name).rstrip("/")


def _manual_names() -> list[str]:
    text = MANUAL.read_text()
    assert SECTION in text, f"{MANUAL.name}: no section {SECTION!r}"
    lines = text.split(SECTION, 1)[1].splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("| file |"))
    rows = []
    for line in lines[start + 2 :]:  # past the header and its |---| line
        if not line.startswith("|"):
            break
        rows.append(line.split("|")[1].strip().strip("`"))
    return rows


def test_manual_table_lists_every_name_once():
    manual = [_pattern(name) for name in _manual_names()]
    owner = sorted(_pattern(name) for name in _owner_names().values())
    assert len(set(manual)) == len(manual), f"a name twice in {MANUAL.name}'s table: {manual}"
    assert sorted(manual) == owner


def test_names_are_distinct():
    names = list(_owner_names().values())
    assert len(set(names)) == len(names)


def test_no_other_module_spells_a_name_out():
    """Past the owner, a run folder's names are imported, never written again as string literals."""
    owned = {v for v in _owner_names().values() if not v.startswith("{")}
    copies = []
    for package in PACKAGES:
        for path in sorted((REPO_ROOT / package).rglob("*.py")):
            if path == Path(run_folder.__file__).resolve():
                continue
            for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
                if isinstance(node, ast.Constant) and node.value in owned:
                    copies.append(f"{path.relative_to(REPO_ROOT)}:{node.lineno}: {node.value!r}")
    assert not copies, "names of common/run_folder.py spelled out again:\n" + "\n".join(copies)


def test_layout():
    root = Path("/data/warehouse")
    folder = run_folder.run_dir(root, "2026-03-02", "chat", "20260302-chat-0a1b2c3d")
    assert folder == root / "runs" / "week=2026-03-02" / "scenario=chat" / "20260302-chat-0a1b2c3d"
    assert run_folder.leases_dir(root) == root / "runs" / "leases"
    assert run_folder.capacity_cache_dir(root) == root / "runs" / "capacity_cache"


def test_names_format_as_before():
    assert run_folder.READY_FILE.format(3) == "shard-3.ready"
    assert run_folder.SHARD_DIR.format(1) == "shard-1"
    assert run_folder.SERVER_LOG_FILE.format("chat") == "chat.server.log"
    assert run_folder.WORKER_LOG_FILE.format("chat", 2) == "chat.worker-2.server.log"
