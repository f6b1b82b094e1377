"""The FastAPI app of the policy service (OpenAPI at ``/docs`` and ``/openapi.json``).

Routes are thin: they call the :class:`~agentic_ray.serving.service.PolicyService` the gateway replica built.
The app is created by a factory so that unit tests run it on a service with in-process policies, without Ray;
the Serve gateway wraps the same app with ``@serve.ingress``.

Statuses, each documented on every route that can return it, with its body's schema: 401 without a valid bearer
token (every path but ``/healthz`` and ``/readyz``), 429 with ``Retry-After`` past the client's request rate or
session quota, 413 for a body over the limit, 400 for JSON nested deeper than the limit (or a body that cannot be
read), 422 for a schema violation or a request that is wrong for the served domain (naming the fields, and the
contract's bound), 404/409 for an unknown or finished session or decision, 503 from ``/readyz`` while a policy
is not ready. A client mistake is never a 5xx (:mod:`agentic_ray.serving.errors` renders any input safely).
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Annotated, Any

from fastapi import Body, FastAPI, Path, Request
from fastapi.responses import JSONResponse, StreamingResponse

from agentic_ray.serving.errors import FieldErrorsOut, MessageOut, install_error_handlers
from agentic_ray.serving.http_guards import OPEN_PATHS, GuardMiddleware
from agentic_ray.serving.schemas import (
    ActRequest,
    ActResponse,
    ClosedOut,
    FeedbackIn,
    FeedbackOut,
    HealthOut,
    ReadyOut,
    SessionCreate,
    SessionOut,
    SessionStepIn,
    StepOut,
    StrategyIn,
    StrategyOut,
)
from agentic_ray.serving.service import PolicyService

__all__ = ["create_app"]

SessionId = Annotated[str, Path(pattern=r"^[0-9a-f]{32}$", description="Session id.")]

Responses = dict[int | str, dict[str, Any]]
RETRY_AFTER = {
    "Retry-After": {"description": "Seconds to wait before retrying.", "schema": {"type": "integer"}}
}
BASE: Responses = {
    413: {"model": MessageOut, "description": "Body over the size limit."},
}
GUARDED: Responses = {
    **BASE,
    401: {"model": MessageOut, "description": "Missing or invalid bearer token."},
    429: {
        "model": MessageOut,
        "description": "The client's request rate is over its quota.",
        "headers": RETRY_AFTER,
    },
}
WITH_BODY: Responses = {
    **GUARDED,
    400: {
        "model": MessageOut,
        "description": "JSON nested deeper than the limit, or a body that cannot be read.",
    },
    422: {
        "model": FieldErrorsOut,
        "description": "Schema violation, or wrong for the served domain's contracts (fields and bounds named in "
        "`detail`).",
    },
}
SESSION_QUOTA: Responses = {
    429: {
        "model": MessageOut | FieldErrorsOut,
        "description": "The client's request rate is over its quota (`detail` a string), or the client or the "
        "service holds as many open sessions as allowed (`detail` a list).",
        "headers": RETRY_AFTER,
    }
}
SESSION: Responses = {
    404: {"model": FieldErrorsOut, "description": "No such session."},
    409: {"model": FieldErrorsOut, "description": "The episode has ended."},
    422: {"model": FieldErrorsOut, "description": "Not a session id."},
}


def create_app(
    service: Callable[[], PolicyService],
    ready: Callable[[], Awaitable[tuple[bool, dict[str, Any]]]] | None = None,
    extra_metrics: Callable[[], Awaitable[dict[str, Any]]] | None = None,
) -> FastAPI:
    """The service's HTTP app.

    Args:
        service: returns the replica's service (built after the app, in the replica's constructor).
        ready: readiness check beyond the service existing (the gateway checks its policy deployments).
        extra_metrics: more ``/v1/metrics`` fields (the policy deployments' batch statistics).
    """
    app = FastAPI(
        title="agentic-ray policy service",
        description="Decisions of a trained tool-using policy: stateless (/v1/act) or agent mode (sessions).",
        version="1",
    )
    app.add_middleware(
        GuardMiddleware,
        clients=lambda: service().clients,
        max_body_bytes=lambda: service().settings.max_body_bytes,
        max_json_depth=lambda: service().settings.max_json_depth,
        admit=lambda client: service().rate.admit(client),
        on_response=lambda route, status, ms: service().metrics.request(route, status, ms),
    )
    install_error_handlers(app, _trace)

    @app.get("/healthz", response_model=HealthOut, responses=BASE)
    async def healthz() -> dict[str, bool]:
        """Liveness: the replica answers."""
        return {"ok": True}

    @app.get(
        "/readyz",
        response_model=ReadyOut,
        responses={**BASE, 503: {"model": ReadyOut, "description": "Not ready (a policy is restarting)."}},
    )
    async def readyz() -> JSONResponse:
        """Readiness: the policies answer and their observation spaces match the served env."""
        ok, detail = await ready() if ready else (True, {})
        return JSONResponse({"ready": ok, **detail}, status_code=200 if ok else 503)

    @app.post("/v1/act", response_model=ActResponse, responses=WITH_BODY)
    async def act(body: ActRequest, request: Request) -> dict[str, Any]:
        """Decide the next call from the request and the transcript so far (stateless)."""
        return await service().act(body, _trace(request))

    @app.post("/v1/sessions", response_model=SessionOut, responses={**WITH_BODY, **SESSION_QUOTA})
    async def create_session(body: SessionCreate, request: Request) -> dict[str, Any]:
        """Start an agent-mode episode on a task the server draws."""
        svc = service()
        return svc.session_out(await svc.create_session(body, _client(request)))

    @app.post("/v1/sessions/{session_id}/step", response_model=StepOut, responses={**WITH_BODY, **SESSION})
    async def step_session(
        session_id: SessionId, request: Request, body: Annotated[SessionStepIn | None, Body()] = None
    ) -> dict[str, Any]:
        """Decide and execute one step through the ToolExecutor (a session is its client's: another token gets
        404)."""
        return await service().step_session(session_id, _client(request))

    @app.delete("/v1/sessions/{session_id}", response_model=ClosedOut, responses={**GUARDED, **SESSION})
    async def close_session(session_id: SessionId, request: Request) -> dict[str, bool]:
        """Close a session before its episode ends."""
        service().close_session(session_id, _client(request))
        return {"closed": True}

    @app.post(
        "/v1/episodes",
        response_class=StreamingResponse,
        responses={
            **WITH_BODY,
            **SESSION_QUOTA,
            200: {
                "content": {"text/event-stream": {"schema": {"type": "string"}}},
                "description": "One event per step (`event: session`, then `event: step` with a StepOut).",
            },
        },
    )
    async def run_episode(body: SessionCreate, request: Request) -> StreamingResponse:
        """Run an agent-mode episode to the end, streaming every step as a server-sent event."""
        svc = service()
        s = await svc.create_session(body, _client(request))

        async def events() -> AsyncIterator[bytes]:
            async for ev in svc.stream_episode(s):
                yield f"event: {ev.pop('event')}\ndata: {json.dumps(ev, default=str)}\n\n".encode()

        return StreamingResponse(events(), media_type="text/event-stream")

    @app.post(
        "/v1/feedback",
        response_model=FeedbackOut,
        responses={
            **WITH_BODY,
            404: {"model": FieldErrorsOut, "description": "No decision with this trace_id."},
        },
    )
    async def feedback(body: FeedbackIn) -> dict[str, Any]:
        """Store the user's verdict on a decision or an episode."""
        return service().feedback(body)

    @app.put("/v1/strategy", response_model=StrategyOut, responses=WITH_BODY)
    async def set_strategy(body: StrategyIn) -> dict[str, Any]:
        """Switch between the learned policy and the rule-based fallback now, in this replica (the gateway is one
        replica): the next request is decided the new way. The Serve user_config ``strategy_mode`` is the durable
        setting; a redeploy takes a few hundred milliseconds to reach the replica (the controller rebuilds the
        application to diff it), this endpoint one request."""
        return service().set_strategy(body.strategy_mode, "request")

    @app.get("/v1/metrics", responses=GUARDED)
    async def metrics() -> dict[str, Any]:
        """Live TCSR, DVR and completion per arm, latency percentiles, traffic split, canary state, batching."""
        out = service().snapshot()
        if extra_metrics is not None:
            out.update(await extra_metrics())
        return out

    _document_bearer_auth(app)
    return app


def _document_bearer_auth(app: FastAPI) -> None:
    """Declare the bearer token in the OpenAPI schema: every operation but the health checks requires it (the
    guard middleware enforces it, so no route has a dependency that would say so)."""
    build = app.openapi

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            schema = build()
            schema.setdefault("components", {})["securitySchemes"] = {
                "bearer": {"type": "http", "scheme": "bearer", "description": "The service token."}
            }
            for path, ops in schema["paths"].items():
                if path not in OPEN_PATHS:
                    for op in ops.values():
                        op["security"] = [{"bearer": []}]
            app.openapi_schema = schema
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]


def _trace(request: Request) -> str:
    return str(request.scope.get("state", {}).get("trace_id", ""))


def _client(request: Request) -> str:
    return str(request.scope.get("state", {}).get("client", "default"))
