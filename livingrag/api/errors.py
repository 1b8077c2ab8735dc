"""Structured JSON errors: every failure answers ``{"error": {"code", "message", "request_id"}}``.

:mod:`livingrag.errors` map to HTTP statuses here, once; nothing else in the API builds error
bodies by hand. A client error (4xx) says what was wrong with the request. A server-side failure
(5xx: the LLM, the database, a model, a bug) answers a fixed, safe message for its code: upstream
response bodies, server URLs, driver error lines and exception text go to the server log, with the
request id that the response carries (body and ``X-Request-ID``), never to the tenant.
"""

from __future__ import annotations

import logging
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import BaseModel
from starlette.exceptions import HTTPException as StarletteHTTPException

from livingrag import errors as e
from livingrag.api.request_id import request_id_of
from livingrag.corpus.index_jobs import JobQueueFull
from livingrag.db.sql_errors import hide_sql_parameters

log = logging.getLogger(__name__)


class ErrorBody(BaseModel):
    code: str
    message: str
    request_id: str | None = None


class ErrorResponse(BaseModel):
    """The body of every error response."""

    error: ErrorBody


class ApiError(Exception):
    """An error with its HTTP status and machine-readable code."""

    def __init__(self, status: int, code: str, message: str, headers: dict[str, str] | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message
        self.headers = headers or {}


# (exception class, status, code); the first match wins, so subclasses come first.
_MAP: list[tuple[type[BaseException], int, str]] = [
    (e.AuthenticationError, 401, "unauthorized"),
    (JobQueueFull, 429, "too_many_requests"),
    (e.NotFound, 404, "not_found"),
    (e.QuotaExceeded, 409, "quota_exceeded"),
    (e.AlreadyExists, 409, "already_exists"),
    (e.Conflict, 409, "conflict"),
    (e.InvalidInput, 422, "invalid_input"),
    (e.LLMTimeout, 504, "llm_timeout"),
    (e.LLMUnavailable, 503, "llm_unavailable"),
    (e.LLMError, 502, "llm_error"),
    (e.DatabaseUnavailable, 503, "database_unavailable"),
    (e.SchemaOutOfDate, 503, "schema_out_of_date"),
    (e.ModelUnavailable, 503, "model_unavailable"),
]

STATUS_CODES = {
    400: "bad_request",
    401: "unauthorized",
    403: "forbidden",
    404: "not_found",
    405: "method_not_allowed",
    409: "already_exists",
    413: "payload_too_large",
    415: "unsupported_media_type",
    422: "invalid_input",
    429: "too_many_requests",
    503: "unavailable",
}

# Documented on every route: what an operation may answer besides success.
COMMON_RESPONSES: dict[int | str, dict[str, Any]] = {
    401: {"model": ErrorResponse, "description": "Missing, unknown, revoked or expired API key."},
    403: {"model": ErrorResponse, "description": "The key lacks the scope this operation needs."},
    413: {"model": ErrorResponse, "description": "Request body larger than api.max_request_bytes."},
    422: {"model": ErrorResponse, "description": "Malformed input; the message names the field."},
    503: {"model": ErrorResponse, "description": "Database (or model) unavailable; retry later."},
}


SAFE_MESSAGES = {
    "llm_timeout": "the language model timed out (no answer within the timeout); try again",
    "llm_unavailable": "the language model is unavailable; try again later",
    "llm_error": "the language model returned an error",
    "database_unavailable": "the database is unavailable; try again later",
    "schema_out_of_date": "the database schema is out of date; an operator must run `livingrag db upgrade`",
    "model_unavailable": "a model the service needs is unavailable; try again later",
    "internal": "internal server error",
}
"""What a tenant is told for each server-side code; the detail is in the server log under the request id."""


def error_response(
    status: int, code: str, message: str, headers: dict[str, str] | None = None, *, request_id: str | None = None
) -> JSONResponse:
    body: dict[str, Any] = {"code": code, "message": message}
    if request_id is not None:
        body["request_id"] = request_id
    return JSONResponse({"error": body}, status_code=status, headers=headers)


def body_error_message(cause: BaseException) -> str:
    """What a client is told of a body that could not be parsed (FastAPI's 400), without the
    parser's internal text."""
    if isinstance(cause, RecursionError):
        return "the body is not acceptable JSON: it is nested too deeply"
    return "the body could not be read as JSON"


def server_error(
    request: Request, status: int, code: str, exc: BaseException, headers: dict[str, str] | None = None
) -> JSONResponse:
    """The safe answer for a server-side failure; the exception is logged with the request id
    (an SQL statement's parameters left out: :func:`hide_sql_parameters`)."""
    hide_sql_parameters(exc)
    rid = request_id_of(request)
    unexpected = not isinstance(exc, e.LivingRAGError) or code == "internal"
    log.log(
        logging.ERROR if unexpected else logging.WARNING,
        "request %s %s %s failed (%s): %s: %s",
        rid, request.method, request.url.path, code, type(exc).__name__, exc,
        exc_info=exc if unexpected else None,
    )  # fmt: skip
    message = f"{SAFE_MESSAGES.get(code, SAFE_MESSAGES['internal'])} (request id {rid})"
    return error_response(status, code, message, headers, request_id=rid)


def error_event(request: Request, exc: BaseException) -> dict[str, Any]:
    """The body of a streamed reply's ``error`` event for ``exc`` (the response's status is already
    sent): the same ``{"error": {...}}`` and the same safe message for a server-side failure, logged
    with the request id, as the handlers below answer before a stream begins; plus ``status``."""
    if isinstance(exc, ApiError):
        status, code, message = exc.status, exc.code, exc.message
    else:
        status, code = map_exception(exc) or (500, "internal")
        message = str(exc)
    rid = request_id_of(request)
    if status >= 500:
        hide_sql_parameters(exc)
        log.log(
            logging.ERROR if code == "internal" else logging.WARNING,
            "request %s %s %s failed mid-stream (%s): %s: %s",
            rid, request.method, request.url.path, code, type(exc).__name__, exc,
            exc_info=exc if code == "internal" else None,
        )  # fmt: skip
        message = f"{SAFE_MESSAGES.get(code, SAFE_MESSAGES['internal'])} (request id {rid})"
    return {"error": {"code": code, "message": message, "request_id": rid}, "status": status}


def map_exception(exc: BaseException) -> tuple[int, str] | None:
    for cls, status, code in _MAP:
        if isinstance(exc, cls):
            return status, code
    return None


def _loc(loc: tuple[Any, ...] | list[Any]) -> str:
    return ".".join(str(p) for p in loc) or "request"


def describe_validation(exc: RequestValidationError) -> str:
    """One line per problem, each naming where it is (``body.question: Field required``)."""
    parts = []
    for err in exc.errors()[:10]:
        msg = err.get("msg", "invalid")
        if err.get("type") == "json_invalid":
            ctx = err.get("ctx") or {}
            msg = f"the body is not valid JSON ({ctx.get('error', 'parse error')})"
        parts.append(f"{_loc(err.get('loc', ()))}: {msg}")
    return "; ".join(parts) or "invalid request"


def install(app: FastAPI) -> None:
    """Register the handlers that turn every error into the structured body."""

    @app.exception_handler(ApiError)
    async def _api(request: Request, exc: ApiError) -> JSONResponse:
        return error_response(exc.status, exc.code, exc.message, exc.headers, request_id=request_id_of(request))

    @app.exception_handler(e.LivingRAGError)
    async def _domain(request: Request, exc: e.LivingRAGError) -> JSONResponse:
        mapped = map_exception(exc)
        if mapped is None:
            return server_error(request, 500, "internal", exc)
        status, code = mapped
        headers = {"Retry-After": "2"} if status in (429, 503) else None
        if status >= 500:
            return server_error(request, status, code, exc, headers)
        return error_response(status, code, str(exc), headers, request_id=request_id_of(request))

    @app.exception_handler(RequestValidationError)
    async def _validation(request: Request, exc: RequestValidationError) -> JSONResponse:
        return error_response(422, "invalid_input", describe_validation(exc), request_id=request_id_of(request))

    @app.exception_handler(StarletteHTTPException)
    async def _http(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        code = STATUS_CODES.get(exc.status_code, "error")
        message = str(exc.detail)
        cause = exc.__cause__
        if isinstance(cause, UnicodeDecodeError):
            bad = cause.object[cause.start : cause.start + 1].hex()
            message = f"the body is not UTF-8 text (byte 0x{bad} at offset {cause.start}); send UTF-8 JSON"
        elif cause is not None and exc.status_code == 400:
            message = body_error_message(cause)
        return error_response(
            exc.status_code, code, message, getattr(exc, "headers", None), request_id=request_id_of(request)
        )

    @app.exception_handler(Exception)
    async def _unexpected(request: Request, exc: Exception) -> JSONResponse:
        return server_error(request, 500, "internal", exc)
