"""A real FastAPI service that hosts a domain's simulated tools, with fault-injection knobs.

``agentic-ray skills serve --domain ecommerce --port 8321`` runs it. The same handler functions the in-process
backend calls run here; :class:`~agentic_ray.skills.backends.HttpBackend` speaks to it.

Routes:
    POST   /skills/{name}       {"world_id", "params", "idempotency_key"} → {"ok", "payload", "error_code", "message", "retryable"}
    PUT    /worlds/{world_id}   body: a world as JSON (the domain's ``to_dict``)
    GET    /worlds/{world_id}   the world as JSON
    DELETE /worlds/{world_id}
    GET    /faults, PUT /faults the fault knobs (FaultConfig), changeable at run time
    GET    /health              {"ok": true, "domain", "skills"}

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
from typing import Any

import httpx
from fastapi import FastAPI, HTTPException
from pydantic import BaseModel

from agentic_ray.skills.backends import (
    FaultConfig,
    FaultInjector,
    IdempotencyCache,
    ToolError,
    garble,
    resolve_handler,
)
from agentic_ray.skills.contracts import DomainContracts


class SkillCall(BaseModel):
    world_id: str = "default"
    params: dict[str, Any] = {}
    idempotency_key: str | None = None


def create_app(
    contracts: DomainContracts,
    faults: FaultConfig | None = None,
    world_from_dict: Callable[[dict[str, Any]], Any] | None = None,
    default_world: Any = None,
) -> FastAPI:
    """Build the skill service for one domain."""
    app = FastAPI(title=f"agentic-ray skills: {contracts.domain}")
    by_name = contracts.by_name()
    handlers = {n: resolve_handler(c.handler) for n, c in by_name.items() if c.handler}
    worlds: dict[str, Any] = {} if default_world is None else {"default": default_world}
    state = {"faults": FaultInjector(faults)}
    idempotency = IdempotencyCache()

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

    @app.put("/worlds/{world_id}")
    async def put_world(world_id: str, body: dict[str, Any]) -> dict[str, bool]:
        worlds[world_id] = world_from_dict(body) if world_from_dict else body
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
        return {"ok": True}

    @app.post("/skills/{name}")
    async def call_skill(name: str, call: SkillCall) -> dict[str, Any]:
        if name not in handlers:
            return {
                "ok": False,
                "error_code": "NOT_WHITELISTED",
                "message": f"no skill {name}",
                "retryable": False,
            }
        fault, lat_ms = state["faults"].draw(name)
        if fault == "timeout":
            await asyncio.sleep(by_name[name].sla.timeout_ms / 1000.0 * 1.5)
            return {
                "ok": False,
                "error_code": "TOOL_TIMEOUT",
                "message": "injected timeout",
                "retryable": True,
            }
        if lat_ms:
            await asyncio.sleep(lat_ms / 1000.0)
        if fault == "failure":
            return {
                "ok": False,
                "error_code": "UPSTREAM_ERROR",
                "message": "injected failure",
                "retryable": True,
            }
        try:
            handler, world = handlers[name], worlds.get(call.world_id)
            payload = idempotency.run(
                call.world_id, call.idempotency_key, lambda: handler(world, call.params)
            )
        except ToolError as e:
            return {"ok": False, "error_code": e.code, "message": e.message, "retryable": e.retryable}
        except Exception as e:
            return {
                "ok": False,
                "error_code": "UPSTREAM_ERROR",
                "message": f"{type(e).__name__}: {e}",
                "retryable": False,
            }
        if fault == "garbage":
            payload = garble(payload)
        return {"ok": True, "payload": payload}

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
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


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
