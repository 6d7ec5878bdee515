"""The template studio on the real engine: sampled bodies, `name@label` served, the what-if, the Templates page.

One live gateway (uvicorn in a thread, the shared SmolLM2 engine, a fresh SQLite file) serves
the module; the dashboard's Templates page runs in AppTest against it with a tenant key.
"""

from __future__ import annotations

import uuid

import httpx
import pytest
from streamlit.testing.v1 import AppTest

from gateway.main import create_app
from gateway.settings import Settings
from tests.support.live_app import serve_app
from tests.support.paths import REPO_ROOT

pytestmark = pytest.mark.slow

ADMIN = {"Authorization": "Bearer sk-test-admin"}
SAMPLE_SIZE = 3
SYSTEM = ("You are the support assistant of ACME Corp. Answer in one short sentence, politely, citing the "
          "relevant help-centre article when there is one. Never reveal internal notes. ") * 3
GOOD = """{% block system %}{{ turn_start("system") }}{{ system }}{{ turn_end("system") }}{% endblock %}
{% block question %}{{ turn_start("user") }}{{ question }}{{ turn_end("user") }}{% endblock %}
{% block generation %}{{ generation_prompt }}{% endblock %}"""
NOW_FIRST = GOOD.replace('{{ turn_start("system") }}{{ system }}', '{{ turn_start("system") }}{{ now }} {{ system }}')
FIXED = GOOD.replace('{{ turn_start("user") }}{{ question }}', '{{ turn_start("user") }}Asked at {{ now }}: {{ question }}')


@pytest.fixture(scope="module")
def gateway(tmp_path_factory, shared_engine):
    tmp = tmp_path_factory.mktemp("studio")
    settings = Settings(db_url=f"sqlite:///{tmp / 'studio.db'}", admin_key="sk-test-admin", rewarm_pins=False,
                        template_sample_size=SAMPLE_SIZE)
    shared_engine.flush_cache()
    with serve_app(create_app(settings, engine=shared_engine)) as base_url:
        yield {"url": base_url, "db_url": settings.db_url}


def new_tenant(base_url: str) -> tuple[str, dict]:
    name = f"t-{uuid.uuid4().hex[:10]}"
    response = httpx.post(f"{base_url}/admin/tenants", json={"name": name, "pin_quota_tokens": 4096}, headers=ADMIN)
    assert response.status_code == 201, response.text
    key = response.json()["api_key"]["key"]
    return key, {"Authorization": f"Bearer {key}"}


def chat(base_url: str, auth: dict, template: str, question: str) -> dict:
    body = {"model": "default", "template": template, "max_tokens": 1, "temperature": 0,
            "messages": [{"role": "system", "content": SYSTEM}, {"role": "user", "content": question}]}
    response = httpx.post(f"{base_url}/v1/chat/completions", json=body, headers=auth, timeout=120)
    assert response.status_code == 200, response.text
    return response.json()


@pytest.fixture(scope="module")
def tenant(gateway):
    """A tenant with `support` v1 (GOOD, production) and SAMPLE_SIZE + 1 requests sent naming support@production."""
    url = gateway["url"]
    key, auth = new_tenant(url)
    assert httpx.put(f"{url}/v1/templates/support", json={"source": GOOD, "label": "production"}, headers=auth).status_code == 201
    for i in range(SAMPLE_SIZE + 1):
        chat(url, auth, "support@production", f"Question number {i}: how do I reset my password?")
    return {"key": key, "auth": auth}


def test_requests_naming_a_template_are_sampled_and_bounded(gateway, tenant):
    samples = httpx.get(f"{gateway['url']}/v1/templates/support/samples", headers=tenant["auth"]).json()["data"]
    assert len(samples) == SAMPLE_SIZE
    assert samples[-1]["body"]["messages"][1]["content"].startswith(f"Question number {SAMPLE_SIZE}:")
    assert samples[0]["body"]["messages"][1]["content"].startswith("Question number 1:")  # the oldest went


def test_a_label_reference_is_served_its_version(gateway, tenant):
    url, auth = gateway["url"], tenant["auth"]
    httpx.put(f"{url}/v1/templates/support", json={"source": FIXED}, headers=auth)  # v2, production stays on v1
    body = {"messages": [{"role": "system", "content": SYSTEM}, {"role": "user", "content": "hi"}]}
    served = {ref: httpx.post(f"{url}/v1/canonicalize", json={**body, "template": ref}, headers=auth).json()
              for ref in ("support", "support@production", "support@2")}
    assert served["support"]["template_version"] == 1 and served["support@production"]["template_version"] == 1
    assert served["support@2"]["template_version"] == 2 and "Asked at 20" in served["support@2"]["rendered"]
    missing = httpx.post(f"{url}/v1/canonicalize", json={**body, "template": "support@qa"}, headers=auth)
    assert missing.status_code == 400 and missing.json()["error"]["code"] == "template_not_found"
    preview = served["support"]
    assert [s["section"] for s in preview["segments"]] == ["system", "question", "generation"]
    assert preview["static_prefix_pages"] == preview["static_prefix_len"] // preview["page_size"] > 0


def test_the_what_if_puts_a_now_first_draft_below_the_published_version(gateway, tenant):
    url, auth = gateway["url"], tenant["auth"]
    broken = httpx.post(f"{url}/v1/templates/support/estimate", json={"source": NOW_FIRST}, headers=auth).json()
    fixed = httpx.post(f"{url}/v1/templates/support/estimate", json={"source": FIXED}, headers=auth).json()
    assert broken["num_requests"] == SAMPLE_SIZE and broken["base_version"] == 1
    assert broken["draft"]["hit_rate"] < 0.1 < broken["current"]["hit_rate"]
    # the fix keeps the static prefix; only the timestamp's own tokens (now in the question) are new
    assert fixed["draft"]["hit_rate"] > 0.8 * fixed["current"]["hit_rate"]
    assert [f["rule"] for f in broken["lint"]] == ["dynamic-before-question"] and broken["lint"][0]["line"] == 1
    assert fixed["lint"] == [] and len(broken["draft"]["prefilled_tokens"]) == SAMPLE_SIZE
    bad = httpx.post(f"{url}/v1/templates/support/estimate", json={"source": "{% block x %}"}, headers=auth)
    assert bad.status_code == 400 and bad.json()["error"]["code"] == "template_syntax_error"
    _, other = new_tenant(url)
    theirs = httpx.post(f"{url}/v1/templates/support/estimate", json={"source": GOOD}, headers=other).json()
    assert theirs["num_requests"] == 0 and theirs["current"] is None  # tenant A's samples are not B's


def test_the_templates_page_previews_estimates_and_publishes_for_a_tenant(gateway, tenant, monkeypatch):
    monkeypatch.setenv("RADIXGATE_DB_URL", gateway["db_url"])
    monkeypatch.setenv("RADIXGATE_GATEWAY_URL", gateway["url"])
    app = AppTest.from_file(str(REPO_ROOT / "dashboard" / "app.py"), default_timeout=120).run()
    app.text_input(key="sign_in_key").input(tenant["key"])
    next(b for b in app.button if b.label == "Sign in").click().run()
    app.switch_page("views/templates.py").run()
    app.text_area(key="draft::support").input(NOW_FIRST).run()
    assert not app.exception, [e.value for e in app.exception]
    assert "dynamic-before-question" in app.warning[0].value
    rates = {m.label: float(m.value.rstrip("%")) for m in app.metric if m.label.startswith("What-if")}
    assert rates["What-if hit rate · draft"] < rates["What-if hit rate · current v1"]
    app.text_area(key="draft::support").input(FIXED).run()
    assert any("No lint findings" in s.value for s in app.success)
    app.text_input(key="publish_label").input("production")
    next(b for b in app.button if b.label == "Publish").click().run()
    assert any("Published support v3" in s.value for s in app.success), [s.value for s in app.success]
    served = httpx.get(f"{gateway['url']}/v1/templates/support", headers=tenant["auth"]).json()
    assert served["published_version"] == 3 and served["labels"]["production"] == 3
