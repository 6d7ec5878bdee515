"""Shared e2e fixtures: one real `radixgate serve` process per session, and fresh tenants on it.

The server runs exactly as a user starts it on a fresh machine: `radixgate serve`
with no flags, in an empty working directory (so the database is the default
./radixgate.db there and the model is the default one); only the port (a free
loopback port), the admin key and a smaller KV cache come from RADIXGATE_*
environment variables. Its output goes to server.log beside the database.

    def test_x(gateway_server, tenant_key):
        client = OpenAI(base_url=gateway_server.api_base, api_key=tenant_key)
"""

from __future__ import annotations

import os
import subprocess
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from server_process import RADIXGATE, free_port

ADMIN_KEY = "sk-e2e-admin"
STARTUP_TIMEOUT_S = 240


@dataclass
class GatewayServer:
    base_url: str
    admin_key: str
    workdir: Path
    process: subprocess.Popen

    @property
    def api_base(self) -> str:
        return f"{self.base_url}/v1"

    @property
    def db_url(self) -> str:
        return f"sqlite:///{self.workdir / 'radixgate.db'}"

    @property
    def log_path(self) -> Path:
        return self.workdir / "server.log"

    def log_text(self) -> str:
        return self.log_path.read_text(errors="replace")

    def create_tenant(self, name: str | None = None, **fields) -> dict:
        """A new tenant through the admin API; returns the response JSON (its key at ["api_key"]["key"])."""
        name = name or f"t-{uuid.uuid4().hex[:10]}"
        response = httpx.post(
            f"{self.base_url}/admin/tenants", json={"name": name, **fields},
            headers={"Authorization": f"Bearer {self.admin_key}"}, timeout=30,
        )
        response.raise_for_status()
        return response.json()


def wait_until_ready(server: GatewayServer) -> None:
    deadline = time.monotonic() + STARTUP_TIMEOUT_S
    while time.monotonic() < deadline:
        if server.process.poll() is not None:
            raise RuntimeError(f"radixgate serve exited with {server.process.returncode}:\n{server.log_text()[-4000:]}")
        try:
            if httpx.get(f"{server.base_url}/healthz", timeout=1.0).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.5)
    raise TimeoutError(f"radixgate serve not ready in {STARTUP_TIMEOUT_S}s:\n{server.log_text()[-4000:]}")


@pytest.fixture(scope="session")
def gateway_server(tmp_path_factory):
    workdir = tmp_path_factory.mktemp("gateway-server")
    port = free_port()
    env = {
        **os.environ,
        "RADIXGATE_PORT": str(port),
        "RADIXGATE_ADMIN_KEY": ADMIN_KEY,
        "RADIXGATE_ENGINE__KV_CACHE_TOKENS": "16384",
        "RADIXGATE_ENGINE__DEVICE": "cpu",
        "LITELLM_LOCAL_MODEL_COST_MAP": "True",
    }
    log_file = open(workdir / "server.log", "wb")
    process = subprocess.Popen([str(RADIXGATE), "serve"], cwd=workdir, env=env, stdout=log_file, stderr=subprocess.STDOUT)
    server = GatewayServer(base_url=f"http://127.0.0.1:{port}", admin_key=ADMIN_KEY, workdir=workdir, process=process)
    try:
        wait_until_ready(server)
        yield server
    finally:
        process.terminate()
        try:
            process.wait(30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        log_file.close()


@pytest.fixture()
def tenant_key(gateway_server) -> str:
    """The API key of a fresh tenant (its own cache namespace: nothing cached yet)."""
    return gateway_server.create_tenant()["api_key"]["key"]
