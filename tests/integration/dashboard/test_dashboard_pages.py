"""Every dashboard page, rendered with Streamlit's AppTest against a seeded SQLite database.

The numbers on the pages must equal sums over the seeded rows; an empty or missing
database must give an explanatory empty state, never an exception. These run as the
operator (a Viewer put in the session, as a sign-in would); the sign-in itself and the
tenant's view are test_dashboard_sign_in.py's.
"""

from __future__ import annotations

from datetime import datetime, timezone

import pytest
from sqlalchemy import func, select
from streamlit.testing.v1 import AppTest

from dashboard.auth import SESSION_KEY, Viewer
from gateway.db.models import RequestLog, Tenant
from gateway.db.session import make_engine, make_session_factory
from tests.support.dashboard_seed import create_seeded_db
from tests.support.paths import REPO_ROOT

APP = str(REPO_ROOT / "dashboard" / "app.py")
PAGES = ["views/overview.py", "views/tenant.py", "views/engine.py", "views/doctor.py", "views/templates.py"]
TIMEOUT_S = 60


@pytest.fixture(scope="module")
def seeded_url(tmp_path_factory) -> str:
    url = f"sqlite:///{tmp_path_factory.mktemp('dash') / 'seeded.db'}"
    create_seeded_db(url, datetime.now(timezone.utc))
    return url


@pytest.fixture(scope="module")
def expected(seeded_url) -> dict[str, dict]:
    """Per tenant name: requests, prompt and cached token sums straight from the seeded rows."""
    engine = make_engine(seeded_url)
    query = (
        select(Tenant.name, func.count(), func.sum(RequestLog.prompt_tokens), func.sum(RequestLog.cached_tokens))
        .join(Tenant, Tenant.id == RequestLog.tenant_id)
        .group_by(Tenant.name)
    )
    with make_session_factory(engine)() as session:
        rows = {name: {"requests": n, "prompt": p, "cached": c} for name, n, p, c in session.execute(query)}
    engine.dispose()
    return rows


def operator_app() -> AppTest:
    app = AppTest.from_file(APP, default_timeout=TIMEOUT_S)
    app.session_state[SESSION_KEY] = Viewer(key="operator")
    return app.run()


def run_page(url: str, monkeypatch, page: str, **widgets) -> AppTest:
    monkeypatch.setenv("RADIXGATE_DB_URL", url)
    monkeypatch.delenv("RADIXGATE_GATEWAY_URL", raising=False)
    app = operator_app()
    if page != PAGES[0]:
        app.switch_page(page).run()
    for key, value in widgets.items():
        app.selectbox(key=key).select(value).run()
    assert not app.exception, [e.value for e in app.exception]
    return app


def metric(app: AppTest, label: str) -> str:
    return next(m.value for m in app.metric if m.label == label)


def num_charts(app: AppTest) -> int:
    return len(app.get("vega_lite_chart"))


def test_overview_shows_each_tenants_seeded_hit_rates(seeded_url, expected, monkeypatch):
    app = run_page(seeded_url, monkeypatch, PAGES[0])
    table = app.dataframe[0].value.set_index("tenant")
    assert set(table.index) == set(expected)
    for name, sums in expected.items():
        assert table.loc[name, "requests"] == sums["requests"]
        assert table.loc[name, "hit_rate"] == pytest.approx(sums["cached"] / sums["prompt"])
    # acme: first request cold, the 39 repeats hit 800 of 1000 (attainable equals actual);
    # its clients' raw order (shadow) would have hit only 96 of each.
    assert table.loc["acme", "attainable_hit_rate"] == pytest.approx(39 * 800 / 40_000)
    assert table.loc["acme", "raw_hit_rate"] == pytest.approx(39 * 96 / 40_000)
    # initech: one prefix of 512 tokens; 23 evicted repeats are attainable on top of 6 hits.
    assert table.loc["initech", "attainable_hit_rate"] == pytest.approx(29 * 512 / (30 * 800))
    total_cached = sum(s["cached"] for s in expected.values())
    assert metric(app, "Requests") == f"{sum(s['requests'] for s in expected.values()):,}"
    assert metric(app, "Prompt tokens saved") == f"{total_cached:,}"
    assert metric(app, "Hit rate (token-weighted)") == f"{total_cached / sum(s['prompt'] for s in expected.values()):.1%}"
    assert num_charts(app) == 2
    # prefill time saved: cached tokens x (sum TTFT / sum uncached tokens) over completed misses
    assert table["prefill_s_saved"].sum() == pytest.approx(total_cached * expected_ms_per_token(seeded_url) / 1000)


def expected_ms_per_token(url: str) -> float:
    engine = make_engine(url)
    uncached = RequestLog.prompt_tokens - RequestLog.cached_tokens
    query = select(func.sum(RequestLog.ttft_ms), func.sum(uncached)).where(RequestLog.status == "ok", uncached > 0)
    with make_session_factory(engine)() as session:
        total_ms, total_tokens = session.execute(query).one()
    engine.dispose()
    return total_ms / total_tokens


def test_tenant_page_shows_the_tenants_numbers_and_pins(seeded_url, expected, monkeypatch):
    app = run_page(seeded_url, monkeypatch, "views/tenant.py", tenant="acme")
    acme = expected["acme"]
    assert metric(app, "Requests") == f"{acme['requests']:,}"
    assert metric(app, "Hit rate") == f"{acme['cached'] / acme['prompt']:.1%}"
    # TTFT of acme's 40 completed requests: one 200 ms miss, 39 hits at 40 ms.
    assert metric(app, "TTFT p50") == "40 ms"
    assert any("1 active pins, 800 pinned tokens, 39 hits" in c.value for c in app.caption)
    assert num_charts(app) == 3  # hit rate by template, causes, pin hits


def test_engine_page_charts_the_stored_snapshots(seeded_url, monkeypatch):
    app = run_page(seeded_url, monkeypatch, "views/engine.py")
    assert metric(app, "Cached tokens") == f"{4000 + 500 * 11:,}"
    assert metric(app, "Evictions (total)") == "33"
    assert num_charts(app) == 2


def test_doctor_page_ranks_dynamic_content_first_for_globex(seeded_url, monkeypatch):
    app = run_page(seeded_url, monkeypatch, "views/doctor.py", tenant="globex")
    assert any("Fix first: Dynamic content in the prefix" in s.value for s in app.subheader)
    assert app.expander[0].label.startswith("1. Dynamic content in the prefix")
    assert metric(app, "Lost prefix tokens") == f"{26 * (960 - 64) + 960:,}"
    assert num_charts(app) == 1


@pytest.mark.parametrize("page", PAGES)
def test_empty_database_shows_an_empty_state(page, tmp_path, monkeypatch):
    url = f"sqlite:///{tmp_path / 'empty.db'}"
    create_seeded_db(url, is_empty=True)
    app = run_page(url, monkeypatch, page)
    assert app.info, "expected an explanatory st.info empty state"


@pytest.mark.parametrize("page", PAGES)
def test_missing_database_file_is_reported_not_created(page, tmp_path, monkeypatch):
    path = tmp_path / "missing.db"
    app = run_page(f"sqlite:///{path}", monkeypatch, page)
    assert "No database file" in app.info[0].value
    assert not path.exists()


@pytest.fixture()
def metrics_server():
    """A real HTTP server on loopback serving the gateway's own Prometheus rendering at /metrics."""
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    from gateway.insight.metrics import Metrics

    metrics = Metrics()
    metrics.set_engine_stats({"cached_tokens": 1234, "pinned_tokens": 128, "evictable_tokens": 900, "evictions": 7})
    body, content_type = metrics.render()

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self):
            self.send_response(200 if self.path == "/metrics" else 404)
            self.send_header("Content-Type", content_type)
            self.end_headers()
            self.wfile.write(body if self.path == "/metrics" else b"")

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def test_engine_page_reads_live_gauges_from_the_gateway(metrics_server, tmp_path, monkeypatch):
    url = f"sqlite:///{tmp_path / 'empty.db'}"
    create_seeded_db(url, is_empty=True)
    monkeypatch.setenv("RADIXGATE_DB_URL", url)
    monkeypatch.setenv("RADIXGATE_GATEWAY_URL", metrics_server)
    app = operator_app()
    app.switch_page("views/engine.py").run()
    assert not app.exception
    assert metric(app, "Cached tokens") == "1,234"
    assert metric(app, "Evictions") == "7"


def test_engine_page_warns_when_the_gateway_is_unreachable(tmp_path, monkeypatch):
    url = f"sqlite:///{tmp_path / 'empty.db'}"
    create_seeded_db(url, is_empty=True)
    monkeypatch.setenv("RADIXGATE_DB_URL", url)
    monkeypatch.setenv("RADIXGATE_GATEWAY_URL", "http://127.0.0.1:9")  # discard port: connection refused
    app = operator_app()
    app.switch_page("views/engine.py").run()
    assert not app.exception
    assert "did not answer" in app.warning[0].value
    assert any("No stored engine snapshots" in c.value for c in app.caption)
