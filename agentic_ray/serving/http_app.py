"""The FastAPI app of the policy service (OpenAPI at ``/docs`` and ``/openapi.json``).

Routes are thin: they call the :class:`~agentic_ray.serving.service.PolicyService` the gateway replica built.
The app is created by a factory so that unit tests run it on a service with in-process policies, without Ray;
the Serve gateway wraps the same app with ``@serve.ingress``.

Statuses: 401 without a valid bearer token (every path but ``/healthz`` and ``/readyz``), 413 for a body over
the limit, 422 for a schema violation or a request that is wrong for the served domain (naming the fields),
404/409/429 for an unknown, finished or one-too-many session. A client mistake is never a 5xx.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Annotated, Any

from fastapi import Body, FastAPI, Path, Request
from fastapi.responses import JSONResponse, StreamingResponse

from agentic_ray.serving.http_guards import GuardMiddleware
from agentic_ray.serving.request_check import ClientError
from agentic_ray.serving.schemas import (
    ActRequest,
    ActResponse,
    FeedbackIn,
    FeedbackOut,
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
ERRORS: dict[int | str, dict[str, Any]] = {
    401: {"description": "Missing or invalid bearer token."},
    413: {"description": "Body over the size limit."},
    422: {"description": "Schema violation, or wrong for the served domain (fields named in `detail`)."},
}
SESSION_ERRORS: dict[int | str, dict[str, Any]] = {
    **ERRORS,
    404: {"description": "No such session."},
    409: {"description": "The episode has ended."},
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
        token=lambda: service().token,
        max_body_bytes=lambda: service().settings.max_body_bytes,
        on_response=lambda route, status, ms: service().metrics.request(route, status, ms),
    )

    @app.exception_handler(ClientError)
    async def _client_error(request: Request, e: ClientError) -> JSONResponse:
        return JSONResponse({"detail": e.detail(), "trace_id": _trace(request)}, status_code=e.status)

    @app.get("/healthz")
    async def healthz() -> dict[str, bool]:
        """Liveness: the replica answers."""
        return {"ok": True}

    @app.get("/readyz", responses={503: {"description": "Not ready."}})
    async def readyz() -> JSONResponse:
        """Readiness: the policies answer and their observation spaces match the served env."""
        ok, detail = await ready() if ready else (True, {})
        return JSONResponse({"ready": ok, **detail}, status_code=200 if ok else 503)

    @app.post("/v1/act", response_model=ActResponse, responses=ERRORS)
    async def act(body: ActRequest, request: Request) -> dict[str, Any]:
        """Decide the next call from the request and the transcript so far (stateless)."""
        return await service().act(body, _trace(request))

    @app.post("/v1/sessions", response_model=SessionOut, responses={**ERRORS, 429: {"description": "Full."}})
    async def create_session(body: SessionCreate) -> dict[str, Any]:
        """Start an agent-mode episode on a task the server draws."""
        svc = service()
        return svc.session_out(await svc.create_session(body))

    @app.post("/v1/sessions/{session_id}/step", response_model=StepOut, responses=SESSION_ERRORS)
    async def step_session(
        session_id: SessionId, body: Annotated[SessionStepIn | None, Body()] = None
    ) -> dict[str, Any]:
        """Decide and execute one step through the ToolExecutor."""
        return await service().step_session(session_id)

    @app.delete("/v1/sessions/{session_id}", responses=SESSION_ERRORS)
    async def close_session(session_id: SessionId) -> dict[str, bool]:
        """Close a session before its episode ends."""
        service().close_session(session_id)
        return {"closed": True}

    @app.post(
        "/v1/episodes",
        response_class=StreamingResponse,
        responses={
            **ERRORS,
            200: {"content": {"text/event-stream": {}}, "description": "One event per step."},
        },
    )
    async def run_episode(body: SessionCreate) -> StreamingResponse:
        """Run an agent-mode episode to the end, streaming every step as a server-sent event."""
        svc = service()
        s = await svc.create_session(body)

        async def events() -> AsyncIterator[bytes]:
            async for ev in svc.stream_episode(s):
                yield f"event: {ev.pop('event')}\ndata: {json.dumps(ev, default=str)}\n\n".encode()

        return StreamingResponse(events(), media_type="text/event-stream")

    @app.post(
        "/v1/feedback", response_model=FeedbackOut, responses={**ERRORS, 404: {"description": "Unknown."}}
    )
    async def feedback(body: FeedbackIn) -> dict[str, Any]:
        """Store the user's verdict on a decision or an episode."""
        return service().feedback(body)

    @app.put("/v1/strategy", response_model=StrategyOut, responses=ERRORS)
    async def set_strategy(body: StrategyIn) -> dict[str, Any]:
        """Switch between the learned policy and the rule-based fallback now, in this replica (the gateway is one
        replica): the next request is decided the new way. The Serve user_config ``strategy_mode`` is the durable
        setting; a redeploy takes a few hundred milliseconds to reach the replica (the controller rebuilds the
        application to diff it), this endpoint one request."""
        return service().set_strategy(body.strategy_mode, "request")

    @app.get("/v1/metrics", responses={401: ERRORS[401]})
    async def metrics() -> dict[str, Any]:
        """Live TCSR, DVR and completion per arm, latency percentiles, traffic split, canary state, batching."""
        out = service().snapshot()
        if extra_metrics is not None:
            out.update(await extra_metrics())
        return out

    return app


def _trace(request: Request) -> str:
    return str(request.scope.get("state", {}).get("trace_id", ""))
