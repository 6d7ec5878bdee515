"""GatewayClient: the dashboard's way to change anything, the gateway's HTTP API with the signed-in key.

The dashboard never writes to the database: publishing, labels and pins go through these
calls, so the API's checks (tenant scope, quotas, limits) apply. Errors come back as
GatewayError with the API's OpenAI-style message.
"""

from __future__ import annotations

import httpx

TIMEOUT_S = 60.0


class GatewayError(RuntimeError):
    """A non-2xx answer (its status and OpenAI-style message) or an unreachable gateway (status None)."""

    def __init__(self, message: str, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status


class GatewayClient:
    def __init__(self, base_url: str, key: str) -> None:
        self.base_url = base_url.rstrip("/")
        self.headers = {"Authorization": f"Bearer {key}"}

    def call(self, method: str, path: str, json: dict | None = None, params: dict | None = None) -> dict:
        try:
            response = httpx.request(method, self.base_url + path, json=json, params=params, headers=self.headers,
                                     timeout=TIMEOUT_S)
        except httpx.HTTPError as exc:
            raise GatewayError(f"The gateway at {self.base_url} did not answer: {exc.__class__.__name__}.") from exc
        if response.is_success:
            return response.json()
        try:
            message = response.json()["error"]["message"]
        except (ValueError, KeyError, TypeError):
            message = response.text[:500]
        raise GatewayError(message, response.status_code)

    def list_templates(self) -> list[dict]:
        return [t for t in self.call("GET", "/v1/templates")["data"] if not t["is_builtin"]]

    def get_template(self, name: str, version: str | None = None) -> dict:
        return self.call("GET", f"/v1/templates/{name}", params={"version": version} if version else None)

    def samples(self, name: str, limit: int = 20) -> list[dict]:
        return self.call("GET", f"/v1/templates/{name}/samples", params={"limit": limit})["data"]

    def preview(self, body: dict, template: str) -> dict:
        return self.call("POST", "/v1/canonicalize", json={**body, "template": template})

    def diff(self, name: str, source: str) -> dict:
        return self.call("POST", f"/v1/templates/{name}/diff", json={"source": source})

    def estimate(self, name: str, source: str) -> dict:
        return self.call("POST", f"/v1/templates/{name}/estimate", json={"source": source})

    def publish(self, name: str, source: str, label: str | None) -> dict:
        return self.call("PUT", f"/v1/templates/{name}", json={"source": source, "label": label})

    def move_label(self, name: str, label: str, version: int) -> dict:
        return self.call("PUT", f"/v1/templates/{name}/labels/{label}", json={"version": version})

    def pin(self, body: dict) -> dict:
        return self.call("POST", "/v1/pins", json=body)
