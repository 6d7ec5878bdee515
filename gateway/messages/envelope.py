"""Anthropic's error envelope, for every error a Messages client can meet.

    {"type": "error", "error": {"type": "invalid_request_error", "message": "..."}}

The error's type follows its status as Anthropic's API does: 400 invalid_request_error, 401
authentication_error, 403 permission_error, 404 not_found_error, 413 request_too_large, 429
rate_limit_error, 529 overloaded_error, other 5xx api_error. radixgate's 503 (engine queue full,
queue deadline, no backend, database away) is Anthropic's 529 overloaded_error, which its clients
retry, with the Retry-After header kept.

ANTHROPIC_ENVELOPE (gateway/errors.py ErrorEnvelope) renders the errors of /v1/messages* and of
/v1/models* asked with an `anthropic-version` header; every other route keeps OpenAI's shape.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from fastapi.responses import JSONResponse

from gateway.errors import ErrorEnvelope

if TYPE_CHECKING:
    from fastapi import Request

    from gateway.errors import ApiError

ERROR_TYPES = {400: "invalid_request_error", 401: "authentication_error", 403: "permission_error",
               404: "not_found_error", 413: "request_too_large", 429: "rate_limit_error", 529: "overloaded_error"}
OVERLOADED_STATUS = 529


def wire_status(status_code: int) -> int:
    return OVERLOADED_STATUS if status_code == 503 else status_code


def error_type(status_code: int) -> str:
    status = wire_status(status_code)
    return ERROR_TYPES.get(status, "invalid_request_error" if status < 500 else "api_error")


def error_body(error: ApiError) -> dict:
    return {"type": "error", "error": {"type": error_type(error.status_code), "message": error.message}}


def error_response(error: ApiError) -> JSONResponse:
    return JSONResponse(error_body(error), status_code=wire_status(error.status_code), headers=error.headers)


def is_anthropic_request(request: Request) -> bool:
    path = request.url.path
    return path.startswith("/v1/messages") or (path.startswith("/v1/models") and "anthropic-version" in request.headers)


ANTHROPIC_ENVELOPE = ErrorEnvelope(matches=is_anthropic_request, render=error_response)
