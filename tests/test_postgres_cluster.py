"""The throwaway PostgreSQL cluster the DuckLake and Dagster-on-Postgres tests run against: loopback only,
a password required, a fresh database per call, and nothing left behind when it stops."""

from __future__ import annotations

import psycopg2
import pytest

from postgres_cluster import PostgresCluster, find_bindir


def test_fresh_databases_behind_a_password(postgres_cluster, postgres_database):
    first, second = postgres_database(), postgres_database()
    assert first.dbname != second.dbname
    with psycopg2.connect(first.url) as conn, conn.cursor() as cur:
        cur.execute("CREATE TABLE t (x int)")
        cur.execute("SELECT current_setting('listen_addresses'), inet_server_addr()::text")
        assert cur.fetchone() == ("127.0.0.1", "127.0.0.1/32")
    with psycopg2.connect(second.dsn) as conn, conn.cursor() as cur:
        cur.execute("SELECT count(*) FROM pg_tables WHERE tablename = 't'")
        assert cur.fetchone() == (0,)
    wrong = postgres_cluster.database(first.dbname).url.replace(first.password, "not-the-password")
    with pytest.raises(psycopg2.OperationalError, match="password authentication failed"):
        psycopg2.connect(wrong)


def test_stop_removes_the_cluster(postgres_cluster):
    cluster = PostgresCluster(postgres_cluster.bindir)
    cluster.start()
    db = cluster.create_database("gone")
    psycopg2.connect(db.url).close()
    cluster.stop()
    assert not cluster.root.exists()
    with pytest.raises(psycopg2.OperationalError):
        psycopg2.connect(db.url, connect_timeout=5)


def test_binaries_are_found_where_debian_puts_them(postgres_cluster):
    assert find_bindir() == postgres_cluster.bindir
    assert (postgres_cluster.bindir / "postgres").is_file()
