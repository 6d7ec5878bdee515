"""`radixgate serve --with-dashboard --config FILE --db URL --port N`: API and dashboard start together and stop together."""

from __future__ import annotations

import os
import signal
import subprocess
import time

import httpx
import pytest
from tests.support.server_process import RADIXGATE, free_port

pytestmark = pytest.mark.slow

STARTUP_TIMEOUT_S = 240


def wait_for(url: str, process: subprocess.Popen, log_path, expect: str | None = None) -> None:
    deadline = time.monotonic() + STARTUP_TIMEOUT_S
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"radixgate serve exited: {log_path.read_text()[-3000:]}")
        try:
            response = httpx.get(url, timeout=1.0)
            if response.status_code == 200 and (expect is None or expect in response.text):
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.5)
    raise TimeoutError(f"{url} not up: {log_path.read_text()[-3000:]}")


def is_up(url: str) -> bool:
    try:
        return httpx.get(url, timeout=1.0).status_code == 200
    except httpx.HTTPError:
        return False


def test_serve_with_dashboard_config_and_db_flags(tmp_path):
    api_port, dashboard_port = free_port(), free_port()
    config = tmp_path / "radixgate.toml"
    config.write_text(f'dashboard_port = {dashboard_port}\nadmin_key = "sk-cli-admin"\n[engine]\nkv_cache_tokens = 4096\ndevice = "cpu"\n')
    db_path = tmp_path / "custom.db"
    log_path = tmp_path / "serve.log"
    env = {k: v for k, v in os.environ.items() if not k.startswith("RADIXGATE_")}
    with open(log_path, "wb") as log_file:
        process = subprocess.Popen(
            [str(RADIXGATE), "serve", "--port", str(api_port), "--db", f"sqlite:///{db_path}", "--config", str(config),
             "--with-dashboard"],
            cwd=tmp_path, env=env, stdout=log_file, stderr=subprocess.STDOUT,
        )
        try:
            wait_for(f"http://127.0.0.1:{api_port}/healthz", process, log_path)
            wait_for(f"http://127.0.0.1:{dashboard_port}/_stcore/health", process, log_path, expect="ok")
            assert db_path.is_file() and not (tmp_path / "radixgate.db").exists()
            tenants = httpx.get(f"http://127.0.0.1:{api_port}/admin/tenants",
                                headers={"Authorization": "Bearer sk-cli-admin"}, timeout=10)
            assert tenants.status_code == 200
        finally:
            process.send_signal(signal.SIGINT)
            process.wait(60)
    log_text = log_path.read_text()
    # SIGINT: the HTTP thread shut the app down (lifespan ran), then the engine loop on main stopped
    assert process.returncode == 0 and "Application shutdown complete" in log_text, log_text[-3000:]
    assert f"http://127.0.0.1:{api_port}/v1" in log_text and f"dashboard: http://127.0.0.1:{dashboard_port}" in log_text
    deadline = time.monotonic() + 15
    while is_up(f"http://127.0.0.1:{dashboard_port}/_stcore/health") and time.monotonic() < deadline:
        time.sleep(0.5)
    assert not is_up(f"http://127.0.0.1:{dashboard_port}/_stcore/health")


def test_serve_with_a_missing_model_says_so_and_exits_2(tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith("RADIXGATE_")}
    result = subprocess.run(
        [str(RADIXGATE), "serve", "--port", str(free_port()), "--db", f"sqlite:///{tmp_path / 'r.db'}",
         "--model", str(tmp_path / "no-such-model")],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120,
    )
    assert result.returncode == 2
    assert "cannot load model" in result.stderr and "does not exist" in result.stderr
    assert "Traceback" not in result.stderr + result.stdout
