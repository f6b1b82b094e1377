"""Error answers of the policy service: one renderer for every client mistake, safe for any input.

FastAPI's own 422 handler echoes the whole input back. That failed on three kinds of input and turned a client
mistake into a 500: a non-finite number (``NaN``, ``Infinity``: not JSON, refused by the response encoder), a lone
surrogate (``"\\ud800"``: not encodable as UTF-8) and very deep nesting (the encoder's recursion limit). It also
sent 259 KB back for a 10,000-goal body. Here every error is rendered from plain strings and integers only: the
field's location, the message and at most a short excerpt of the offending value, each escaped to ASCII and cut to
a fixed length, and at most :data:`MAX_ERRORS` errors. So rendering cannot fail, whatever the body held.

The same shapes document every error status in the OpenAPI schema: :class:`FieldErrorsOut` (422, and 404/409/429
of a named field or session) and :class:`MessageOut` (400, 401, 413 and the request-rate 429).
"""

from __future__ import annotations

import json
import reprlib
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from pydantic import BaseModel, ConfigDict, Field
from starlette.exceptions import HTTPException
from starlette.responses import Response

from agentic_ray.serving.request_check import ClientError

__all__ = [
    "MAX_ERRORS",
    "FieldError",
    "FieldErrorsOut",
    "MessageOut",
    "error_response",
    "excerpt",
    "install_error_handlers",
    "render_errors",
    "safe_text",
]

MAX_ERRORS = 20
"""Errors listed in one answer (the rest are counted in a last entry)."""
MSG_CHARS = 300
LOC_CHARS = 64
EXCERPT_CHARS = 80

_repr = reprlib.Repr()
_repr.maxlevel, _repr.maxdict, _repr.maxlist, _repr.maxtuple = 2, 4, 4, 4
_repr.maxstring = _repr.maxother = _repr.maxlong = EXCERPT_CHARS


class _Out(BaseModel):
    model_config = ConfigDict(extra="forbid")


class FieldError(_Out):
    """One problem, located in the request."""

    loc: list[str | int] = Field(description="Where: `body`, `path` or `query`, then the field's path.")
    msg: str = Field(description="What is wrong, with the bound or the choices the contract gives.")
    type: str = Field(description="Kind of problem (pydantic's error type, or value_error).")
    input: str | None = Field(
        default=None, description="A short escaped excerpt of the offending value (never the whole input)."
    )


class FieldErrorsOut(_Out):
    """A request the service refuses, with every problem found (422), or a named resource it cannot serve."""

    detail: list[FieldError] = Field(description=f"The problems, at most {MAX_ERRORS + 1}.")
    trace_id: str = Field(description="The request's trace id (also in the x-trace-id header).")


class MessageOut(_Out):
    """A request refused before its fields were read (auth, size, nesting, request rate)."""

    detail: str = Field(description="Why.")
    trace_id: str = Field(description="The request's trace id (also in the x-trace-id header).")


def safe_text(s: str, limit: int = MSG_CHARS) -> str:
    """``s`` with lone surrogates escaped (``\\ud800`` as text) and cut to ``limit`` characters."""
    out = s.encode("utf-8", "backslashreplace").decode("utf-8")
    return out if len(out) <= limit else out[: limit - 3] + "..."


def excerpt(value: Any) -> str:
    """A short, bounded, escaped representation of any parsed JSON value (``nan``, ``inf`` for non-finite
    numbers; nested containers summarised)."""
    try:
        text = _repr.repr(value)
    except Exception:  # a value whose repr fails is named by its type
        text = f"<{type(value).__name__}>"
    return safe_text(text, EXCERPT_CHARS)


def render_errors(errors: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """Errors in pydantic's shape (``loc``, ``msg``, ``type``, optional ``input``) -> JSON-safe dicts."""
    out: list[dict[str, Any]] = []
    n = 0
    for e in errors:
        n += 1
        if len(out) >= MAX_ERRORS:
            continue
        item: dict[str, Any] = {
            "loc": [x if isinstance(x, int) else safe_text(str(x), LOC_CHARS) for x in e.get("loc", ())],
            "msg": safe_text(str(e.get("msg", ""))),
            "type": safe_text(str(e.get("type", "value_error")), LOC_CHARS),
        }
        if "input" in e:
            item["input"] = excerpt(e["input"])
        out.append(item)
    if n > MAX_ERRORS:
        out.append({"loc": ["body"], "msg": f"and {n - MAX_ERRORS} more problems", "type": "truncated"})
    return out


def error_response(
    status: int, detail: str | list[dict[str, Any]], trace_id: str, headers: Mapping[str, str] | None = None
) -> Response:
    """A JSON error answer (ASCII, strict JSON: rendering a rendered detail cannot fail)."""
    body = json.dumps(
        {"detail": detail, "trace_id": trace_id}, ensure_ascii=True, allow_nan=False, separators=(",", ":")
    )
    return Response(body, status_code=status, media_type="application/json", headers=headers)


def install_error_handlers(app: FastAPI, trace: Callable[[Request], str]) -> None:
    """Answer schema violations (FastAPI's RequestValidationError) and domain mistakes (:class:`ClientError`)
    with :func:`render_errors`, and the framework's own refusals (a body that is not UTF-8 JSON: 400; an unknown
    path: 404; a method the path lacks: 405, with its ``Allow`` header) in :class:`MessageOut`'s shape."""

    @app.exception_handler(HTTPException)
    async def _http(request: Request, e: HTTPException) -> Response:
        return error_response(e.status_code, safe_text(str(e.detail)), trace(request), e.headers)

    @app.exception_handler(RequestValidationError)
    async def _invalid(request: Request, e: RequestValidationError) -> Response:
        return error_response(422, render_errors(_pydantic(e.errors())), trace(request))

    @app.exception_handler(ClientError)
    async def _client_error(request: Request, e: ClientError) -> Response:
        return error_response(e.status, render_errors(e.detail()), trace(request), e.headers)


def _pydantic(errors: Sequence[Any]) -> Iterable[dict[str, Any]]:
    for e in errors:
        msg = str(e.get("msg", ""))
        yield {**e, "msg": msg.removeprefix("Value error, ")}
