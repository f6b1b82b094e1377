"""HTTP guards of the policy service: bearer-token auth, per-client request rates, the body-size and nesting
limits, trace ids and request metrics.

Ray's token auth does not protect the Serve HTTP data plane (measured: requests without credentials got 200),
so the application checks a bearer token itself on every path but the health checks, in constant time
(``hmac.compare_digest`` against every known token). The tokens come from an environment variable or a file,
never from the repository; each token is a *client*, whose requests and sessions count against its own quota.

One pure ASGI middleware does it all, in this order: it assigns the trace id (Serve's request id, which Serve also
puts on every log line of the request and in the ``x-request-id`` response header), answers 401 without a valid
token, 429 (with ``Retry-After``) past the client's request rate, reads the body up to the limit and answers 413
beyond it, answers 400 for a JSON body nested deeper than the limit (checked before anything else parses it: deep
nesting broke the response encoder and pydantic's serializer), then records the status and latency of the
response. A request the client cancels (it went away; Serve cancels the handler) is recorded as 499, not 500.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import json
import os
import time
import uuid
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from agentic_ray.serving.errors import error_response
from agentic_ray.serving.quotas import retry_after
from agentic_ray.serving.settings import AuthSettings

__all__ = ["OPEN_PATHS", "GuardMiddleware", "current_trace_id", "json_depth_problem", "load_clients"]

OPEN_PATHS = frozenset({"/healthz", "/readyz"})
MIN_TOKEN_CHARS = 16
CANCELLED = 499
"""Status recorded for a request its client cancelled (nginx's "client closed request")."""
BODY_METHODS = frozenset({"POST", "PUT", "PATCH"})

ASGIApp = Callable[..., Any]


def load_clients(auth: AuthSettings) -> dict[str, str]:
    """The service's clients, ``{token: name}``: every line of ``auth.token_file`` (``TOKEN`` or ``NAME TOKEN``;
    an unnamed token is named by a hash prefix, never by the token), else the one token in ``auth.token_env``
    (client ``default``).

    Raises:
        ValueError: no token, one shorter than 16 characters, or a token or name given twice.
    """
    if auth.token_file:
        lines = Path(auth.token_file).expanduser().read_text().splitlines()
        where = auth.token_file
        pairs = []
        for line in lines:
            parts = line.split("#", 1)[0].split()
            if len(parts) > 2:
                raise ValueError(f"{where}: a line holds `TOKEN` or `NAME TOKEN`, got {len(parts)} words")
            if parts:
                token = parts[-1]
                name = (
                    parts[0]
                    if len(parts) == 2
                    else "client-" + hashlib.sha256(token.encode()).hexdigest()[:8]
                )
                pairs.append((token, name))
    else:
        where = f"${auth.token_env}"
        token = os.environ.get(auth.token_env, "").strip()
        pairs = [(token, "default")] if token else []
    hint = f"e.g. export {auth.token_env}=$(python -c 'import secrets; print(secrets.token_hex(16))')"
    if not pairs:
        raise ValueError(
            f"no service token in {where} (at least {MIN_TOKEN_CHARS} characters): set it, {hint}"
        )
    short = [name for token, name in pairs if len(token) < MIN_TOKEN_CHARS]
    if short:
        raise ValueError(
            f"{where}: the token of {short[0]} is shorter than {MIN_TOKEN_CHARS} characters ({hint})"
        )
    clients = dict(pairs)
    if len(clients) != len(pairs) or len(set(clients.values())) != len(pairs):
        raise ValueError(f"{where}: a token or a client name is given twice")
    return clients


def json_depth_problem(body: bytes, max_depth: int) -> str | None:
    """Why a JSON body is refused before it is parsed for the route (nested deeper than ``max_depth``: the body
    itself is level 1), or None (also when it is not JSON at all: the route's parser answers that).

    The standard parser is used (json.loads, C), then an iterative walk that stops at the first level too deep;
    a body with fewer brackets than the limit is passed without parsing."""
    if body.count(b"[") + body.count(b"{") <= max_depth:
        return None
    try:
        value = json.loads(body)
    except RecursionError:
        return f"JSON nested deeper than {max_depth} levels"
    except ValueError:
        return None
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        v, depth = stack.pop()
        if isinstance(v, dict | list):
            if depth > max_depth:
                return f"JSON nested deeper than {max_depth} levels"
            stack.extend((x, depth + 1) for x in (v.values() if isinstance(v, dict) else v))
    return None


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
        clients: returns ``{token: client name}`` (read when the replica starts).
        max_body_bytes: returns the body limit.
        max_json_depth: returns the nesting limit of JSON bodies.
        admit: ``client -> None`` (admitted) or the seconds it should wait (429).
        on_response: ``(route, status, ms)`` for every response (metrics).
    """

    def __init__(
        self,
        app: ASGIApp,
        clients: Callable[[], Mapping[str, str]],
        max_body_bytes: Callable[[], int],
        max_json_depth: Callable[[], int],
        admit: Callable[[str], float | None],
        on_response: Callable[[str, int, float], None],
    ) -> None:
        self.app = app
        self.clients = clients
        self.max_body_bytes = max_body_bytes
        self.max_json_depth = max_json_depth
        self.admit = admit
        self.on_response = on_response

    async def __call__(self, scope: dict[str, Any], receive: Callable, send: Callable) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        t0 = time.perf_counter()
        trace_id = current_trace_id()
        state = scope.setdefault("state", {})
        state["trace_id"] = trace_id
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

        async def reject(code: int, msg: str, headers: dict[str, str] | None = None) -> None:
            r = error_response(code, msg, trace_id, headers)
            await r(scope, receive, send_tracked)  # type: ignore[arg-type]

        try:
            if route not in OPEN_PATHS:
                client = self._client(scope)
                if client is None:
                    await reject(401, "missing or invalid bearer token", {"WWW-Authenticate": "Bearer"})
                    return
                state["client"] = client
                wait = self.admit(client)
                if wait is not None:
                    await reject(
                        429, "request rate over this client's quota", {"Retry-After": retry_after(wait)}
                    )
                    return
            body = await self._read_body(scope, receive)
            if body is None:
                await reject(413, f"request body over {self.max_body_bytes()} bytes")
                return
            if body and scope.get("method") in BODY_METHODS and _is_json(scope):
                problem = json_depth_problem(body, self.max_json_depth())
                if problem is not None:
                    await reject(400, problem)
                    return
            await self.app(scope, _replay(body, receive), send_tracked)
        except asyncio.CancelledError:
            status["code"] = CANCELLED
            raise
        finally:
            self.on_response(_route_label(route), status["code"], (time.perf_counter() - t0) * 1e3)

    def _client(self, scope: dict[str, Any]) -> str | None:
        """The client whose token the request carries (every known token is compared, in constant time)."""
        for k, v in scope.get("headers", []):
            if k == b"authorization":
                scheme, _, cred = v.partition(b" ")
                if scheme.lower() != b"bearer":
                    return None
                found = None
                for token, name in self.clients().items():
                    if hmac.compare_digest(cred.strip(), token.encode()):
                        found = name
                return found
        return None

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


def _is_json(scope: dict[str, Any]) -> bool:
    """Whether FastAPI would parse the body as JSON (no content type, or ``application/json`` / ``*+json``)."""
    for k, v in scope.get("headers", []):
        if k == b"content-type":
            main = v.split(b";", 1)[0].strip().lower()
            return main == b"application/json" or (
                main.startswith(b"application/") and main.endswith(b"+json")
            )
    return True


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


KNOWN_ROUTES = frozenset(
    {
        "/healthz",
        "/readyz",
        "/v1/act",
        "/v1/sessions",
        "/v1/episodes",
        "/v1/feedback",
        "/v1/metrics",
        "/v1/strategy",
    }
    | {"/docs", "/openapi.json", "/v1/sessions/{id}", "/v1/sessions/{id}/step"}
)


def _route_label(route: str) -> str:
    """A bounded metric label: session ids become ``{id}``, unknown paths ``other``."""
    parts = route.rstrip("/").split("/")
    if len(parts) > 3 and parts[1:3] == ["v1", "sessions"]:
        parts[3] = "{id}"
    label = "/".join(parts) or "/"
    return label if label in KNOWN_ROUTES else "other"
