"""Modules a library imports at its top but reads only in functions a caller may never run: imported lazily.

Inside `deferred_imports(*names)`, importing one of `names` binds a module whose code runs on its first attribute read
(the standard library's importlib.util.LazyLoader), so a library that imports it at module level pays for it only if
it uses it. Nothing changes for a name already imported, and the module stays lazy after the block: whoever reads it
later gets the whole module, as an eager import would have given."""

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


@contextmanager
def deferred_imports(*names: str) -> Iterator[None]:
    """While the block runs, importing any of `names` (full dotted names) defers running its code to first use."""
    pending = frozenset(name for name in names if name not in sys.modules)
    if not pending:
        yield
        return
    finder = _LazyFinder(pending)
    sys.meta_path.insert(0, finder)
    try:
        yield
    finally:
        sys.meta_path.remove(finder)
