"""A throwaway PostgreSQL cluster for tests: `initdb` and `pg_ctl` in a temp dir, listening on 127.0.0.1
only at a random free port (its unix socket in the same temp dir), password auth with a random password.
One cluster per test session; each test asks `postgres_database()` for a fresh, empty database.

PostgreSQL refuses to run as root, so when the tests run as root the cluster runs as the `postgres`
system user, which owns the temp dir. Without a PostgreSQL installation the tests that need it skip,
unless COSTBENCH_REQUIRE_POSTGRES=1 (CI: .ci/run installs Debian's `postgresql`), where they fail.
"""

from __future__ import annotations

import os
import pwd
import re
import secrets
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote

import pytest

SUPERUSER = "costbench"
_DEB_ROOT = Path("/usr/lib/postgresql")
_START_TIMEOUT_S = 60


@dataclass(frozen=True, slots=True)
class PostgresDatabase:
    """One database of the test cluster and how to reach it over loopback TCP."""

    host: str
    port: int
    user: str
    password: str
    dbname: str

    @property
    def url(self) -> str:
        """`postgresql://user:password@127.0.0.1:port/dbname` (psycopg2, SQLAlchemy, dagster-postgres)."""
        return "postgresql://%s:%s@%s:%d/%s" % (
            quote(self.user, safe=""),
            quote(self.password, safe=""),
            self.host,
            self.port,
            quote(self.dbname, safe=""),
        )

    @property
    def dsn(self) -> str:
        """libpq keyword form, `dbname=... host=... port=... user=... password=...` (DuckDB's postgres and
        ducklake attach strings take this)."""
        return "dbname=%s host=%s port=%d user=%s password=%s" % (
            self.dbname,
            self.host,
            self.port,
            self.user,
            self.password,
        )

    def env(self) -> dict[str, str]:
        """The libpq environment variables (PGHOST ... PGDATABASE) for a subprocess such as `psql`."""
        return {
            "PGHOST": self.host,
            "PGPORT": str(self.port),
            "PGUSER": self.user,
            "PGPASSWORD": self.password,
            "PGDATABASE": self.dbname,
        }


def find_bindir() -> Path | None:
    """PostgreSQL's server binaries: Debian's newest /usr/lib/postgresql/<ver>/bin, else `pg_ctl` on PATH."""
    versions = sorted(
        (int(p.name), p / "bin") for p in _DEB_ROOT.glob("*") if p.name.isdigit() and (p / "bin" / "initdb").is_file()
    )
    if versions:
        return versions[-1][1]
    on_path = shutil.which("pg_ctl")
    if on_path and (Path(on_path).resolve().parent / "initdb").is_file():
        return Path(on_path).resolve().parent
    return None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class PostgresCluster:
    """A running cluster; `stop()` stops it and removes its directory."""

    def __init__(self, bindir: Path) -> None:
        self.bindir = bindir
        self.host = "127.0.0.1"
        self.port = 0
        self.user = SUPERUSER
        self.password = secrets.token_hex(16)
        self.root = Path(tempfile.mkdtemp(prefix="costbench-pg-"))
        self.datadir = self.root / "data"
        self.logfile = self.root / "server.log"
        self._run_as: list[str] = []
        self._count = 0

    def _cmd(self, *args: str, timeout_s: float = _START_TIMEOUT_S) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [*self._run_as, *args], capture_output=True, text=True, timeout=timeout_s, cwd=self.root, check=False
        )

    def start(self) -> None:
        if os.geteuid() == 0:
            # initdb and postgres refuse root; the server runs as the system user and owns its directory.
            try:
                pw = pwd.getpwnam("postgres")
            except KeyError:
                raise RuntimeError("running as root, the test cluster needs the system user 'postgres'") from None
            os.chown(self.root, pw.pw_uid, pw.pw_gid)
            self._run_as = ["setpriv", "--reuid", str(pw.pw_uid), "--regid", str(pw.pw_gid), "--init-groups", "--"]
        pwfile = self.root / "pwfile"
        pwfile.write_text(self.password + "\n")
        pwfile.chmod(0o600)
        if self._run_as:
            os.chown(pwfile, pw.pw_uid, pw.pw_gid)
        try:
            done = self._cmd(
                str(self.bindir / "initdb"),
                "-D",
                str(self.datadir),
                "-U",
                self.user,
                "--pwfile",
                str(pwfile),
                "--auth",
                "scram-sha-256",
                "--encoding",
                "UTF8",
                "--no-sync",
            )
        finally:
            pwfile.unlink()  # the password lives in this process only
        if done.returncode != 0:
            raise RuntimeError("initdb failed in %s:\n%s%s" % (self.datadir, done.stdout, done.stderr))
        # A port taken between probing and binding makes pg_ctl fail; try another.
        for _ in range(5):
            self.port = _free_port()
            opts = " ".join(
                [
                    "-c listen_addresses=127.0.0.1",
                    "-c port=%d" % self.port,
                    "-c unix_socket_directories=%s" % self.root,
                    # A throwaway cluster: durability buys nothing here and costs seconds.
                    "-c fsync=off",
                    "-c synchronous_commit=off",
                    "-c full_page_writes=off",
                ]
            )
            done = self._cmd(
                str(self.bindir / "pg_ctl"),
                "-D",
                str(self.datadir),
                "-l",
                str(self.logfile),
                "-o",
                opts,
                "-w",
                "-t",
                str(_START_TIMEOUT_S),
                "start",
                timeout_s=_START_TIMEOUT_S + 10,
            )
            if done.returncode == 0:
                return
            if "already in use" not in self.log():
                break
        raise RuntimeError("pg_ctl start failed:\n%s%s\n%s" % (done.stdout, done.stderr, self.log()))

    def log(self) -> str:
        try:
            return self.logfile.read_text(errors="replace")
        except OSError:
            return ""

    def database(self, dbname: str) -> PostgresDatabase:
        return PostgresDatabase(self.host, self.port, self.user, self.password, dbname)

    def create_database(self, hint: str = "test", exact: bool = False) -> PostgresDatabase:
        """A new, empty database owned by the superuser, named after `hint` and unique in this cluster
        (named `hint` itself with `exact=True`, for a configuration that names its database)."""
        import psycopg2  # dagster-postgres' driver, in the dev extra

        self._count += 1
        name = hint if exact else "%s_%d" % (re.sub(r"[^a-z0-9_]", "_", hint.lower())[:40], self._count)
        conn = psycopg2.connect(self.database("postgres").url)
        try:
            conn.autocommit = True  # CREATE DATABASE refuses to run in a transaction
            with conn.cursor() as cur:
                cur.execute('CREATE DATABASE "%s"' % name)
        finally:
            conn.close()
        return self.database(name)

    def stop(self) -> None:
        try:
            if (self.datadir / "postmaster.pid").exists():
                self._cmd(str(self.bindir / "pg_ctl"), "-D", str(self.datadir), "-m", "immediate", "-w", "stop")
        finally:
            shutil.rmtree(self.root, ignore_errors=True)


@pytest.fixture(scope="session")
def postgres_cluster() -> Iterator[PostgresCluster]:
    """The session's cluster (started on first use, stopped and removed at the end, failed tests or not)."""
    bindir = find_bindir()
    if bindir is None:
        reason = "PostgreSQL is not installed (Debian package postgresql; .ci/run installs it)"
        if os.environ.get("COSTBENCH_REQUIRE_POSTGRES") == "1":
            pytest.fail(reason + " but COSTBENCH_REQUIRE_POSTGRES=1")
        pytest.skip(reason)
    cluster = PostgresCluster(bindir)
    try:
        cluster.start()
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture
def postgres_database(
    postgres_cluster: PostgresCluster, request: pytest.FixtureRequest
) -> Callable[..., PostgresDatabase]:
    """A factory: `postgres_database()` (or `postgres_database("hint")`) creates a fresh database in the
    session's cluster and returns its `PostgresDatabase` (.url, .dsn, .env(), fields)."""

    def make(hint: str | None = None) -> PostgresDatabase:
        return postgres_cluster.create_database(hint or request.node.name)

    return make
