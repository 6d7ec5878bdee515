"""The dashboard's overview and doctor pages and `radixgate doctor`, timed over the seeded log.

The pages are timed as the queries their loaders run (dashboard/loaders.py: load_overview and
load_series for the overview, load_diagnosis for the doctor); the CLI as a child process, start-up and imports included, as a user runs it.
"""

from __future__ import annotations

import resource
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from datetime import datetime, timedelta
from pathlib import Path

from gateway.db import doctor_queries, insight_queries, stats_queries
from gateway.doctor.diagnosis import diagnose

BUSIEST_TENANT = "tenant-001"  # id 1, seeded first (see run.seed_tenants)


def overview_page(session, since: datetime, until: datetime, bucket: str) -> None:
    """load_overview, then load_series(group="tenant") at the bucket the page picks for the window."""
    stats_queries.all_tenant_stats(session, since, until)
    insight_queries.prefill_ms_per_token(session, since, until)
    insight_queries.hit_rate_series_by(session, "tenant", None, since, until, bucket)


DOCTOR_PARTS = ("loss_groups", "shared_by_system_key", "count_tool_lists", "pattern_counts", "count_requests", "ttft_fit")


def insight_queries_timed(end: datetime, days: int) -> dict[str, Callable]:
    """The pages' queries for the busiest tenant (the doctor) and all tenants (the overview), each
    page's parts over the whole log first (where its time goes), then the pages."""
    since_all, since_day = end - timedelta(days=days), end - timedelta(days=1)
    parts = {f"doctor.{name}_all": (lambda s, query=getattr(doctor_queries, name): query(s, 1, since_all, end))
             for name in DOCTOR_PARTS}
    return {
        "overview.prefill_ms_per_token_all": lambda s: insight_queries.prefill_ms_per_token(s, since_all, end),
        "overview.series_by_tenant_all_day": lambda s: insight_queries.hit_rate_series_by(s, "tenant", None, since_all, end, "day"),
        **parts,
        "overview_page_24h": lambda s: overview_page(s, since_day, end, "hour"),
        "overview_page_all": lambda s: overview_page(s, since_all, end, "day"),
        "doctor_page_24h": lambda s: diagnose(s, 1, since_day, end),
        "doctor_page_all": lambda s: diagnose(s, 1, since_all, end),
        "doctor_page_unbounded": lambda s: diagnose(s, 1, None, None),  # the window `radixgate doctor` reads
    }


def time_doctor_cli(url: str, repeats: int) -> dict:
    """Wall seconds of `radixgate doctor --tenant <busiest> --db URL --json`, whole log, per run, and
    the child's CPU seconds (user + system: all of the work on SQLite, none of the server's on PostgreSQL)."""
    command = [str(Path(sys.executable).with_name("radixgate")), "doctor", "--tenant", BUSIEST_TENANT,
               "--db", url, "--json"]
    walls, cpus = [], []
    for _ in range(repeats):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        start = time.perf_counter()
        subprocess.run(command, check=True, capture_output=True, timeout=600)
        walls.append(time.perf_counter() - start)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpus.append(after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime)
    return {"first_s": round(walls[0], 4), "median_s": round(statistics.median(walls), 4),
            "cpu_median_s": round(statistics.median(cpus), 4)}
