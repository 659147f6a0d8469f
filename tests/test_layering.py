"""The layers point one way, read statically from the source (ast; nothing is imported).

common (kernels every layer shares) imports nothing else of the project and stays small; redaction (secrets kept
out of what is stored, by name and by shape) beside it imports nothing else either; workloads sits on them; replay and endpoints are siblings on workloads (replay talks to endpoints over HTTP, or through common/exchange.py to a twin on its own virtual clock); warehouse
stores what both produce; together they are the Dagster-free library. assets wires them into Dagster;
pipelines is the top (Definitions, schedule, sensors, CLI). Inside every package the rooms (sub-packages and
modules side by side) point one way too: no two siblings import each other. No module of the project imports
itself through others, function-local imports included.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parent.parent
LIBRARY = ("common", "redaction", "workloads", "replay", "endpoints", "warehouse")
# What each layer of the library may import of the project besides itself (assets and pipelines: anything below).
MAY_IMPORT = {
    "common": (),
    "redaction": (),
    "workloads": ("common", "redaction"),
    "replay": ("common", "redaction", "workloads"),
    "endpoints": ("common", "redaction", "workloads"),
    "warehouse": ("common", "redaction", "workloads", "replay", "endpoints"),
}
# common is for kernels, not a drawer for whatever lacks a room: past this it wants a package of its own.
COMMON_MAX_MODULES = 8
COMMON_MAX_LINES = 1_000
ROOM_MAX_MODULES = 15
PACKAGES = (*LIBRARY, "assets", "pipelines")


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(REPO_ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _project_modules() -> dict[str, Path]:
    return {_module_name(p): p for pkg in PACKAGES for p in sorted((REPO_ROOT / pkg).rglob("*.py"))}


MODULES = _project_modules()


def _imported_names(module: str, path: Path) -> Iterator[str]:
    """Every dotted name the module imports, anywhere in it; `from x import y` gives x.y when that is a module."""
    is_package = path.name == "__init__.py"
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                anchor = module.split(".")
                anchor = anchor[: len(anchor) - node.level + (1 if is_package else 0)]
                base = ".".join([*anchor, node.module] if node.module else anchor)
            else:
                base = node.module or ""
            for alias in node.names:
                candidate = f"{base}.{alias.name}"
                yield candidate if candidate in MODULES else base


def _within(name: str, top: str) -> bool:
    return name == top or name.startswith(top + ".")


def _imports(package: str) -> list[tuple[str, str]]:
    """(module, imported name) for every import in the modules of one package."""
    return sorted(
        {
            (module, name)
            for module, path in MODULES.items()
            if _within(module, package)
            for name in _imported_names(module, path)
        }
    )


@pytest.mark.parametrize("package", LIBRARY)
def test_library_never_imports_dagster(package: str) -> None:
    offenders = [(m, n) for m, n in _imports(package) if n.split(".")[0].startswith("dagster")]
    assert offenders == [], f"{package} imports Dagster: {offenders}"


def test_assets_never_import_pipelines() -> None:
    offenders = [(m, n) for m, n in _imports("assets") if _within(n, "pipelines")]
    assert offenders == [], f"assets imports pipelines: {offenders}"


@pytest.mark.parametrize("package", LIBRARY)
def test_each_library_layer_imports_only_the_layers_below_it(package: str) -> None:
    allowed = (package, *MAY_IMPORT[package])
    offenders = [
        (m, n)
        for m, n in _imports(package)
        if n.split(".")[0] in PACKAGES and not any(_within(n, top) for top in allowed)
    ]
    assert offenders == [], f"{package} may import only {allowed}: {offenders}"


def test_common_stays_small() -> None:
    modules = [p for p in sorted((REPO_ROOT / "common").glob("*.py")) if p.name != "__init__.py"]
    lines = sum(len(p.read_text().splitlines()) for p in modules)
    assert len(modules) <= COMMON_MAX_MODULES and lines <= COMMON_MAX_LINES, (
        f"common/ has {len(modules)} modules and {lines} lines (caps {COMMON_MAX_MODULES}, {COMMON_MAX_LINES}): "
        "give the newcomer a room of its own"
    )
    assert not [p for p in (REPO_ROOT / "common").iterdir() if p.is_dir() and p.name != "__pycache__"]


def test_no_flat_folder_outgrows_a_room() -> None:
    """Sub-packages of about 15 modules at most, so a newcomer finds the room from its name."""
    sizes = {
        str(d.relative_to(REPO_ROOT)): len([p for p in d.glob("*.py") if p.name not in ("__init__.py", "__main__.py")])
        for pkg in PACKAGES
        for d in [REPO_ROOT / pkg, *(REPO_ROOT / pkg).rglob("*")]
        if d.is_dir() and (d / "__init__.py").exists()
    }
    assert {d: n for d, n in sizes.items() if n > ROOM_MAX_MODULES} == {}


def _project_target(name: str) -> str | None:
    """The project module a dotted import name loads, or None when it is not the project's."""
    while name:
        if name in MODULES:
            return name
        name = name.rpartition(".")[0]
    return None


def _import_graph() -> dict[str, set[str]]:
    graph: dict[str, set[str]] = {module: set() for module in MODULES}
    for module, path in MODULES.items():
        for name in _imported_names(module, path):
            target = _project_target(name)
            if target is not None and target != module:
                graph[module].add(target)
    return graph


def _find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One cycle as [a, b, ..., a], or None when the graph is acyclic (iterative depth-first search)."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    for root in sorted(graph):
        if state.get(root):
            continue
        path = [root]
        stack = [iter(sorted(graph[root]))]
        state[root] = 1
        while stack:
            nxt = next(stack[-1], None)
            if nxt is None:
                state[path.pop()] = 2
                stack.pop()
            elif state.get(nxt) == 1:
                return [*path[path.index(nxt) :], nxt]
            elif not state.get(nxt):
                state[nxt] = 1
                path.append(nxt)
                stack.append(iter(sorted(graph[nxt])))
    return None


def test_find_cycle_reports_a_cycle() -> None:
    assert _find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == ["a", "b", "c", "a"]
    assert _find_cycle({"a": {"b"}, "b": set(), "c": {"a", "b"}}) is None


def test_import_graph_sees_from_imports_of_modules() -> None:
    graph = _import_graph()
    assert "endpoints.probes.probe_records" in graph["endpoints.probes.probe_session"]
    assert "assets.lake_assets" in graph["pipelines.definitions"]


def test_no_import_cycles() -> None:
    cycle = _find_cycle(_import_graph())
    assert cycle is None, "import cycle: " + " -> ".join(cycle or [])


def test_only_the_demo_imports_dagster_when_costbench_starts() -> None:
    # Importing Dagster takes seconds: inspect, capture, replay and sim must not pay it (pipelines/demo/demo_command.py).
    import subprocess
    import sys

    probe = "import sys, pipelines.cli; print(sorted(m for m in sys.modules if m.split('.')[0] == 'dagster')[:3])"
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, cwd=REPO_ROOT, check=True)
    assert done.stdout.strip() == "[]"


def test_every_module_that_finds_the_repository_from_its_own_path_finds_it() -> None:
    # A module moved one folder deeper once put the demo's warehouse under pipelines/warehouse/.
    import importlib

    finders = [m for m, p in MODULES.items() if "REPO_ROOT = Path(__file__)" in p.read_text()]
    assert len(finders) >= 2
    for module in finders:
        assert importlib.import_module(module).REPO_ROOT == REPO_ROOT, module


def _room_imports() -> dict[tuple[str, str], list[str]]:
    """(room, sibling room) -> the import lines from one into the other, for every package and sub-package: a room
    is a direct child of a package (a sub-package or a module), so `endpoints.sim` and `endpoints.router` are
    siblings, and so are `endpoints.sim.engine` and `endpoints.sim.server_args`."""
    packages = [m for m, p in MODULES.items() if p.name == "__init__.py"]
    rooms: dict[tuple[str, str], list[str]] = {}
    for module, targets in _import_graph().items():
        for package in packages:
            if not module.startswith(package + "."):
                continue
            room = package + "." + module[len(package) + 1 :].split(".")[0]
            for target in targets:
                if target.startswith(package + "."):
                    sibling = package + "." + target[len(package) + 1 :].split(".")[0]
                    if sibling != room:
                        rooms.setdefault((room, sibling), []).append(f"{module} -> {target}")
    return rooms


def _both_ways(rooms: dict[tuple[str, str], list[str]]) -> list[str]:
    return [f"{a} <-> {b}: {rooms[a, b][0]}; {rooms[b, a][0]}" for a, b in sorted(rooms) if a < b and (b, a) in rooms]


def test_the_room_check_sees_a_pair_that_points_both_ways() -> None:
    rooms = _room_imports()
    assert ("endpoints.capacity", "endpoints.sim") in rooms  # the capacity sweeps drive the engine
    assert _both_ways({("endpoints.sim", "endpoints.router"): ["x"], ("endpoints.router", "endpoints.sim"): ["y"]})


def test_sibling_rooms_point_one_way() -> None:
    """A sub-package either uses its sibling or is used by it, never both (../STYLE.md 13): a shared type lives in
    the room below both, and a room that both calls the engine and is called by it is two rooms."""
    assert _both_ways(_room_imports()) == []
