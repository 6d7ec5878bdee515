"""bench stats: seed a request log with N rows and time the stats, overview and doctor queries over it.

Seeding bypasses the ORM for speed (sqlite3 executemany in one transaction; PostgreSQL COPY), into
a schema built by the real migrations. Traffic is skewed across tenants (Zipf-like weights), so
the busiest tenant holds about a quarter of all rows — the timed per-tenant query covers it.
"""

from __future__ import annotations

import itertools
import statistics
import time
import uuid
from collections.abc import Callable, Iterator
from datetime import datetime, timedelta, timezone

import numpy as np
from sqlalchemy import Engine, text
from sqlalchemy.engine import make_url

from bench.stats import insight
from gateway.db import RequestLog, make_engine, make_session_factory, migrate, stats_queries as queries
from gateway.db.log_row import column_defaults

CAUSES = (None, None, "system", "tools", "context", "history", "dynamic", "question")
SECTIONS_FOUND = ("system,question", "system,tools,question", "system,tools,context,question", "system,context,history,question")
TEMPLATES = ("agent", "rag", "chat", None)
CHUNK_ROWS = 50_000


def seeded_columns(num_rows: int, num_tenants: int, end: datetime, days: int, seed: int) -> dict[str, list]:
    """Deterministic synthetic request-log columns (as stored: uuid hex, naive-UTC ISO text), with
    rows spread uniformly over [end - days, end)."""
    rng = np.random.default_rng(seed)
    weights = 1.0 / np.arange(1, num_tenants + 1)
    tenant_ids = rng.choice(np.arange(1, num_tenants + 1), size=num_rows, p=weights / weights.sum())
    if end.tzinfo is None:
        raise ValueError("end must be timezone-aware")
    end_us = int(end.timestamp() * 1e6)
    # descending offsets = ascending time: the log is appended in time order, as in production
    offsets_us = np.sort((rng.random(num_rows) * days * 86400e6).astype(np.int64))[::-1]
    created = np.datetime_as_string((end_us - offsets_us).astype("datetime64[us]"), unit="us")
    prompt = rng.integers(200, 4000, size=num_rows)
    cached = (prompt * rng.random(num_rows)).astype(np.int64)
    is_ok = rng.random(num_rows) < 0.97
    hashes = np.array([f"{value:016x}" for value in rng.integers(0, 2**62, size=64)])
    canonical_prompt = prompt + rng.integers(-20, 20, size=num_rows)
    canonical_cached = np.minimum(canonical_prompt, cached + ((prompt - cached) * rng.random(num_rows)).astype(np.int64))
    is_dynamic = rng.random(num_rows) < 0.3
    id_bytes = rng.bytes(16 * num_rows)
    return {
        "id": [id_bytes[i:i + 16].hex() for i in range(0, 16 * num_rows, 16)],
        "created_at": np.char.replace(created, "T", " ").tolist(),
        "tenant_id": tenant_ids.tolist(),
        "api_key_id": tenant_ids.tolist(),
        "template": [TEMPLATES[i % len(TEMPLATES)] for i in range(num_rows)],
        "dynamic_hoisted": (rng.random(num_rows) < 0.3).tolist(),
        "was_canonical": (rng.random(num_rows) < 0.2).tolist(),
        "prompt_tokens": prompt.tolist(),
        "cached_tokens": cached.tolist(),
        "completion_tokens": rng.integers(1, 256, size=num_rows).tolist(),
        "shadow_cached_tokens": (cached * rng.random(num_rows)).astype(np.int64).tolist(),
        "ttft_ms": rng.lognormal(4.0, 0.8, size=num_rows).tolist(),
        "latency_ms": rng.lognormal(6.0, 0.5, size=num_rows).tolist(),
        "status": np.where(is_ok, "ok", "error").tolist(),
        "error_code": [None if ok else "engine_overloaded" for ok in is_ok.tolist()],
        "system_hash": hashes[tenant_ids % 64].tolist(),
        "tools_hash": hashes[rng.integers(0, 64, size=num_rows)].tolist(),
        "context_hash": hashes[rng.integers(0, 64, size=num_rows)].tolist(),
        "miss_cause": [CAUSES[i] for i in rng.integers(0, len(CAUSES), size=num_rows).tolist()],
        "canonicalized": (rng.random(num_rows) < 0.5).tolist(),
        "dynamic_patterns": np.where(is_dynamic, "date_iso", None).tolist(),
        "sections_found": [SECTIONS_FOUND[i] for i in rng.integers(0, len(SECTIONS_FOUND), size=num_rows).tolist()],
        "canonical_cached_tokens": canonical_cached.tolist(),
        "canonical_prompt_tokens": canonical_prompt.tolist(),
        "static_prefix_tokens": (prompt * 0.6).astype(np.int64).tolist(),
        "system_prefix_tokens": (prompt * 0.3).astype(np.int64).tolist(),
    }


def row_tuples(columns: dict[str, list], num_rows: int) -> tuple[list[str], Iterator[tuple]]:
    """All RequestLog columns in table order; columns not generated take their default."""
    defaults = column_defaults()
    names = list(defaults)
    values = [columns[name] if name in columns else itertools.repeat(defaults[name], num_rows) for name in names]
    return names, zip(*values)


def seed_tenants(engine: Engine, num_tenants: int) -> None:
    now = datetime.now(timezone.utc)
    with engine.begin() as connection:
        connection.execute(
            text("INSERT INTO tenants (id, name, pin_quota_tokens, store_prompts, created_at) "
                 "VALUES (:id, :name, 0, false, :created_at)"),
            [{"id": i, "name": f"tenant-{i:03d}", "created_at": now} for i in range(1, num_tenants + 1)],
        )


def seed_sqlite(engine: Engine, names: list[str], tuples: Iterator[tuple]) -> None:
    """executemany through the raw sqlite3 connection, with the values SQLAlchemy would store."""
    columns = names
    sql = f"INSERT INTO request_log ({', '.join(columns)}) VALUES ({', '.join('?' * len(columns))})"
    raw = engine.raw_connection()
    try:
        cursor = raw.cursor()
        cursor.execute("PRAGMA synchronous=OFF")
        cursor.execute("PRAGMA cache_size=-262144")  # 256 MiB: random uuid keys touch the whole index
        while chunk := [row for _, row in zip(range(CHUNK_ROWS), tuples)]:
            cursor.executemany(sql, chunk)
        raw.commit()
    finally:
        raw.close()


def seed_postgresql(engine: Engine, names: list[str], tuples: Iterator[tuple]) -> None:
    """COPY ... FROM STDIN through psycopg 3 (text values; the server parses uuid and timestamps)."""
    columns = names
    raw = engine.raw_connection()
    try:
        with raw.cursor() as cursor:
            cursor.execute("SET TIME ZONE 'UTC'")  # created_at values are naive UTC text
            with cursor.copy(f"COPY request_log ({', '.join(columns)}) FROM STDIN") as copy:
                for row in tuples:
                    copy.write_row(row)
        raw.commit()
    finally:
        raw.close()


def seed(url: str, num_rows: int, num_tenants: int, days: int, end: datetime, seed_value: int = 0) -> float:
    """Migrate `url`, insert tenants and `num_rows` log rows; returns seconds spent inserting rows."""
    migrate.upgrade(url)
    engine = make_engine(url)
    indexes = list(RequestLog.__table__.indexes)
    try:
        seed_tenants(engine, num_tenants)
        start = time.perf_counter()
        for index in indexes:  # bulk load, then build the indexes once (as a restore would)
            index.drop(engine)
        names, tuples = row_tuples(seeded_columns(num_rows, num_tenants, end, days, seed_value), num_rows)
        (seed_sqlite if engine.dialect.name == "sqlite" else seed_postgresql)(engine, names, tuples)
        for index in indexes:
            index.create(engine)
        analyze(engine)
        seconds = time.perf_counter() - start
        with engine.connect() as connection:
            num_stored = connection.execute(text("SELECT count(*) FROM request_log")).scalar_one()
        if num_stored != num_rows:
            raise RuntimeError(f"seeded {num_rows} rows but the table holds {num_stored}")
        return seconds
    finally:
        engine.dispose()


def analyze(engine: Engine) -> None:
    """Planner statistics, and on PostgreSQL the visibility map that index-only scans need (the
    steady state autovacuum keeps an append-only table in; a fresh COPY has none of it)."""
    if engine.dialect.name == "postgresql":
        with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as connection:
            connection.execute(text("VACUUM ANALYZE request_log"))
        return
    with engine.begin() as connection:
        connection.execute(text("ANALYZE"))


def stats_queries(end: datetime, days: int) -> dict[str, Callable]:
    """The timed queries, for the busiest tenant (id 1, ~28% of all rows): GET /v1/stats and
    GET /admin/stats with their default 24 h window, then wider windows up to all rows."""
    since_all, since_week, since_day = end - timedelta(days=days), end - timedelta(days=7), end - timedelta(days=1)
    return {
        "tenant_stats_24h_hour": lambda s: queries.tenant_stats(s, 1, since_day, end, "hour"),
        "tenant_stats_7d_hour": lambda s: queries.tenant_stats(s, 1, since_week, end, "hour"),
        "tenant_stats_all_day": lambda s: queries.tenant_stats(s, 1, since_all, end, "day"),
        "all_tenant_stats_24h": lambda s: queries.all_tenant_stats(s, since_day, end),
        "all_tenant_stats_all": lambda s: queries.all_tenant_stats(s, since_all, end),
        "hit_rate_series_all_tenants_day": lambda s: queries.hit_rate_series(s, None, since_all, end, "day"),
    }


def time_queries(url: str, queries: dict[str, Callable], repeats: int = 3) -> dict[str, dict]:
    """Per query, over `repeats` runs each in a fresh session: wall seconds of the first run and the
    median, and the median CPU seconds of this process — on SQLite (which runs in-process) that is
    the query's cost on an idle machine, whatever else is competing for the cores."""
    engine = make_engine(url)
    factory = make_session_factory(engine)
    results = {}
    try:
        for name, run in queries.items():
            walls, cpus = [], []
            for _ in range(repeats):
                with factory() as session:
                    start, start_cpu = time.perf_counter(), time.process_time()
                    run(session)
                    walls.append(time.perf_counter() - start)
                    cpus.append(time.process_time() - start_cpu)
            results[name] = {
                "first_s": round(walls[0], 4),
                "median_s": round(statistics.median(walls), 4),
                "cpu_median_s": round(statistics.median(cpus), 4),
            }
    finally:
        engine.dispose()
    return results


def create_scratch_database(server_url: str) -> str:
    """A new, uniquely named PostgreSQL database on the server at `server_url`; returns its URL."""
    name = f"radixgate_bench_{uuid.uuid4().hex[:10]}"
    execute_autocommit(server_url, f'CREATE DATABASE "{name}"')
    return make_url(server_url).set(database=name).render_as_string(hide_password=False)


def drop_scratch_database(server_url: str, url: str) -> None:
    execute_autocommit(server_url, f'DROP DATABASE IF EXISTS "{make_url(url).database}" WITH (FORCE)')


def execute_autocommit(server_url: str, statement: str) -> None:
    """One statement outside any transaction (CREATE/DROP DATABASE refuse to run inside one)."""
    admin = make_engine(server_url, isolation_level="AUTOCOMMIT")
    try:
        with admin.connect() as connection:
            connection.execute(text(statement))
    finally:
        admin.dispose()


def run_backend(url: str, num_rows: int, num_tenants: int, days: int, repeats: int) -> dict:
    """Seed an empty database at `url` and time the stats queries over it."""
    end = datetime.now(timezone.utc).replace(minute=0, second=0, microsecond=0)
    seed_s = seed(url, num_rows, num_tenants, days, end)
    queries = {**stats_queries(end, days), **insight.insight_queries_timed(end, days)}
    timings = time_queries(url, queries, repeats)
    return {"seed_s": round(seed_s, 2), "queries": timings, "doctor_cli": insight.time_doctor_cli(url, repeats)}
