"""OpenAI-style errors: one exception type for the API, and the handlers that render every error the same way.

Every error response body is {"error": {"message", "type", "param", "code"}},
whatever raised it: an `ApiError`, a request-validation failure (400), a
Starlette HTTPException (404, 405, ...), or an engine error. A wire format with
an envelope of its own (Anthropic's, gateway/messages/envelope.py) registers an
ErrorEnvelope: the same ApiError, rendered its way for the requests it matches.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

log = logging.getLogger(__name__)

ENGINE_RETRY_AFTER_S = 1
DATABASE_RETRY_AFTER_S = 2

FieldPath = tuple[str | int, ...]
"""A field of the internal request (gateway/generation/request.py), e.g. ("tools", 0, "parameters").
Each wire format names it in its own words (its ParamNames); `format_path` is the neutral spelling."""

ParamNames = Callable[[FieldPath], str]


def format_path(path: FieldPath) -> str:
    """("tools", 0, "parameters") -> "tools[0].parameters"."""
    text = ""
    for part in path:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else part)
    return text


class ApiError(Exception):
    """An error the API returns as-is; status_code and the OpenAI error fields."""

    def __init__(
        self,
        status_code: int,
        message: str,
        type: str = "invalid_request_error",
        code: str | None = None,
        param: str | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.status_code = status_code
        self.message = message
        self.type = type
        self.code = code
        self.param = param
        self.headers = headers
        self.field: FieldPath | None = None  # set by field_error: the internal field the error is about
        self._describe: Callable[[str], str] | None = None

    def name_field(self, names: ParamNames) -> ApiError:
        """Name the internal field this error is about as the caller's wire format does (param and message).
        An error about no internal field is left as it is. Returns self."""
        if self.field is not None and self._describe is not None:
            self.param = names(self.field)
            self.message = self._describe(self.param)
            self.args = (self.message,)
        return self

    def body(self) -> dict:
        return {"error": {"message": self.message, "type": self.type, "param": self.param, "code": self.code}}

    def to_response(self) -> JSONResponse:
        return JSONResponse(self.body(), status_code=self.status_code, headers=self.headers)


def bad_request(message: str, param: str | None = None, code: str | None = "invalid_request") -> ApiError:
    return ApiError(400, message, "invalid_request_error", code, param)


def field_error(field: FieldPath, describe: Callable[[str], str], code: str | None = "invalid_request",
                status_code: int = 400) -> ApiError:
    """An error about one field of the internal request; `describe(param)` writes the message around the
    field's name, so each wire format's name lands in both `param` and the message (ApiError.name_field).
    Until named, the field is spelled neutrally (format_path)."""
    name = format_path(field)
    error = ApiError(status_code, describe(name), "invalid_request_error", code, name or None)
    error.field, error._describe = field, describe
    return error


def unauthorized(message: str = "Invalid API key.") -> ApiError:
    return ApiError(401, message, "invalid_request_error", "invalid_api_key", headers={"WWW-Authenticate": "Bearer"})


def forbidden(message: str) -> ApiError:
    return ApiError(403, message, "permission_error", "forbidden")


def not_found(message: str, param: str | None = None) -> ApiError:
    return ApiError(404, message, "invalid_request_error", "not_found", param)


def conflict(message: str, param: str | None = None, code: str = "conflict") -> ApiError:
    return ApiError(409, message, "invalid_request_error", code, param)


def too_many_requests(message: str, retry_after_s: int = 1) -> ApiError:
    return ApiError(429, message, "rate_limit_error", "rate_limit_exceeded", headers={"Retry-After": str(retry_after_s)})


def service_unavailable(message: str, retry_after_s: int = ENGINE_RETRY_AFTER_S) -> ApiError:
    return ApiError(503, message, "server_error", "overloaded", headers={"Retry-After": str(retry_after_s)})


def database_unavailable() -> ApiError:
    error = service_unavailable("The gateway's database is unavailable; retry shortly.", DATABASE_RETRY_AFTER_S)
    error.code = "database_unavailable"
    return error


def is_database_unavailable(exc: BaseException) -> bool:
    """A pool checkout that timed out, or a database that refused, dropped or locked the connection:
    worth retrying, never the client's fault (SQL and constraint errors are not included)."""
    from sqlalchemy.exc import DBAPIError, InterfaceError, OperationalError
    from sqlalchemy.exc import TimeoutError as PoolTimeoutError

    if isinstance(exc, (PoolTimeoutError, OperationalError, InterfaceError)):
        return True
    return isinstance(exc, DBAPIError) and bool(exc.connection_invalidated)


def from_exception(exc: Exception) -> ApiError:
    """Map an exception from the engine, templates or a backend to the ApiError the client sees.

    Unknown exceptions become a 500 whose message reveals nothing of the exception.
    """
    from engine import (EngineOverloadedError, GrammarError, PinCapacityError, PromptTooLongError, QueueTimeoutError,
                        QuotaExceededError)
    from gateway.prompt_templates import TemplateError, TemplateNotFound
    from gateway.routing.backend import BackendStreamError, BackendUnavailableError
    from gateway.routing.remote import BackendRejectedError

    if isinstance(exc, ApiError):
        return exc
    if isinstance(exc, PromptTooLongError):
        return field_error(("messages",), lambda _: str(exc), "context_length_exceeded")
    if isinstance(exc, GrammarError):
        return bad_request(f"The output constraint cannot be compiled: {exc}", None, "invalid_schema")
    if isinstance(exc, QueueTimeoutError):
        return ApiError(503, f"The server is overloaded: the request was not scheduled in time; retry later. ({exc})",
                        "server_overloaded", "queue_timeout", headers={"Retry-After": str(ENGINE_RETRY_AFTER_S)})
    if isinstance(exc, EngineOverloadedError):
        return service_unavailable(f"The engine queue is full; retry later. ({exc})")
    if isinstance(exc, PinCapacityError):
        return conflict(f"The gateway's cache cannot hold more pinned prefixes: {exc}", code="pin_capacity_exceeded")
    if isinstance(exc, QuotaExceededError):
        return conflict(str(exc), code="pin_quota_exceeded")
    if isinstance(exc, TemplateNotFound):
        return bad_request(f"Unknown template: {exc.args[0] if exc.args else exc}", "template", "template_not_found")
    if isinstance(exc, TemplateError):
        return bad_request(f"Template error: {exc}", "template", "template_error")
    if isinstance(exc, BackendRejectedError):  # its message is ours (routing/remote.py), never upstream text
        return bad_request(str(exc), None, "backend_rejected")
    if isinstance(exc, BackendUnavailableError):  # its message is ours (routing/backend.py), never upstream text
        return service_unavailable(f"No backend could take the request: {exc}")
    if is_database_unavailable(exc):
        return database_unavailable()
    if isinstance(exc, BackendStreamError):
        return ApiError(502, str(exc), "server_error", "backend_stream_failed")
    return ApiError(500, "Internal server error.", "server_error", "internal_error")


@dataclass(frozen=True)
class ErrorEnvelope:
    """Another wire format's error shape: `render` answers every error of the requests `matches`."""

    matches: Callable[[Request], bool]
    render: Callable[[ApiError], JSONResponse]


def respond(request: Request, error: ApiError) -> JSONResponse:
    """`error` in the envelope of the request's wire format (OpenAI's unless an ErrorEnvelope matches)."""
    for envelope in getattr(request.app.state, "error_envelopes", ()):
        if envelope.matches(request):
            return envelope.render(error)
    return error.to_response()


async def _api_error_handler(request: Request, exc: ApiError) -> JSONResponse:
    return respond(request, exc)


async def _validation_handler(request: Request, exc: RequestValidationError) -> JSONResponse:
    errors = exc.errors()
    first = errors[0] if errors else {}
    loc = [str(p) for p in first.get("loc", ()) if p not in ("body", "query", "path", "header")]
    message = "; ".join(f"{'.'.join(str(p) for p in e.get('loc', ()))}: {e.get('msg')}" for e in errors[:5])
    return respond(request, bad_request(message or "Invalid request body.", ".".join(loc) or None))


async def _http_error_handler(request: Request, exc: StarletteHTTPException) -> JSONResponse:
    kind = "invalid_request_error" if exc.status_code < 500 else "server_error"
    code = {401: "invalid_api_key", 404: "not_found", 405: "method_not_allowed"}.get(exc.status_code)
    headers = getattr(exc, "headers", None)
    return respond(request, ApiError(exc.status_code, str(exc.detail), kind, code, headers=headers))


async def _unhandled_handler(request: Request, exc: Exception) -> JSONResponse:
    api_error = from_exception(exc)
    if api_error.code == "database_unavailable":
        log.warning("database unavailable on %s %s: %s", request.method, request.url.path, type(exc).__name__)
    if api_error.status_code >= 500 and api_error.code == "internal_error":
        log.exception("unhandled error on %s %s", request.method, request.url.path, exc_info=exc)
    return respond(request, api_error)


async def _database_handler(request: Request, exc: Exception) -> JSONResponse:
    """SQLAlchemy errors: an unavailable database is a 503 with Retry-After, anything else a logged 500.
    (Handled here rather than by the catch-all, which Starlette re-raises after answering.)"""
    return await _unhandled_handler(request, exc)


def install_error_handlers(app: FastAPI, envelopes: tuple[ErrorEnvelope, ...] = ()) -> None:
    """Render every error as OpenAI error JSON, or in the first of `envelopes` that matches its request."""
    from sqlalchemy.exc import SQLAlchemyError

    app.state.error_envelopes = envelopes
    app.add_exception_handler(SQLAlchemyError, _database_handler)
    app.add_exception_handler(ApiError, _api_error_handler)
    app.add_exception_handler(RequestValidationError, _validation_handler)
    app.add_exception_handler(StarletteHTTPException, _http_error_handler)
    app.add_exception_handler(Exception, _unhandled_handler)
