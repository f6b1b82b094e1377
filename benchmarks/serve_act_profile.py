"""Where one ``/v1/act`` decision spends its time in-process (no Serve, no HTTP): medians per phase.

Prints one JSON line of medians (ms) over ``--reps`` passes over the serve benchmark's bodies
(:func:`serve_latency.expert_bodies`: expert episodes on the validation tasks, transcripts of 0 to 10 calls):
  validate_ms           ActRequest.model_validate (pydantic)
  check_ms              check_act_request (the request against the domain's contracts)
  replay_ms             TranscriptState: the transcript's calls replayed into the env state
  observation_ms        the observation and masks of that state (the env's builder)
  view_ms               the episode view (the rule-based policy's input)
  forward_ms            PolicyRunner.act on one observation (the model's batch-1 forward)
  learned_ms            the response fields: decode, contract check, alternatives, the rule-based fallback
  report_transcript_ms  canary outcomes of the transcript's calls
  store_ms              the decision queued for the SQLite store (JSON encoding; the write is off the request path)
  service_act_ms        PolicyService.act end to end (all of the above but validate), policy called in-process
The untrained module of the tiny config's size, as ``serve_latency.py`` serves by default.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # `python benchmarks/...` from the repo root

try:  # imported as benchmarks.<name> (tests) or run as a script (benchmarks/ on sys.path)
    from benchmarks.results_record import publish
except ModuleNotFoundError:
    from results_record import publish  # type: ignore[no-redef]

from agentic_ray.algorithms.build import module_spec
from agentic_ray.envs.agent_task_env import AgentTaskEnv
from agentic_ray.envs.transcript import TranscriptState
from agentic_ray.serving.policy_runner import PolicyRunner
from agentic_ray.serving.request_check import check_act_request
from agentic_ray.serving.schemas import ActRequest
from agentic_ray.serving.service import PolicyService
from agentic_ray.serving.settings import ServeSettings
from agentic_ray.settings import load_settings
from benchmarks.serve_latency import REPO, expert_bodies


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=3, help="Passes over the bodies.")
    a = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="actp_", dir="/tmp"))
    os.environ.setdefault("AGENTIC_RAY_SERVE_TOKEN", os.urandom(16).hex())
    tiny = load_settings(REPO / "configs" / "tiny.yaml")
    module_spec(tiny).build().save_to_path(str(tmp / "module"))
    s = ServeSettings.model_validate(
        {
            "stable": {"checkpoint": str(tmp / "module")},
            "env": tiny.env.model_dump(mode="json"),
            "feedback_db": str(tmp / "feedback.sqlite"),
        }
    )
    bodies = expert_bodies(AgentTaskEnv(s.env_config()), 12)
    runner = PolicyRunner(s.stable.checkpoint)

    async def call(_arm: str, obs: dict[str, Any]) -> dict[str, Any]:
        return runner.act([obs])[0]

    svc = PolicyService(s, call, {"stable": "untrained"}, pool_size=1)
    ms: dict[str, list[float]] = defaultdict(list)

    def timed(name: str, fn: Any, *args: Any) -> Any:
        t = time.perf_counter()
        r = fn(*args)
        ms[name].append((time.perf_counter() - t) * 1e3)
        return r

    def replay(env: AgentTaskEnv, cr: Any) -> TranscriptState:
        st = TranscriptState(env, cr.task, [], budget=cr.budget)
        for c in cr.transcript:
            st.add(c)
        return st

    async def run() -> None:
        for _ in range(a.reps):
            for i, b in enumerate(bodies):
                req = timed("validate", ActRequest.model_validate, b)
                with svc.pool.lease() as env:
                    cr = timed("check", check_act_request, req, env)
                    st = timed("replay", replay, env, cr)
                    _obs, masks = timed("observation", st.observation, cr.sla)
                    timed("view", st.view, masks)
                    p = svc.builder.prepare(req, env)
                    out = timed("forward", runner.act, [p.obs])[0]
                    f = timed("learned", svc.builder.learned, p, out["action"], out["skill_probs"])
                timed("report_transcript", svc._report_transcript, req, "profile")
                timed(
                    "store",
                    svc.store.add_decision,
                    f"p{i}",
                    "act",
                    "stable",
                    "u",
                    req.model_dump(mode="json"),
                    f,
                )
                t = time.perf_counter()
                await svc.act(req, f"t{i}")
                ms["service_act"].append((time.perf_counter() - t) * 1e3)

    asyncio.run(run())
    svc.close()
    publish(
        "serve_act_profile",
        [{"calls": len(ms["validate"]), **{f"{k}_ms": round(float(np.median(v)), 3) for k, v in ms.items()}}],
    )


if __name__ == "__main__":
    main()
