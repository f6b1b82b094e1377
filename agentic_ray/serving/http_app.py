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

from agentic_ray.serving.client import act_body
from agentic_ray.serving.errors import FieldErrorsOut, MessageOut, install_error_handlers
from agentic_ray.serving.http_guards import OPEN_PATHS, GuardMiddleware
from agentic_ray.serving.request_check import INVALID_SKILL
from agentic_ray.serving.schemas import (
    ActRequest,
    ActResponse,
    ClarifyResponse,
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

    @app.post("/v1/act", response_model=ActResponse | ClarifyResponse, responses=WITH_BODY)
    async def act(body: ActRequest, request: Request) -> dict[str, Any]:
        """Decide the next call from the request and the transcript so far (stateless). A request with the
        customer's words and no goals is read by the domain's goal parser; when the parse is unsure or lacks a
        slot or the identity, the answer is a `clarify` (`kind: clarify`) naming what to ask."""
        return await service().act(body, _trace(request))

    @app.post(
        "/v1/sessions", response_model=SessionOut | ClarifyResponse, responses={**WITH_BODY, **SESSION_QUOTA}
    )
    async def create_session(body: SessionCreate, request: Request) -> dict[str, Any]:
        """Start an agent-mode episode on a task the server draws, or on the customer's words (`text`); a text
        the parser is unsure of, or that lacks a slot or the identity, starts none and gets a `clarify`."""
        svc = service()
        s = await svc.create_session(body, _client(request))
        return s if isinstance(s, dict) else svc.session_out(s)

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
                "content": {"text/event-stream": {"schema": SSE_EVENT}},
                "description": "Server-sent events: `event: session` (its data a SessionOut), then one `event: step` "
                "per step (a StepOut), the last one with `done: true`; or, for a `text` the parser cannot act on, "
                "one `event: clarify` (a ClarifyResponse) and no episode.",
            },
        },
    )
    async def run_episode(body: SessionCreate, request: Request) -> StreamingResponse:
        """Run an agent-mode episode to the end, streaming every step as a server-sent event."""
        svc = service()
        s = await svc.create_session(body, _client(request))

        async def events() -> AsyncIterator[bytes]:
            stream = _one({"event": "clarify", **s}) if isinstance(s, dict) else svc.stream_episode(s)
            async for ev in stream:
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

    _complete_openapi(app, service)
    return app


SSE_EVENT = {
    "type": "object",
    "description": "One server-sent event.",
    "oneOf": [
        {
            "properties": {
                "event": {"const": event},
                "data": {
                    "type": "string",
                    "contentMediaType": "application/json",
                    "contentSchema": {"$ref": f"#/components/schemas/{model}"},
                },
            },
            "required": ["event", "data"],
        }
        for event, model in (("session", "SessionOut"), ("step", "StepOut"), ("clarify", "ClarifyResponse"))
    ],
}
"""The schema of each event of ``POST /v1/episodes``."""

LINKS = {
    ("/v1/sessions", "post"): {
        "StepSession": (
            ("/v1/sessions/{session_id}/step", "post"),
            {"parameters": {"session_id": "$response.body#/session_id"}},
        ),
        "CloseSession": (
            ("/v1/sessions/{session_id}", "delete"),
            {"parameters": {"session_id": "$response.body#/session_id"}},
        ),
    },
    ("/v1/act", "post"): {
        "Feedback": (
            ("/v1/feedback", "post"),
            {"requestBody": {"trace_id": "$response.body#/trace_id", "outcome": "success"}},
        )
    },
}
"""OpenAPI links: where a response's fields are another operation's input (clients and fuzzers follow them)."""


def _complete_openapi(app: FastAPI, service: Callable[[], PolicyService]) -> None:
    """Declare what the routes cannot say themselves: the bearer token (the guard middleware enforces it on every
    operation but the health checks, so no route has a dependency that would declare it), the links between
    operations, and what the served domain allows (:func:`_served_domain`)."""
    build = app.openapi

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            schema = build()
            schema.setdefault("components", {})["securitySchemes"] = {
                "bearer": {"type": "http", "scheme": "bearer", "description": "The service token."}
            }
            paths = schema["paths"]
            for path, ops in paths.items():
                if path not in OPEN_PATHS:
                    for op in ops.values():
                        op["security"] = [{"bearer": []}]
            for (path, method), links in LINKS.items():
                paths[path][method]["responses"]["200"]["links"] = {
                    name: {"operationId": paths[to][to_method]["operationId"], **how}
                    for name, ((to, to_method), how) in links.items()
                }
            _served_domain(schema["components"]["schemas"], service())
            app.openapi_schema = schema
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]


def _served_domain(schemas: dict[str, Any], svc: PolicyService) -> None:
    """The request schemas narrowed to the served domain (its name, task families, skills), with an example of
    each body: one validation task of the domain, as :func:`~agentic_ray.serving.client.act_body` writes it."""
    skills = list(svc.builder.skills)
    families = list(svc.sessions.families)
    domain = {"type": "string", "enum": [svc.domain], "title": "Domain", "description": "The served domain."}
    for name in ("ActRequest", "SessionCreate"):
        schemas[name]["properties"]["domain"] = domain
    schemas["SessionCreate"]["properties"]["family"]["anyOf"][0] = {"type": "string", "enum": families}
    schemas["GoalIn"]["properties"]["skill"] = {"type": "string", "enum": skills, "title": "Skill"}
    schemas["TranscriptCallIn"]["properties"]["skill"] = {
        "type": "string",
        "enum": [*skills, INVALID_SKILL],
        "title": "Skill",
        "description": f"Skill called ({INVALID_SKILL}: an action that decoded to no skill).",
    }
    schemas["ActRequest"]["properties"]["tool_stats"]["propertyNames"] = {"enum": skills}
    family = families[0]
    seed = svc.pool.template.domain.validation_seeds(family, 1)[0]
    _world, task = svc.pool.template.domain.make_task(family, seed)
    schemas["ActRequest"]["examples"] = [act_body(svc.domain, task)]
    schemas["SessionCreate"]["examples"] = [{"domain": svc.domain, "family": family, "seed": seed}]


async def _one(event: dict[str, Any]) -> AsyncIterator[dict[str, Any]]:
    yield event


def _trace(request: Request) -> str:
    return str(request.scope.get("state", {}).get("trace_id", ""))


def _client(request: Request) -> str:
    return str(request.scope.get("state", {}).get("client", "default"))
