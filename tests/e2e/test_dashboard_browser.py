"""The real dashboard in a real headless Chromium: signed in with the admin key, the overview
renders its chart and a seeded tenant, and the doctor page opens from the sidebar.

Starts `streamlit run dashboard/app.py` on a free loopback port over a seeded SQLite
file, drives Debian's /usr/bin/chromium through Playwright (no downloaded browsers),
waits for a vega-embed chart, and saves a screenshot under the test's tmp_path.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
from tests.support.dashboard_seed import create_seeded_db, issue_seed_keys
from tests.support.server_process import free_port
from tests.support.paths import REPO_ROOT

pytestmark = pytest.mark.slow

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
]
STARTUP_TIMEOUT_S = 60


def wait_until_healthy(base_url: str, process: subprocess.Popen) -> None:
    deadline = time.monotonic() + STARTUP_TIMEOUT_S
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"streamlit exited with {process.returncode}")
        try:
            if httpx.get(f"{base_url}/_stcore/health", timeout=1.0).text == "ok":
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.3)
    raise TimeoutError(f"streamlit did not answer on {base_url} within {STARTUP_TIMEOUT_S}s")


def wait_until_idle(page, timeout_ms: int = 60_000) -> None:
    """Wait until Streamlit has finished the script run (its 'Running...' status widget is gone)."""
    page.wait_for_function(
        "() => !document.querySelector(\"[data-testid='stStatusWidget']\")", timeout=timeout_ms
    )


@pytest.fixture()
def dashboard_url(tmp_path):
    db_url = f"sqlite:///{tmp_path / 'seeded.db'}"
    create_seeded_db(db_url)
    admin_key = issue_seed_keys(db_url)["admin"]
    port = free_port()
    command = [
        sys.executable, "-m", "streamlit", "run", str(REPO_ROOT / "dashboard" / "app.py"),
        "--server.port", str(port), "--server.address", "127.0.0.1", "--server.headless", "true",
        "--browser.gatherUsageStats", "false", "--server.fileWatcherType", "none",
    ]
    env = {**os.environ, "RADIXGATE_DB_URL": db_url}
    env.pop("RADIXGATE_GATEWAY_URL", None)
    log = open(tmp_path / "streamlit.log", "w")
    process = subprocess.Popen(command, env=env, stdout=log, stderr=subprocess.STDOUT, cwd=tmp_path)
    base_url = f"http://127.0.0.1:{port}"
    try:
        wait_until_healthy(base_url, process)
        yield base_url, admin_key
    finally:
        process.terminate()
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        log.close()


def test_overview_renders_chart_and_tenant_in_headless_chromium(dashboard_url, tmp_path):
    from playwright.sync_api import sync_playwright

    dashboard_url, admin_key = dashboard_url
    if not Path(CHROMIUM).exists():
        pytest.fail(f"{CHROMIUM} missing: run `make browser` (apt-get install chromium)")
    screenshot = tmp_path / "overview.png"
    with sync_playwright() as playwright:
        context = playwright.chromium.launch_persistent_context(
            user_data_dir=str(tmp_path / "profile"), executable_path=CHROMIUM, headless=True,
            args=CHROMIUM_ARGS, viewport={"width": 1400, "height": 1800},
        )
        try:
            page = context.new_page()
            page.goto(dashboard_url, wait_until="domcontentloaded")
            field = page.get_by_label("API key")
            field.wait_for(timeout=60_000)
            wait_until_idle(page)
            body_before = page.inner_text("body")
            field.fill(admin_key)
            field.press("Enter")
            page.wait_for_selector("text=Signed in as", timeout=60_000)
            page.wait_for_selector(".vega-embed canvas, .vega-embed svg", timeout=60_000)
            page.wait_for_selector("text=Hit rate over time", timeout=30_000)
            wait_until_idle(page)
            page.wait_for_timeout(1500)  # let vega finish drawing before the screenshot
            page.screenshot(path=str(screenshot), full_page=True)
            body = page.inner_text("body")
            num_exceptions = page.locator("[data-testid='stException']").count()
            # The sign-in lives in the browser session, so the doctor opens from the sidebar.
            page.locator("[data-testid='stSidebarNavLink']", has_text="Cache doctor").click()
            page.wait_for_selector("text=Fix first:", timeout=60_000)
            page.get_by_role("button", name="Refresh data").wait_for(timeout=30_000)
            wait_until_idle(page)
            doctor_body = page.inner_text("body")
            num_exceptions += page.locator("[data-testid='stException']").count()
        finally:
            context.close()
    assert screenshot.stat().st_size > 10_000
    assert "acme" not in body_before  # no data before signing in
    assert "acme" in body and "Prefix-cache overview" in body
    assert num_exceptions == 0 and "Traceback" not in body
    assert "Refresh data" in doctor_body and "Cache doctor" in doctor_body
