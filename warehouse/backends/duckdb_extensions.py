"""DuckDB extensions from their PyPI packages, loaded by path; nothing is ever downloaded.

The `duckdb-extension-<name>` packages (pinned with DuckDB in pyproject.toml) each hold
`extensions/v<duckdb version>/<name>.duckdb_extension`. DuckDB would look for an extension under
~/.duckdb/extensions and, failing that, fetch it from the network; costbench turns both automatic
installing and automatic loading off and LOADs the package's file, so a missing package is one clear
error, never a download.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Iterable
from pathlib import Path

import duckdb

from warehouse.duckdb_offline import OFFLINE_CONFIG

# Extension name -> the Python package that ships it.
PACKAGES = {
    "ducklake": "duckdb_extension_ducklake",
    "postgres_scanner": "duckdb_extension_postgres_scanner",
    "httpfs": "duckdb_extension_httpfs",
}


class ExtensionError(RuntimeError):
    pass


def extension_path(name: str) -> Path:
    """The extension file for the installed DuckDB version, from its package; ExtensionError when absent."""
    package = PACKAGES.get(name)
    if package is None:
        raise ExtensionError(f"DuckDB extension {name!r} is not one costbench ships (known: {sorted(PACKAGES)})")
    version = duckdb.__version__
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        raise ExtensionError(
            f"DuckDB extension {name!r} is missing: install the Python package "
            f"{package.replace('_', '-')}=={version} (make setup installs it); costbench never downloads extensions"
        )
    path = Path(next(iter(spec.submodule_search_locations))) / "extensions" / f"v{version}" / f"{name}.duckdb_extension"
    if not path.is_file():
        raise ExtensionError(
            f"DuckDB extension {name!r}: {path} is missing: the installed {package.replace('_', '-')} was not "
            f"built for DuckDB {version}; install {package.replace('_', '-')}=={version}"
        )
    return path


def offline_connection() -> duckdb.DuckDBPyConnection:
    """An in-memory DuckDB connection that cannot install or autoload an extension."""
    con = duckdb.connect(config=dict(OFFLINE_CONFIG))
    # No progress bar: a query past 2 s prints one to stdout, into a run's logs (on a loaded machine it came out
    # ahead of the answer a script reads from `python -m warehouse`).
    con.execute("SET enable_progress_bar = false")
    return con


def load_extensions(con: duckdb.DuckDBPyConnection, names: Iterable[str]) -> None:
    """LOAD each extension from its package file (a no-op for one already loaded in this database)."""
    for name in names:
        path = extension_path(name)
        try:
            con.execute(f"LOAD '{_quoted(path)}'")
        except duckdb.Error as exc:
            raise ExtensionError(f"DuckDB extension {name!r} at {path} does not load: {exc}") from exc


def load_statements(names: Iterable[str]) -> list[str]:
    """The LOAD statements a plain `duckdb` session runs to get the same extensions (docs/warehouse.md)."""
    return [f"LOAD '{_quoted(extension_path(name))}';" for name in names]


def _quoted(path: Path) -> str:
    return str(path).replace("'", "''")
