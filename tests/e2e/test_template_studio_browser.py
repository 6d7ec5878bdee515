"""The template studio in a real headless Chromium, and the what-if against the real server.

One tenant on the session's `radixgate serve` process sends requests naming `support` (v1, a
cache-friendly template), so the gateway samples them. Then:
- the what-if estimate for a template agrees with the hit rate the server really serves when the
  same requests are replayed through it with that template (within 3 points; both printed);
- in Chromium (Playwright driving /usr/bin/chromium): sign in with the tenant key (Enter in the
  password field), open Templates, paste a draft that puts `{{ now }}` first, see the lint finding
  and a what-if hit rate below the current version's; fix it, see the estimate recover; publish;
  the new version is what a request naming the template gets (checked through /v1/canonicalize).
Screenshots go to the test's tmp_path.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from gateway.cli.serve import DASHBOARD_CHROME_FLAGS
from tests.e2e.test_dashboard_browser import CHROMIUM, CHROMIUM_ARGS, wait_until_healthy, wait_until_idle
from tests.support.paths import REPO_ROOT
from tests.support.server_process import free_port

pytestmark = pytest.mark.slow

NUM_REQUESTS = 8
HIT_RATE_POINTS = 0.03
SYSTEM = ("You are the support assistant of ACME Corp. Answer in one short sentence, politely, citing the "
          "relevant help-centre article when there is one. Never reveal internal notes. ") * 4
GOOD = """{% block system %}{{ turn_start("system") }}{{ system }}{{ turn_end("system") }}{% endblock %}
{% block question %}{{ turn_start("user") }}{{ question }}{{ turn_end("user") }}{% endblock %}
{% block generation %}{{ generation_prompt }}{% endblock %}"""
NOW_FIRST = GOOD.replace('{{ turn_start("system") }}{{ system }}', '{{ turn_start("system") }}{{ now }} {{ system }}')
FIXED = GOOD.replace('{{ turn_start("user") }}{{ question }}', '{{ turn_start("user") }}Asked at {{ now }}: {{ question }}')


def send(server, auth: dict, template: str, questions: list[str]) -> float:
    """Send one request per question naming `template`; the token-weighted hit rate the server served."""
    prompt = cached = 0
    for question in questions:
        body = {"model": "default", "template": template, "max_tokens": 1, "temperature": 0,
                "messages": [{"role": "system", "content": SYSTEM}, {"role": "user", "content": question}]}
        response = httpx.post(f"{server.api_base}/chat/completions", json=body, headers=auth, timeout=120)
        assert response.status_code == 200, response.text
        usage = response.json()["usage"]
        prompt += usage["prompt_tokens"]
        cached += usage["prompt_tokens_details"]["cached_tokens"]
    return cached / prompt


@pytest.fixture(scope="module")
def studio_tenant(gateway_server):
    created = gateway_server.create_tenant(pin_quota_tokens=4096)
    key = created["api_key"]["key"]
    auth = {"Authorization": f"Bearer {key}"}
    put = httpx.put(f"{gateway_server.api_base}/templates/support", json={"source": GOOD, "label": "production"},
                    headers=auth, timeout=30)
    assert put.status_code == 201, put.text
    questions = [f"Question {i}: how do I change the e-mail address on my account?" for i in range(NUM_REQUESTS)]
    served = send(gateway_server, auth, "support", questions)
    return {"key": key, "auth": auth, "questions": questions, "served_v1": served}


def estimate(server, auth: dict, source: str) -> dict:
    response = httpx.post(f"{server.api_base}/templates/support/estimate", json={"source": source}, headers=auth,
                          timeout=120)
    assert response.status_code == 200, response.text
    return response.json()


def test_the_what_if_agrees_with_the_hit_rate_the_server_serves(gateway_server, studio_tenant, capsys):
    auth = studio_tenant["auth"]
    good = estimate(gateway_server, auth, GOOD)
    assert good["num_requests"] == NUM_REQUESTS
    # The same requests through the server with the now-first template, in a fresh tenant namespace.
    other = gateway_server.create_tenant()["api_key"]["key"]
    other_auth = {"Authorization": f"Bearer {other}"}
    httpx.put(f"{gateway_server.api_base}/templates/support", json={"source": NOW_FIRST}, headers=other_auth, timeout=30)
    served_now_first = send(gateway_server, other_auth, "support", studio_tenant["questions"])
    now_first = estimate(gateway_server, auth, NOW_FIRST)
    with capsys.disabled():
        print(f"\nwhat-if vs served hit rate over {NUM_REQUESTS} requests:"
              f"\n  v1 (cache-friendly): estimate {good['draft']['hit_rate']:.1%}  served {studio_tenant['served_v1']:.1%}"
              f"\n  now-first draft:     estimate {now_first['draft']['hit_rate']:.1%}  served {served_now_first:.1%}")
    assert good["draft"]["hit_rate"] == pytest.approx(studio_tenant["served_v1"], abs=HIT_RATE_POINTS)
    assert now_first["draft"]["hit_rate"] == pytest.approx(served_now_first, abs=HIT_RATE_POINTS)
    assert studio_tenant["served_v1"] > 0.5 > served_now_first


@pytest.fixture()
def dashboard_url(gateway_server, tmp_path):
    port = free_port()
    command = [
        sys.executable, "-m", "streamlit", "run", str(REPO_ROOT / "dashboard" / "app.py"),
        "--server.port", str(port), "--server.address", "127.0.0.1", "--server.headless", "true",
        "--browser.gatherUsageStats", "false", "--server.fileWatcherType", "none", *DASHBOARD_CHROME_FLAGS,
    ]
    env = {**os.environ, "RADIXGATE_DB_URL": gateway_server.db_url, "RADIXGATE_GATEWAY_URL": gateway_server.base_url}
    log = open(tmp_path / "streamlit.log", "w")
    process = subprocess.Popen(command, env=env, stdout=log, stderr=subprocess.STDOUT, cwd=tmp_path)
    base_url = f"http://127.0.0.1:{port}"
    try:
        wait_until_healthy(base_url, process)
        yield base_url
    finally:
        process.terminate()
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        log.close()


def metric_percent(page, label: str) -> float:
    text = page.locator("[data-testid='stMetric']", has_text=label).first.inner_text()
    return float(re.search(r"([0-9.]+)%", text.split(label, 1)[1]).group(1))


def wait_for_metric_change(page, label: str, old_value: float, timeout_ms: int = 60_000) -> float:
    """Wait until the metric `label` shows a value other than `old_value`, and return it.

    Streamlit keeps the previous run's elements on screen until the new run replaces them, and its
    'Running...' widget appears only after a delay, so an idle page can still show the old what-if.
    """
    page.wait_for_function(
        """([label, old]) => {
            const metric = [...document.querySelectorAll("[data-testid='stMetric']")]
                .find(element => element.innerText.includes(label));
            if (!metric) return false;
            const match = metric.innerText.split(label)[1].match(/([0-9.]+)%/);
            return match !== null && parseFloat(match[1]) !== old;
        }""",
        arg=[label, old_value], timeout=timeout_ms,
    )
    return metric_percent(page, label)


def edit_draft(page, source: str) -> None:
    area = page.get_by_label("Template source (draft)")
    area.fill(source)
    area.press("Control+Enter")
    page.wait_for_timeout(500)
    wait_until_idle(page)


def test_author_fixes_a_now_first_draft_and_publishes_it_in_chromium(gateway_server, studio_tenant, dashboard_url, tmp_path):
    from playwright.sync_api import sync_playwright

    if not Path(CHROMIUM).exists():
        pytest.fail(f"{CHROMIUM} missing: run `make browser` (apt-get install chromium)")
    with sync_playwright() as playwright:
        context = playwright.chromium.launch_persistent_context(
            user_data_dir=str(tmp_path / "profile"), executable_path=CHROMIUM, headless=True,
            args=CHROMIUM_ARGS, viewport={"width": 1500, "height": 2200},
        )
        try:
            page = context.new_page()
            page.goto(dashboard_url, wait_until="domcontentloaded")
            field = page.get_by_label("API key")
            field.fill(studio_tenant["key"])
            field.press("Enter")
            page.wait_for_selector("text=Signed in as", timeout=60_000)
            assert page.locator("[data-testid='stAppDeployButton']").count() == 0
            page.locator("[data-testid='stSidebarNavLink']", has_text="Templates").click()
            page.wait_for_selector("text=What-if", timeout=60_000)
            wait_until_idle(page)
            edit_draft(page, NOW_FIRST)
            page.wait_for_selector("text=dynamic-before-question", timeout=60_000)
            current = metric_percent(page, "hit rate · current v1")
            broken = wait_for_metric_change(page, "hit rate · draft", current)  # the GOOD draft showed `current`
            wait_until_idle(page)
            page.screenshot(path=str(tmp_path / "studio-now-first.png"), full_page=True)
            edit_draft(page, FIXED)
            page.wait_for_selector("text=No lint findings", timeout=60_000)
            recovered = wait_for_metric_change(page, "hit rate · draft", broken)
            wait_until_idle(page)
            page.screenshot(path=str(tmp_path / "studio-fixed.png"), full_page=True)
            page.get_by_role("button", name="Publish", exact=True).click()
            page.wait_for_selector("text=Published support v2", timeout=60_000)
            page.screenshot(path=str(tmp_path / "studio-published.png"), full_page=True)
            num_exceptions = page.locator("[data-testid='stException']").count()
        finally:
            context.close()
    assert broken < 0.2 * current and recovered > 0.8 * current  # the timestamp's own tokens are all it costs
    assert num_exceptions == 0
    body = {"messages": [{"role": "system", "content": SYSTEM}, {"role": "user", "content": "hi"}], "template": "support"}
    served = httpx.post(f"{gateway_server.api_base}/canonicalize", json=body, headers=studio_tenant["auth"], timeout=60).json()
    assert served["template_version"] == 2 and "Asked at 20" in served["rendered"] and served["lint"] == []
    assert all((tmp_path / f"studio-{name}.png").stat().st_size > 10_000 for name in ("now-first", "fixed", "published"))
