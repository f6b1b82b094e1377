"""A real FastAPI service that hosts a domain's simulated tools, with fault-injection knobs.

``agentic-ray skills serve --domain ecommerce --port 8321`` runs it. The same handler functions the in-process
backend calls run here; :class:`~agentic_ray.skills.backends.HttpBackend` speaks to it.

The server is a gateway of its own, not a bare RPC endpoint: a direct call is checked exactly as the in-process
:class:`~agentic_ray.skills.executor.ToolExecutor` checks it, by the same functions. Parameters are validated and
clipped against the contract (:func:`~agentic_ray.skills.param_validation.validate_params`: a wrong type is
``INVALID_INPUT``, an out-of-range number is clipped with a warning), skills off the whitelist are refused, and
business preconditions are checked by :func:`~agentic_ray.skills.preconditions.unmet_precondition` against the
server's own history of real successes per ``(world_id, intent_id)``. At startup every hosted skill's
``requires:`` is checked and every handler imported; a missing one stops the server before it listens.

Routes:
    POST   /skills/{name}          {"world_id", "intent_id", "params", "idempotency_key"}
                                   → {"ok", "payload", "error_code", "message", "retryable", "warnings", "params"}
    PUT    /worlds/{world_id}      body: a world as JSON (the domain's ``to_dict``); 422 names a bad body
    GET    /worlds/{world_id}      the world as JSON
    DELETE /worlds/{world_id}      the world, its faults and its call history
    GET    /worlds/{world_id}/faults, PUT /worlds/{world_id}/faults   one world's fault knobs (FaultConfig)
    GET    /faults, PUT /faults    the fault knobs of every world without its own
    GET    /handoffs?status=open   the human-handoff queue of ``--audit PATH`` (open, resolved or all)
    POST   /handoffs/{id}/resolve  {"resolution": "..."}
    GET    /health                 {"ok": true, "domain", "skills"}

Faults are real here: latency is slept (``asyncio.sleep``) and an injected timeout hangs for 1.5× the contract's
timeout, so the client's own timeout fires.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
from fastapi import FastAPI, HTTPException
from pydantic import BaseModel, ConfigDict, Field

from agentic_ray.skills.backends import (
    FaultConfig,
    FaultInjector,
    IdempotencyCache,
    ToolError,
    garble,
    resolve_handler,
)
from agentic_ray.skills.contracts import DomainContracts
from agentic_ray.skills.handoff_queue import HandoffQueue
from agentic_ray.skills.param_validation import InvalidParams, validate_params
from agentic_ray.skills.preconditions import CallHistory, CallRecord, unmet_precondition
from agentic_ray.skills.requirements import MissingRequirementError, check_requirements


class SkillCall(BaseModel):
    model_config = ConfigDict(extra="forbid")

    world_id: str = Field(default="default", description="The world (episode) the call acts on.")
    intent_id: str = Field(default="", description="Keys the precondition history, with the world id.")
    params: Any = Field(default=None, description="Skill parameters; checked against the contract.")
    idempotency_key: str | None = Field(default=None, description="Attempts sharing it run the handler once.")


class Resolution(BaseModel):
    model_config = ConfigDict(extra="forbid")

    resolution: str = Field(default="", description="What the person did.")


def _fail(code: str, message: str, retryable: bool | None = False, **extra: Any) -> dict[str, Any]:
    return {"ok": False, "error_code": code, "message": message, "retryable": retryable, **extra}


def create_app(
    contracts: DomainContracts,
    faults: FaultConfig | None = None,
    world_from_dict: Callable[[dict[str, Any]], Any] | None = None,
    default_world: Any = None,
    audit_path: str | Path | None = None,
) -> FastAPI:
    """Build the skill service for one domain.

    Args:
        contracts: the skills to host (those with ``allowed: true`` and a handler).
        faults: fault knobs of every world without its own.
        world_from_dict: rebuilds a world from ``PUT /worlds`` JSON (None: worlds stay plain JSON).
        default_world: the world of ``world_id="default"``.
        audit_path: the SQLite audit file whose handoff queue ``/handoffs`` serves (None: no queue).

    Raises:
        MissingRequirementError: a hosted skill's ``requires:`` is not met or its handler cannot be imported.
    """
    by_name = {n: c for n, c in contracts.by_name().items() if c.allowed}
    check_requirements(contracts, by_name)
    handlers, broken = {}, {}
    for n, c in by_name.items():
        if c.handler:
            try:
                handlers[n] = resolve_handler(c.handler)
            except Exception as e:
                broken[n] = [f"handler {c.handler!r} cannot be imported: {type(e).__name__}: {e}"]
    if broken:
        raise MissingRequirementError(contracts.source, broken)
    app = FastAPI(title=f"agentic-ray skills: {contracts.domain}")
    worlds: dict[str, Any] = {} if default_world is None else {"default": default_world}
    state = {"faults": FaultInjector(faults)}
    world_faults: dict[str, FaultInjector] = {}
    idempotency = IdempotencyCache()
    history = CallHistory()
    handoffs = HandoffQueue(audit_path) if audit_path is not None else None

    @app.get("/health")
    async def health() -> dict[str, Any]:
        return {"ok": True, "domain": contracts.domain, "skills": sorted(handlers)}

    @app.get("/faults")
    async def get_faults() -> dict[str, Any]:
        return state["faults"].cfg.model_dump()

    @app.put("/faults")
    async def put_faults(cfg: FaultConfig) -> dict[str, Any]:
        state["faults"] = FaultInjector(cfg)
        return cfg.model_dump()

    @app.get("/worlds/{world_id}/faults")
    async def get_world_faults(world_id: str) -> dict[str, Any]:
        return world_faults.get(world_id, state["faults"]).cfg.model_dump()

    @app.put("/worlds/{world_id}/faults")
    async def put_world_faults(world_id: str, cfg: FaultConfig) -> dict[str, Any]:
        world_faults[world_id] = FaultInjector(cfg)
        return cfg.model_dump()

    @app.put("/worlds/{world_id}")
    async def put_world(world_id: str, body: dict[str, Any]) -> dict[str, bool]:
        try:
            worlds[world_id] = world_from_dict(body) if world_from_dict else body
        except Exception as e:
            raise HTTPException(422, f"bad world body for {world_id}: {type(e).__name__}: {e}") from e
        return {"ok": True}

    @app.get("/worlds/{world_id}")
    async def get_world(world_id: str) -> Any:
        if world_id not in worlds:
            raise HTTPException(404, f"no world {world_id}")
        w = worlds[world_id]
        return w.to_dict() if hasattr(w, "to_dict") else w

    @app.delete("/worlds/{world_id}")
    async def drop_world(world_id: str) -> dict[str, bool]:
        worlds.pop(world_id, None)
        world_faults.pop(world_id, None)
        history.forget_where(lambda k: k[0] == world_id)
        return {"ok": True}

    @app.get("/handoffs")
    async def list_handoffs(status: str = "open") -> list[dict[str, Any]]:
        if handoffs is None:
            raise HTTPException(404, "no handoff queue: start the server with --audit PATH")
        try:
            return [h.to_dict() for h in handoffs.list(None if status == "all" else status)]
        except ValueError as e:
            raise HTTPException(422, str(e)) from e

    @app.post("/handoffs/{handoff_id}/resolve")
    async def resolve_handoff(handoff_id: int, body: Resolution) -> dict[str, bool]:
        if handoffs is None:
            raise HTTPException(404, "no handoff queue: start the server with --audit PATH")
        if not handoffs.resolve(handoff_id, body.resolution):
            raise HTTPException(404, f"no open handoff {handoff_id}")
        return {"ok": True}

    @app.post("/skills/{name}")
    async def call_skill(name: str, call: SkillCall) -> dict[str, Any]:
        c = by_name.get(name)
        if c is None or name not in handlers:
            return _fail("NOT_WHITELISTED", f"{name!r} is not a whitelisted skill")
        try:
            params, warnings = validate_params(c, call.params if call.params is not None else {})
        except InvalidParams as e:
            return _fail("INVALID_INPUT", str(e))
        key = (call.world_id, call.intent_id)
        why = unmet_precondition(c, params, history.get(key), contracts=by_name) if c.preconditions else None
        if why is not None:
            return _fail("PRECONDITION_FAILED", why, warnings=warnings, params=params)
        injector = world_faults.get(call.world_id, state["faults"])
        fault, lat_ms = injector.draw(name)
        if fault == "timeout":
            await asyncio.sleep(c.sla.timeout_ms / 1000.0 * 1.5)
            return _fail("TOOL_TIMEOUT", "injected timeout", retryable=True)
        if lat_ms:
            await asyncio.sleep(lat_ms / 1000.0)
        if fault == "failure":
            err = injector.failure(name)
            return _fail(err.code, err.message, err.retryable)
        try:
            handler, world = handlers[name], worlds.get(call.world_id)
            payload = idempotency.run(call.world_id, call.idempotency_key, lambda: handler(world, params))
        except ToolError as e:
            return _fail(e.code, e.message, e.retryable, warnings=warnings, params=params)
        except Exception as e:
            return _fail("UPSTREAM_ERROR", f"{type(e).__name__}: {e}")
        history.record(key, CallRecord(name, params, payload))  # the handler ran: its effect is real
        if fault == "garbage":
            payload = garble(payload)
        return {"ok": True, "payload": payload, "warnings": warnings, "params": params}

    return app


def stop_process_group(proc: subprocess.Popen[Any], timeout_s: float) -> None:
    """SIGTERM a process started with ``start_new_session=True`` and its group; SIGKILL after ``timeout_s``."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


def free_port() -> int:
    """A free TCP port on loopback."""
    return free_ports(1)[0]


def free_ports(n: int) -> list[int]:
    """``n`` distinct free TCP ports on loopback.

    All ``n`` sockets stay bound until every port is chosen: calling :func:`free_port` ``n`` times can hand out the
    same port twice (the kernel reuses a just-closed ephemeral port), which made ``ray start`` refuse to start in CI
    ("runtime_env_agent is trying to use a port number 60389 that is used by other components").
    """
    with contextlib.ExitStack() as stack:
        ports = []
        for _ in range(n):
            s = stack.enter_context(socket.socket())
            s.bind(("127.0.0.1", 0))
            ports.append(int(s.getsockname()[1]))
        return ports


@contextlib.contextmanager
def skill_server_process(
    args: list[str], port: int | None = None, startup_timeout_s: float = 60.0, cwd: str | None = None
) -> Iterator[str]:
    """Start ``agentic-ray skills serve`` in a subprocess on a free loopback port; yield its base URL.

    Args:
        args: arguments after ``skills serve`` (e.g. ``["--domain", "ecommerce"]``).
    The process is ended by PID (its own process group) on exit.
    """
    port = port or free_port()
    cmd = [sys.executable, "-m", "agentic_ray.cli", "skills", "serve", *args, "--port", str(port)]
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([cwd or os.getcwd(), os.environ.get("PYTHONPATH", "")]),
    }
    proc = subprocess.Popen(
        cmd, cwd=cwd, env=env, start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + startup_timeout_s
        while True:
            if proc.poll() is not None:
                err = proc.stderr.read().decode() if proc.stderr else ""
                raise RuntimeError(f"skill server exited with {proc.returncode}: {err[-2000:]}")
            try:
                if httpx.get(f"{url}/health", timeout=1.0).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline:
                raise TimeoutError(f"skill server did not start within {startup_timeout_s}s")
            time.sleep(0.2)
        yield url
    finally:
        stop_process_group(proc, timeout_s=10)
