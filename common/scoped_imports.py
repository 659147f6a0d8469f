"""Imports steered for the length of one block: a library's top-level imports deferred or hidden while it imports.

`deferred_imports(*names)`: importing one of `names` binds a module whose code runs on its first attribute read (the
standard library's importlib.util.LazyLoader), so a library that imports it at module level pays for it only if it
uses it. The module stays lazy after the block: whoever reads it later gets the whole module, as an eager import would
have given.

`hidden_imports(package)`: the package and its submodules cannot be found, so a library that supports running without
it (an optional dependency it tries to import) takes its other path.

Either changes nothing for a name already imported, and takes its finder off the import system when the block ends.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import importlib.util
import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from types import ModuleType


class _LazyFinder(importlib.abc.MetaPathFinder):
    def __init__(self, names: frozenset[str]) -> None:
        self._names = names

    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        if fullname not in self._names:
            return None
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(fullname, path, target)
            if spec is not None:
                if spec.loader is not None and hasattr(spec.loader, "exec_module"):
                    spec.loader = importlib.util.LazyLoader(spec.loader)
                return spec
        return None


class _HidingFinder(importlib.abc.MetaPathFinder):
    def __init__(self, package: str) -> None:
        self._package = package

    def find_spec(self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None) -> None:
        if fullname == self._package or fullname.startswith(self._package + "."):
            raise ModuleNotFoundError(f"No module named {fullname!r} (hidden for this import)", name=fullname)
        return None


@contextmanager
def _first_on_meta_path(finder: importlib.abc.MetaPathFinder) -> Iterator[None]:
    sys.meta_path.insert(0, finder)
    try:
        yield
    finally:
        sys.meta_path.remove(finder)


@contextmanager
def deferred_imports(*names: str) -> Iterator[None]:
    """While the block runs, importing any of `names` (full dotted names) defers running its code to first use."""
    pending = frozenset(name for name in names if name not in sys.modules)
    if not pending:
        yield
        return
    with _first_on_meta_path(_LazyFinder(pending)):
        yield


@contextmanager
def hidden_imports(package: str) -> Iterator[None]:
    """While the block runs, `package` and its submodules cannot be imported (unless it is imported already)."""
    if package in sys.modules:
        yield
        return
    with _first_on_meta_path(_HidingFinder(package)):
        yield
