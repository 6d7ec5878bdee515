"""Shared e2e fixtures: one real `radixgate serve` process per session, and fresh tenants on it.

The server is the installed `radixgate serve` console script with no flags, started by
bench.server.ServerProcess in an empty working directory on a free loopback port: the
database is radixgate.db there (the default ./radixgate.db, pinned by ServerProcess so an outer
RADIXGATE_DB_URL cannot redirect it) and the model is the default one; besides the port, host
and admin key, only a smaller KV cache and the CPU device come from RADIXGATE_* environment
variables. Its output goes to server.log beside the database.

    def test_x(gateway_server, tenant_key):
        client = OpenAI(base_url=gateway_server.api_base, api_key=tenant_key)
"""

from __future__ import annotations

import uuid

import httpx
import pytest

from bench.server import ServerProcess
from tests.support.server_process import RADIXGATE

STARTUP_TIMEOUT_S = 240


class GatewayServer(ServerProcess):
    """ServerProcess with the e2e tests' vocabulary: API base, database URL, log text, tenant creation."""

    @property
    def base_url(self) -> str:
        return self.url

    @property
    def api_base(self) -> str:
        return f"{self.url}/v1"

    @property
    def db_url(self) -> str:
        return f"sqlite:///{self.workdir / 'radixgate.db'}"

    def log_text(self) -> str:
        return self.log_path.read_text(errors="replace")

    def create_tenant(self, name: str | None = None, **fields) -> dict:
        """A new tenant through the admin API; returns the response JSON (its key at ["api_key"]["key"])."""
        name = name or f"t-{uuid.uuid4().hex[:10]}"
        response = httpx.post(
            f"{self.url}/admin/tenants", json={"name": name, **fields},
            headers={"Authorization": f"Bearer {self.admin_key}"}, timeout=30,
        )
        response.raise_for_status()
        return response.json()


@pytest.fixture(scope="session")
def gateway_server(tmp_path_factory):
    env = {
        "RADIXGATE_ENGINE__KV_CACHE_TOKENS": "16384",
        "RADIXGATE_ENGINE__DEVICE": "cpu",
        "LITELLM_LOCAL_MODEL_COST_MAP": "True",
    }
    server = GatewayServer(env=env, workdir=tmp_path_factory.mktemp("gateway-server"), command=[str(RADIXGATE)])
    try:
        yield server.start(STARTUP_TIMEOUT_S)
    finally:
        server.stop()


@pytest.fixture()
def tenant_key(gateway_server) -> str:
    """The API key of a fresh tenant (its own cache namespace: nothing cached yet)."""
    return gateway_server.create_tenant()["api_key"]["key"]
