"""The spelling of a DuckLake warehouse location, `ducklake:postgresql://USER[:PASSWORD]@HOST[:PORT]/DB?data_path=...`.

The catalog is a PostgreSQL database; `data_path` is where DuckLake writes the Parquet data files (a
local or shared path, or an object-store URL read through httpfs). It is needed only to create a
catalog: DuckLake stores it, so later attaches (analysts included) find the files without it. A
password may sit in the URL, but is better left to libpq (PGPASSWORD or ~/.pgpass); either way it is
kept out of every message (`describe()`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from urllib.parse import parse_qs, unquote, urlsplit

SCHEME = "ducklake"
_CATALOG_SCHEMES = ("postgresql", "postgres")
_QUERY_KEYS = ("data_path",)
DEFAULT_PORT = 5432
CONNECT_TIMEOUT_S = 10
LOCK_TIMEOUT_S = 60
_DB_NAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,62}$")
SPELLING = "ducklake:postgresql://USER[:PASSWORD]@HOST[:PORT]/DBNAME[?data_path=/path/or/s3://bucket/prefix]"


class WarehouseUrlError(ValueError):
    pass


@dataclass(frozen=True, slots=True)
class DuckLakeLocation:
    host: str
    port: int
    dbname: str
    user: str | None
    password: str | None = None
    data_path: str | None = None  # None: the catalog must exist already and says where its files are

    def describe(self) -> str:
        """The catalog as messages name it: no password, ever."""
        user = f"{self.user}@" if self.user else ""
        return f"{SCHEME}:postgresql://{user}{self.host}:{self.port}/{self.dbname}"

    def libpq_dsn(self, with_password: bool = True, bounded: bool = False) -> str:
        """The catalog as a libpq keyword string, the form DuckDB's postgres extension takes.

        bounded: give up connecting after CONNECT_TIMEOUT_S and waiting for a PostgreSQL lock after
        LOCK_TIMEOUT_S (a pipeline process must fail with a message, not hang on a lost network or a stuck
        session); analysts' interactive lines leave both to libpq's defaults.
        """
        pairs = [("host", self.host), ("port", str(self.port)), ("dbname", self.dbname)]
        if self.user:
            pairs.append(("user", self.user))
        if with_password and self.password:
            pairs.append(("password", self.password))
        if bounded:
            pairs += [("connect_timeout", str(CONNECT_TIMEOUT_S)), ("options", f"-c lock_timeout={LOCK_TIMEOUT_S}s")]
        return " ".join(f"{key}={_libpq_value(value)}" for key, value in pairs)

    def attach_target(self, with_password: bool = True, bounded: bool = False) -> str:
        """What ATTACH takes (unquoted): `ducklake:postgres:<libpq string>`."""
        return f"{SCHEME}:postgres:{self.libpq_dsn(with_password, bounded)}"


def is_ducklake_url(text: str) -> bool:
    return text.startswith(f"{SCHEME}:")


def parse_ducklake_url(text: str) -> DuckLakeLocation:
    """Parse a `ducklake:` location; WarehouseUrlError names what is wrong (never echoing a password)."""
    if not is_ducklake_url(text):
        raise WarehouseUrlError(f"not a DuckLake location (expected {SPELLING})")
    rest = text[len(SCHEME) + 1 :]
    try:
        parts = urlsplit(rest)
        port = parts.port
    except ValueError as exc:
        raise WarehouseUrlError(f"bad DuckLake location {_redacted(text)}: {exc} (expected {SPELLING})") from None
    shown = _redacted(text)
    if parts.scheme not in _CATALOG_SCHEMES:
        found = parts.scheme or "none"
        raise WarehouseUrlError(
            f"bad DuckLake location {shown}: the catalog must be PostgreSQL (postgresql://), got {found!r}; "
            f"expected {SPELLING}"
        )
    if not parts.hostname:
        raise WarehouseUrlError(f"bad DuckLake location {shown}: no catalog host; expected {SPELLING}")
    dbname = unquote(parts.path.lstrip("/"))
    if not _DB_NAME.match(dbname):
        raise WarehouseUrlError(
            f"bad DuckLake location {shown}: database name {dbname!r} must match {_DB_NAME.pattern}; "
            f"expected {SPELLING}"
        )
    if parts.fragment:
        raise WarehouseUrlError(f"bad DuckLake location {shown}: unexpected '#{parts.fragment}'")
    query = parse_qs(parts.query, keep_blank_values=True, strict_parsing=False)
    unknown = sorted(set(query) - set(_QUERY_KEYS))
    if unknown:
        known = list(_QUERY_KEYS)
        raise WarehouseUrlError(f"bad DuckLake location {shown}: unknown option(s) {unknown}; known: {known}")
    data_path = None
    if "data_path" in query:
        values = query["data_path"]
        if len(values) != 1 or not values[0]:
            raise WarehouseUrlError(f"bad DuckLake location {shown}: data_path must be given once, non-empty")
        data_path = values[0]
        if "://" not in data_path and not data_path.startswith("/"):
            raise WarehouseUrlError(
                f"bad DuckLake location {shown}: data_path {data_path!r} must be an absolute path or an "
                "object-store URL (s3://..., gs://...), so every machine means the same place"
            )
    return DuckLakeLocation(
        host=parts.hostname,
        port=port or DEFAULT_PORT,
        dbname=dbname,
        user=unquote(parts.username) if parts.username else None,
        password=unquote(parts.password) if parts.password is not None else None,
        data_path=data_path,
    )


def _libpq_value(value: str) -> str:
    if value and not re.search(r"[\s'\\]", value):
        return value
    return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"


def _redacted(text: str) -> str:
    """The location with any password replaced, for messages."""
    return re.sub(r"(://[^:/@?#]*):[^@/?#]*@", r"\1:***@", text)
