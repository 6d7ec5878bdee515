"""Sign-in and tenant scoping of every dashboard page (AppTest, seeded SQLite, keys issued hashed).

Without a key only the sign-in page exists and no page shows data; the admin key sees every
tenant; a tenant key sees its own data and nothing on any page names another tenant or shows
another tenant's token counts.
"""

from __future__ import annotations

import re
from datetime import datetime, timezone

import pytest
from sqlalchemy import func, select
from streamlit.testing.v1 import AppTest

from gateway.db.models import RequestLog, Tenant
from gateway.db.session import make_engine, make_session_factory
from tests.support.dashboard_seed import EXPECTED_TOP_CAUSE, create_seeded_db, issue_seed_keys
from tests.support.paths import REPO_ROOT

APP = str(REPO_ROOT / "dashboard" / "app.py")
TENANT_PAGES = ["views/overview.py", "views/tenant.py", "views/doctor.py", "views/templates.py"]
TIMEOUT_S = 60
ME = "acme"
OTHERS = sorted(set(EXPECTED_TOP_CAUSE) - {ME})
TEXT_ELEMENTS = ("title", "subheader", "markdown", "caption", "info", "success", "warning", "error", "expander")


@pytest.fixture(scope="module")
def seeded(tmp_path_factory) -> tuple[str, dict[str, str]]:
    url = f"sqlite:///{tmp_path_factory.mktemp('signin') / 'seeded.db'}"
    create_seeded_db(url, datetime.now(timezone.utc))
    return url, issue_seed_keys(url)


@pytest.fixture(scope="module")
def prompt_sums(seeded) -> dict[str, int]:
    engine = make_engine(seeded[0])
    query = (select(Tenant.name, func.sum(RequestLog.prompt_tokens))
             .join(Tenant, Tenant.id == RequestLog.tenant_id).group_by(Tenant.name))
    with make_session_factory(engine)() as session:
        sums = dict(session.execute(query).all())
    engine.dispose()
    return sums


def signed_in(url: str, key: str, monkeypatch) -> AppTest:
    """The app after typing `key` into the sign-in page's password field and submitting it."""
    monkeypatch.setenv("RADIXGATE_DB_URL", url)
    monkeypatch.delenv("RADIXGATE_GATEWAY_URL", raising=False)
    app = AppTest.from_file(APP, default_timeout=TIMEOUT_S).run()
    field = app.text_input(key="sign_in_key")
    assert field.proto.type == field.proto.PASSWORD
    field.input(key)
    next(b for b in app.button if b.label == "Sign in").click().run()
    assert not app.exception, [e.value for e in app.exception]
    return app


def page_text(app: AppTest) -> str:
    """Every text, metric, table, widget option and chart spec (with its inline data) on the page."""
    parts = [str(e.value if kind != "expander" else e.label) for kind in TEXT_ELEMENTS for e in getattr(app, kind)]
    parts += [f"{m.label} {m.value}" for m in app.metric]
    parts += [frame.value.to_csv() for frame in app.dataframe]
    parts += [" ".join(map(str, box.options)) for box in app.selectbox]
    parts += [str(chart.proto) for chart in app.get("vega_lite_chart") + app.get("arrow_vega_lite_chart")]
    return "\n".join(parts)


def shows_figure(text: str, figure: str) -> bool:
    """Whether `figure` appears as a number of its own, not inside a longer number or a hash.

    Chart specs carry hex dataset names (`...826000660e26`) that contain any short figure by chance.
    """
    return re.search(rf"(?<![\w.,]){re.escape(figure)}(?![\w]|[.,]\d)", text) is not None


def test_without_a_key_only_the_sign_in_page_shows_and_no_data(seeded, monkeypatch):
    url, _ = seeded
    monkeypatch.setenv("RADIXGATE_DB_URL", url)
    app = AppTest.from_file(APP, default_timeout=TIMEOUT_S).run()
    assert app.title[0].value == "Sign in to radixgate"
    for page in TENANT_PAGES + ["views/engine.py"]:
        with pytest.raises(ValueError, match="Could not find a navigation page"):
            app.switch_page(page)  # not in the navigation without a key
    for page in ("views/overview.py", "views/templates.py"):  # scope() and require_viewer() both stop
        alone = AppTest.from_file(str(REPO_ROOT / "dashboard" / page), default_timeout=TIMEOUT_S).run()
        assert "Sign in" in alone.info[0].value  # run on its own, the page stops before loading data
        assert not alone.metric and not alone.dataframe and not alone.get("arrow_vega_lite_chart")
        assert not any(name in page_text(alone) for name in EXPECTED_TOP_CAUSE)


def test_a_wrong_key_is_refused(seeded, monkeypatch):
    app = signed_in(seeded[0], "sk-not-a-key", monkeypatch)
    assert "not a live admin or tenant key" in app.error[0].value
    assert app.title[0].value == "Sign in to radixgate"


@pytest.mark.parametrize("page", TENANT_PAGES)
def test_a_tenant_sees_only_its_own_data_on_every_page(page, seeded, prompt_sums, monkeypatch):
    url, keys = seeded
    app = signed_in(url, keys[ME], monkeypatch)
    if page != TENANT_PAGES[0]:
        app.switch_page(page).run()
    assert not app.exception, [e.value for e in app.exception]
    text = page_text(app)
    assert "Signed in as **tenant acme**" in "\n".join(c.value for c in app.sidebar.caption)
    assert ME in text
    leaked = [name for name in OTHERS if name in text]
    assert not leaked, f"{page} names {leaked}"
    mine = {f"{prompt_sums[ME]:,}", str(prompt_sums[ME])}
    for name in OTHERS:
        for figure in {f"{prompt_sums[name]:,}", str(prompt_sums[name])} - mine:
            assert not shows_figure(text, figure), f"{page} shows {name}'s prompt tokens"


def test_the_tenant_doctor_counts_sharing_tenants_without_naming_them(seeded, monkeypatch):
    url, keys = seeded
    app = signed_in(url, keys["umbrella"], monkeypatch)
    app.switch_page("views/doctor.py").run()
    details = page_text(app)
    assert "also sent by 1 other tenant(s)" in details and "acme" not in details


def test_the_admin_key_sees_every_tenant_and_the_engine(seeded, monkeypatch):
    url, keys = seeded
    app = signed_in(url, keys["admin"], monkeypatch)
    assert set(app.dataframe[0].value["tenant"]) == set(EXPECTED_TOP_CAUSE)
    app.switch_page("views/doctor.py").run()
    app.selectbox(key="tenant").select("umbrella").run()
    assert "acme" in page_text(app)  # the operator's doctor names the sharing tenant
    app.switch_page("views/engine.py").run()
    assert app.metric and not app.exception
    app.switch_page("views/templates.py").run()
    assert "has no templates of its own yet" in app.info[0].value


def test_sign_out_forgets_the_key(seeded, monkeypatch):
    url, keys = seeded
    app = signed_in(url, keys[ME], monkeypatch)
    next(b for b in app.sidebar.button if b.label == "Sign out").click().run()
    assert app.title[0].value == "Sign in to radixgate" and "viewer" not in app.session_state
