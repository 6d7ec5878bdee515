"""Every error renders as OpenAI error JSON with the right status code."""

from __future__ import annotations

from fastapi import FastAPI
from fastapi.testclient import TestClient
from pydantic import BaseModel

from engine.errors import EngineOverloadedError, PromptTooLongError, QueueTimeoutError, QuotaExceededError
from gateway.errors import bad_request, from_exception, install_error_handlers


class Body(BaseModel):
    x: int


def make_client() -> TestClient:
    app = FastAPI()
    install_error_handlers(app)

    @app.post("/echo")
    def echo(body: Body) -> dict:
        return {"x": body.x}

    @app.get("/raise/{kind}")
    def raise_(kind: str) -> dict:
        errors = {"api": bad_request("nope", "p"), "long": PromptTooLongError("too long"),
                  "full": EngineOverloadedError("full"), "quota": QuotaExceededError("quota"), "bug": RuntimeError("x"),
                  "late": QueueTimeoutError("waited")}
        raise errors[kind]

    return TestClient(app, raise_server_exceptions=False)


def test_errors_have_openai_shape_and_status():
    client = make_client()
    expected = {"api": (400, "invalid_request"), "long": (400, "context_length_exceeded"), "full": (503, "overloaded"),
                "quota": (409, "pin_quota_exceeded"), "bug": (500, "internal_error"), "late": (503, "queue_timeout")}
    for kind, (status, code) in expected.items():
        response = client.get(f"/raise/{kind}")
        assert response.status_code == status, kind
        assert set(response.json()["error"]) == {"message", "type", "param", "code"}
        assert response.json()["error"]["code"] == code
    assert client.get("/raise/full").headers["retry-after"] == "1"
    late = client.get("/raise/late")
    assert late.headers["retry-after"] == "1" and late.json()["error"]["type"] == "server_overloaded"
    assert "x" not in client.get("/raise/bug").json()["error"]["message"]


def test_validation_and_routing_errors_are_openai_shaped():
    client = make_client()
    invalid = client.post("/echo", json={"x": "not an int"})
    assert invalid.status_code == 400 and invalid.json()["error"]["param"] == "x"
    missing = client.get("/nowhere")
    assert missing.status_code == 404 and missing.json()["error"]["code"] == "not_found"


def test_from_exception_passes_api_errors_through():
    error = bad_request("m")
    assert from_exception(error) is error
