"""DashboardSettings reads the database and gateway URLs once, from RADIXGATE_* variables."""

from dashboard.settings import DashboardSettings
from gateway.db.session import DEFAULT_DB_URL


def test_defaults_are_the_local_database_and_no_gateway(monkeypatch):
    for name in ("RADIXGATE_DB_URL", "RADIXGATE_GATEWAY_URL"):
        monkeypatch.delenv(name, raising=False)
    assert (DashboardSettings().db_url, DashboardSettings().gateway_url) == (DEFAULT_DB_URL, None)


def test_urls_come_from_the_environment_and_a_blank_gateway_is_none(monkeypatch):
    monkeypatch.setenv("RADIXGATE_DB_URL", "sqlite:///x.db")
    monkeypatch.setenv("RADIXGATE_GATEWAY_URL", "")
    monkeypatch.setenv("RADIXGATE_ENGINE__MODEL", "the gateway's own, ignored here")
    settings = DashboardSettings()
    assert (settings.db_url, settings.gateway_url) == ("sqlite:///x.db", None)
    monkeypatch.setenv("RADIXGATE_GATEWAY_URL", "http://127.0.0.1:8000")
    assert DashboardSettings().gateway_url == "http://127.0.0.1:8000"
