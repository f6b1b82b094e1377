"""A deterministic rubric judge served over the OpenAI chat-completions HTTP API.

The LLM-as-judge layer talks to ``POST /v1/chat/completions`` and reads JSON from
``choices[0].message.content``. By default that endpoint is this service: a FastAPI app run by uvicorn on a free
loopback port (in a thread or a subprocess), whose "model" applies seed 000's rubric deterministically. The code
path is the same as for a real judge (for example a local vLLM server): point ``JudgeConfig.base_url`` at it.

Protocol (also what the system prompt asks a real model to do): the last user message is JSON
``{"episodes": [summary, ...]}`` (see :func:`episode_summary`); the reply content is JSON
``{"scores": [{"episode_id": str, "completion": int, "plan": int, "memory": int}, ...]}`` with scores in 0–5.

``latency_ms`` delays every response (``asyncio.sleep``, no CPU), so that seed 000's 800 ms judge can be
reproduced; it can be changed at run time through ``POST /admin/config``.
"""

from __future__ import annotations

import argparse
import asyncio
import atexit
import json
import os
import socket
import subprocess
import sys
import threading
import time
from typing import Any

import httpx
from fastapi import FastAPI, HTTPException, Request

from agentic_ray.rewards.episode_record import EpisodeRecord

RUBRIC_VERSION = "rubric-v1"
JUDGE_SYSTEM_PROMPT = (
    "You are a strict reviewer of customer-service agent episodes. For every episode in the user's JSON, score "
    "three criteria from 0 to 5: completion (were the goals achieved), plan (were the steps in a valid "
    "dependency order, without redundant calls), memory (did the agent reuse what the user already gave). "
    'Reply with JSON only: {"scores": [{"episode_id": ..., "completion": int, "plan": int, "memory": int}]}, '
    "one entry per episode, in the same order."
)


def episode_summary(record: EpisodeRecord) -> dict[str, Any]:
    """The facts about an episode that the judge sees (JSON-ready)."""
    return {
        "episode_id": record.episode_id,
        "task_family": record.task_family,
        "completed": record.completed,
        "failed": record.failed,
        "truncated": record.truncated,
        "steps": record.num_steps,
        "optimal_steps": record.optimal_steps,
        "skills": [s.skill for s in record.steps],
        "failed_steps": sum(1 for s in record.steps if not s.ok),
        "redundant_steps": sum(1 for s in record.steps if s.redundant),
        "goals": len(record.goals)
        - len(record.goals_void),  # a goal the customer's answer voided is not owed
        "goals_done": len(record.goals_done_order),
        "dag_valid": record.dag_valid,
        "dependency_violations": record.dependency_violations,
        "entities_mentioned": len(set(record.entities_mentioned)),
        "entities_recalled": len(set(record.entities_mentioned) & set(record.entities_recalled)),
    }


def rubric_scores(summary: dict[str, Any]) -> dict[str, Any]:
    """Seed 000's rubric, applied deterministically to one :func:`episode_summary`.

    * completion: 5 if completed; otherwise ``floor(4·goals_done/goals)``, at most 1 after an explicit failure.
    * plan: a valid DAG scores ``5 − min(3, redundant)``; an invalid one ``max(0, 2 − violations)``.
    * memory: ``round(5·recalled/mentioned)`` if entities were mentioned, else ``max(0, 5 − 2·redundant)``.
    """
    goals = max(1, int(summary["goals"]))
    if summary["completed"]:
        completion = 5
    else:
        completion = (4 * int(summary["goals_done"])) // goals
        if summary["failed"]:
            completion = min(completion, 1)
    redundant = int(summary["redundant_steps"])
    violations = int(summary["dependency_violations"])
    if summary["dag_valid"] and violations == 0:
        plan = 5 - min(3, redundant)
    else:
        plan = max(0, 2 - violations)
    mentioned = int(summary["entities_mentioned"])
    if mentioned:
        memory = round(5 * int(summary["entities_recalled"]) / mentioned)
    else:
        memory = max(0, 5 - 2 * redundant)
    return {"episode_id": summary["episode_id"], "completion": completion, "plan": plan, "memory": memory}


def build_app(latency_ms: float = 0.0) -> FastAPI:
    """The FastAPI app of the rubric judge. ``app.state.latency_ms`` delays each response."""
    app = FastAPI(title="agentic-ray rubric judge")
    app.state.latency_ms = float(latency_ms)
    app.state.requests = 0

    @app.get("/health")
    async def health() -> dict[str, Any]:
        return {"ok": True, "latency_ms": app.state.latency_ms, "requests": app.state.requests}

    @app.post("/admin/config")
    async def configure(body: dict[str, Any]) -> dict[str, Any]:
        if "latency_ms" in body:
            app.state.latency_ms = float(body["latency_ms"])
        return {"latency_ms": app.state.latency_ms}

    @app.post("/v1/chat/completions")
    async def chat(request: Request) -> dict[str, Any]:
        body = await request.json()
        app.state.requests += 1
        try:
            user = next(m for m in reversed(body["messages"]) if m["role"] == "user")
            episodes = json.loads(user["content"])["episodes"]
        except (KeyError, StopIteration, ValueError, TypeError) as e:
            raise HTTPException(status_code=400, detail=f"bad judge request: {e}") from e
        if app.state.latency_ms > 0:
            await asyncio.sleep(app.state.latency_ms / 1000.0)
        content = json.dumps({"scores": [rubric_scores(s) for s in episodes]})
        return {
            "id": f"judge-{app.state.requests}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": body.get("model", RUBRIC_VERSION),
            "choices": [
                {"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": "stop"}
            ],
            "usage": {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0},
        }

    return app


def free_port(host: str = "127.0.0.1") -> int:
    """A currently free TCP port on ``host``."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


class JudgeServer:
    """Runs the rubric judge on a free loopback port, in a thread or in a subprocess.

    Args:
        latency_ms: response delay.
        mode: ``"thread"`` (uvicorn in a daemon thread of this process) or ``"subprocess"``.
        host: interface to bind; loopback by default.

    Use ``with JudgeServer(...) as srv: srv.base_url`` or call :meth:`start`/:meth:`stop`.
    """

    def __init__(self, latency_ms: float = 0.0, mode: str = "thread", host: str = "127.0.0.1") -> None:
        if mode not in ("thread", "subprocess"):
            raise ValueError(f"mode must be 'thread' or 'subprocess', got {mode!r}")
        self.latency_ms = float(latency_ms)
        self.mode = mode
        self.host = host
        self.port: int | None = None
        self._server: Any = None
        self._thread: threading.Thread | None = None
        self._proc: subprocess.Popen[bytes] | None = None

    @property
    def base_url(self) -> str:
        """``http://host:port`` (the client appends ``/v1/chat/completions``)."""
        if self.port is None:
            raise RuntimeError("judge server not started")
        return f"http://{self.host}:{self.port}"

    def start(self, timeout_s: float = 30.0) -> JudgeServer:
        """Start serving and wait until ``/health`` answers."""
        import uvicorn

        self.port = free_port(self.host)
        atexit.register(self.stop)  # never leave a judge process behind
        if self.mode == "thread":
            config = uvicorn.Config(
                build_app(self.latency_ms),
                host=self.host,
                port=self.port,
                log_level="warning",
                access_log=False,
            )
            self._server = uvicorn.Server(config)
            self._thread = threading.Thread(target=self._server.run, daemon=True, name="rubric-judge")
            self._thread.start()
        else:
            self._proc = subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "agentic_ray.rewards.judge_service",
                    "--host",
                    self.host,
                    "--port",
                    str(self.port),
                    "--latency-ms",
                    str(self.latency_ms),
                ],
                env={**os.environ, "PYTHONPATH": os.pathsep.join([p for p in sys.path if p])},
            )
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self._proc is not None and self._proc.poll() is not None:
                raise RuntimeError(f"judge subprocess exited with code {self._proc.returncode}")
            try:
                if httpx.get(f"{self.base_url}/health", timeout=1.0).status_code == 200:
                    return self
            except httpx.HTTPError:
                pass
            time.sleep(0.05)
        self.stop()
        raise TimeoutError(f"judge server did not come up on {self.base_url} within {timeout_s}s")

    def set_latency(self, latency_ms: float) -> None:
        """Change the response delay of the running server."""
        httpx.post(
            f"{self.base_url}/admin/config", json={"latency_ms": latency_ms}, timeout=5.0
        ).raise_for_status()
        self.latency_ms = float(latency_ms)

    def stop(self) -> None:
        """Stop the server (idempotent)."""
        if self._server is not None:
            self._server.should_exit = True
            if self._thread is not None:
                self._thread.join(timeout=5.0)
            self._server = self._thread = None
        if self._proc is not None:
            self._proc.terminate()
            try:
                self._proc.wait(timeout=5.0)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait()
            self._proc = None

    def __enter__(self) -> JudgeServer:
        return self.start() if self.port is None else self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def main() -> None:
    """Command line: serve the rubric judge (used by ``JudgeServer(mode="subprocess")``)."""
    import uvicorn

    p = argparse.ArgumentParser(description="agentic-ray rubric judge (OpenAI chat-completions API)")
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--latency-ms", type=float, default=0.0)
    a = p.parse_args()
    uvicorn.run(build_app(a.latency_ms), host=a.host, port=a.port, log_level="warning", access_log=False)


if __name__ == "__main__":
    main()
