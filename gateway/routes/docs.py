"""/openapi.json, /docs and /redoc behind the admin key (used when settings.protect_docs is set;
otherwise FastAPI serves them openly)."""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.openapi.docs import get_redoc_html, get_swagger_ui_html
from fastapi.responses import HTMLResponse, JSONResponse

from gateway.deps import AdminDep

router = APIRouter(include_in_schema=False)


@router.get("/openapi.json")
def openapi(request: Request, _: AdminDep) -> JSONResponse:
    return JSONResponse(request.app.openapi())


@router.get("/docs")
def swagger(_: AdminDep) -> HTMLResponse:
    return get_swagger_ui_html(openapi_url="/openapi.json", title="radixgate")


@router.get("/redoc")
def redoc(_: AdminDep) -> HTMLResponse:
    return get_redoc_html(openapi_url="/openapi.json", title="radixgate")
