"""HTTP guards of the policy service: bearer-token auth, the body-size limit, trace ids and request metrics.

Ray's token auth does not protect the Serve HTTP data plane (measured: requests without credentials got 200),
so the application checks a bearer token itself on every path but the health checks, in constant time
(``hmac.compare_digest``). The token comes from an environment variable or a file, never from the repository.

One pure ASGI middleware does all four jobs, in this order: it assigns the trace id (Serve's request id, which
Serve also puts on every log line of the request and in the ``x-request-id`` response header), answers 401
without a valid token, reads the body up to the limit and answers 413 beyond it, then records the status and
latency of the response.
"""

from __future__ import annotations

import hmac
import json
import os
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from agentic_ray.serving.settings import AuthSettings

__all__ = ["OPEN_PATHS", "GuardMiddleware", "current_trace_id", "load_token"]

OPEN_PATHS = frozenset({"/healthz", "/readyz"})
MIN_TOKEN_CHARS = 16

ASGIApp = Callable[..., Any]


def load_token(auth: AuthSettings) -> str:
    """The service token from ``auth.token_file`` or the ``auth.token_env`` variable.

    Raises:
        ValueError: no token, or one shorter than 16 characters.
    """
    if auth.token_file:
        token = Path(auth.token_file).expanduser().read_text().strip()
        where = auth.token_file
    else:
        token = os.environ.get(auth.token_env, "").strip()
        where = f"${auth.token_env}"
    if len(token) < MIN_TOKEN_CHARS:
        raise ValueError(
            f"no service token in {where} (at least {MIN_TOKEN_CHARS} characters): set it, e.g. "
            f"export {auth.token_env}=$(python -c 'import secrets; print(secrets.token_hex(16))')"
        )
    return token


def current_trace_id() -> str:
    """Serve's id of the request being handled (so logs, responses and feedback share it), else a new one."""
    try:
        from ray.serve.context import _get_serve_request_context

        rid = _get_serve_request_context().request_id
    except Exception:
        rid = ""
    return rid or uuid.uuid4().hex


class GuardMiddleware:
    """See the module docstring.

    Args:
        app: the ASGI app.
        token: returns the service token (read when the replica starts).
        max_body_bytes: returns the body limit.
        on_response: ``(route, status, ms)`` for every response (metrics).
    """

    def __init__(
        self,
        app: ASGIApp,
        token: Callable[[], str],
        max_body_bytes: Callable[[], int],
        on_response: Callable[[str, int, float], None],
    ) -> None:
        self.app = app
        self.token = token
        self.max_body_bytes = max_body_bytes
        self.on_response = on_response

    async def __call__(self, scope: dict[str, Any], receive: Callable, send: Callable) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        t0 = time.perf_counter()
        trace_id = current_trace_id()
        scope.setdefault("state", {})["trace_id"] = trace_id
        path = scope.get("path", "")
        root = scope.get("root_path", "")
        route = path[len(root) :] if root and path.startswith(root) else path
        status = {"code": 500}

        async def send_tracked(message: dict[str, Any]) -> None:
            if message["type"] == "http.response.start":
                status["code"] = message["status"]
                message.setdefault("headers", [])
                message["headers"] = [*message["headers"], (b"x-trace-id", trace_id.encode())]
            await send(message)

        try:
            if route not in OPEN_PATHS and not self._authorized(scope):
                await _reject(send_tracked, 401, "missing or invalid bearer token", trace_id, auth=True)
                return
            body = await self._read_body(scope, receive)
            if body is None:
                await _reject(send_tracked, 413, f"request body over {self.max_body_bytes()} bytes", trace_id)
                return
            await self.app(scope, _replay(body, receive), send_tracked)
        finally:
            self.on_response(_route_label(route), status["code"], (time.perf_counter() - t0) * 1e3)

    def _authorized(self, scope: dict[str, Any]) -> bool:
        for k, v in scope.get("headers", []):
            if k == b"authorization":
                scheme, _, cred = v.partition(b" ")
                return scheme.lower() == b"bearer" and hmac.compare_digest(
                    cred.strip(), self.token().encode()
                )
        return False

    async def _read_body(self, scope: dict[str, Any], receive: Callable) -> bytes | None:
        """The whole body, or None once it passes the limit (checked on Content-Length first)."""
        limit = self.max_body_bytes()
        for k, v in scope.get("headers", []):
            if k == b"content-length" and v.isdigit() and int(v) > limit:
                return None
        chunks, size = [], 0
        while True:
            m = await receive()
            if m["type"] != "http.request":
                break
            chunk = m.get("body", b"")
            size += len(chunk)
            if size > limit:
                return None
            chunks.append(chunk)
            if not m.get("more_body", False):
                break
        return b"".join(chunks)


def _replay(body: bytes, receive: Callable) -> Callable:
    """The buffered body first, then the connection's own messages (a streaming response waits on them for a
    disconnect)."""
    sent = {"done": False}

    async def replay() -> dict[str, Any]:
        if not sent["done"]:
            sent["done"] = True
            return {"type": "http.request", "body": body, "more_body": False}
        return dict(await receive())

    return replay


async def _reject(send: Callable, status: int, msg: str, trace_id: str, auth: bool = False) -> None:
    body = json.dumps({"detail": msg, "trace_id": trace_id}).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    if auth:
        headers.append((b"www-authenticate", b"Bearer"))
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


KNOWN_ROUTES = frozenset(
    {"/healthz", "/readyz", "/v1/act", "/v1/sessions", "/v1/episodes", "/v1/feedback", "/v1/metrics"}
    | {"/docs", "/openapi.json", "/v1/sessions/{id}", "/v1/sessions/{id}/step"}
)


def _route_label(route: str) -> str:
    """A bounded metric label: session ids become ``{id}``, unknown paths ``other``."""
    parts = route.rstrip("/").split("/")
    if len(parts) > 3 and parts[1:3] == ["v1", "sessions"]:
        parts[3] = "{id}"
    label = "/".join(parts) or "/"
    return label if label in KNOWN_ROUTES else "other"
