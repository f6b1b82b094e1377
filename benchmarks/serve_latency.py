"""Serve benchmark: the policy service on a private local Ray, under a bounded loopback load (< 60 s of load).

Prints one JSON line:
  handle_p50_ms              /v1/act's decision through a deployment handle (no HTTP), one client
  http_p50_ms_c1, _p99_      POST /v1/act over HTTP, one client
  c1_forward_ms, _cpu_ms     the policy replica's mean forward during that phase (batches of 1): wall time, and
                             its thread's CPU time (the rest is waiting for a core on the shared machine)
  http_rps_c32_batched       32 clients, batches of up to 32 (http_p99_ms_c32_batched: their p99)
  http_rps_c32_unbatched     32 clients, max_batch_size 1 (user_config, same replicas)
  handle_rps_c32_batched     32 concurrent handle calls, batched (is the HTTP proxy the bottleneck?)
  handle_rps_c32_unbatched   the same, max_batch_size 1
  mean_batch_size            mean batch of the policy deployment during the batched HTTP run
  strategy_switch_ms         strategy_mode learned -> rules under 8 clients through PUT /v1/strategy (applied in
                             the gateway replica): from sending that request to the first answer decided by rules
  strategy_back_ms           the same, rules -> learned (to the first answer by the stable policy)
  strategy_switch_ms_user_config  learned -> rules as a Serve user_config redeploy: from the deploy call to the
                             first answer decided by rules
  *_own_deployment           handle_p50_ms, http_p50_ms_c1, http_p99_ms_c1, http_rps_c32_batched,
                             http_rps_c32_unbatched, mean_batch_size of a second application whose stable
                             policy is a deployment of its own (``in_gateway: false``, one Serve hop more than
                             the default, which runs one replica inside the gateway); its c32 phases last half a
                             phase
  access_log                 Serve's access log in the replicas (--access-log; off by default)
  errors                     requests not answered 200, over every phase
  loadavg_1m_start / _end    the machine's load (shared box: compare ratios within one run)

Bodies are /v1/act requests along expert episodes of the validation tasks (transcripts of 0 to 10 calls). The
policy is ``--checkpoint`` (a run directory or module), or an untrained module of the tiny config's size.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

try:  # imported as benchmarks.<name> (tests) or run as a script (benchmarks/ on sys.path)
    from benchmarks.results_record import publish
except ModuleNotFoundError:
    from results_record import publish  # type: ignore[no-redef]

from agentic_ray.envs.agent_task_env import AgentTaskEnv
from agentic_ray.keys import STEP_TRACE
from agentic_ray.serving.client import act_body, transcript_entry
from agentic_ray.serving.loadgen import LoadResult, closed_loop
from agentic_ray.serving.settings import PolicyUserConfig, ServeSettings
from agentic_ray.settings import load_settings

REPO = Path(__file__).resolve().parents[1]


def expert_bodies(env: AgentTaskEnv, episodes: int) -> list[dict[str, Any]]:
    """/v1/act bodies at every step of expert episodes on the validation tasks."""
    out: list[dict[str, Any]] = []
    expert = env.domain.expert()
    env.reset(seed=0)
    for _ in range(episodes):
        transcript: list[dict[str, Any]] = []
        done = False
        while not done:
            out.append(act_body(env.domain.name, env.task, transcript, budget=env.state.budget))
            _o, _r, term, trunc, info = env.step(env.encode_action(*expert.plan(env.view())))
            t = info[STEP_TRACE]
            ok = t["result_code"] == "OK" and not t["fallback_used"]
            payload = env.state.history[-1].payload if ok else {}
            transcript.append(
                transcript_entry(t["skill"], t["args"], t["result_code"], payload, t["fallback_used"])
            )
            done = term or trunc
        env.reset()
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "--checkpoint", default=None, help="Run dir or module dir (default: untrained, tiny size)."
    )
    ap.add_argument("--phase-s", type=float, default=8.0, help="Seconds per load phase (5 phases).")
    ap.add_argument(
        "--batch-wait-ms", type=float, default=None, help="The batch wait (default: the settings' default)."
    )
    ap.add_argument(
        "--gateway-code-thread",
        action="store_true",
        help="The gateway's code on a loop thread of its own (Serve's default; ServeSettings.gateway_code_thread).",
    )
    ap.add_argument(
        "--access-log",
        action="store_true",
        help="Serve's access log in the replicas (ServeSettings.access_log; off by default).",
    )
    a = ap.parse_args()

    import ray
    from ray import serve

    from agentic_ray.serving.deploy import app_config, deploy
    from agentic_ray.skills.server import free_port

    load_start = os.getloadavg()[0]
    tmp = Path(tempfile.mkdtemp(prefix="srvb_", dir="/tmp"))
    token = os.urandom(16).hex()
    (tmp / "token").write_text(token)
    tiny = load_settings(REPO / "configs" / "tiny.yaml")
    checkpoint = a.checkpoint
    if checkpoint is None:
        from agentic_ray.algorithms.build import module_spec

        checkpoint = str(tmp / "module")
        module_spec(tiny).build().save_to_path(checkpoint)
    env_cfg = None if a.checkpoint else tiny.env.model_dump(mode="json")
    arm: dict[str, Any] = {"checkpoint": checkpoint, "num_cpus": 0, "max_ongoing_requests": 64}
    if a.batch_wait_ms is not None:
        arm["batching"] = {"batch_wait_timeout_s": a.batch_wait_ms / 1e3}
    settings = ServeSettings.model_validate(
        {
            "stable": arm,
            "env": env_cfg,
            "auth": {"token_file": str(tmp / "token")},
            "feedback_db": str(tmp / "feedback.sqlite"),
            "gateway_num_cpus": 0,
            "gateway_code_thread": a.gateway_code_thread,
            "access_log": a.access_log,
        }
    )
    # the same policy as a deployment of its own (its own store, route /own)
    settings_own = settings.model_copy(
        update={
            "stable": settings.stable.model_copy(update={"in_gateway": False}),
            "feedback_db": str(tmp / "feedback_own.sqlite"),
            "route_prefix": "/own",
        }
    )
    bodies = expert_bodies(AgentTaskEnv(settings.env_config()), 12)
    headers = {"Authorization": f"Bearer {token}"}

    ray.init(num_cpus=2, include_dashboard=False, _temp_dir=str(tmp / "ray"), log_to_driver=False)
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    deploy(
        [app_config(settings, name="bench"), app_config(settings_own, name="bench_own")],
        http_options={"host": "127.0.0.1", "port": port},
    )
    handle = serve.get_app_handle("bench")
    out: dict[str, Any] = {
        "policy": settings.stable.resolved_version(),
        "bodies": len(bodies),
        "batch_wait_ms": settings.stable.batching.batch_wait_timeout_s * 1e3,
        "gateway_code_thread": settings.gateway_code_thread,
        "access_log": settings.access_log,
    }

    def batching(base: str = url) -> dict[str, float]:
        import httpx

        return httpx.get(f"{base}/v1/metrics", headers=headers, timeout=60).json()["batching"]["stable"]

    async def warm_up(h: Any, base: str) -> int:
        for b in bodies[:20]:  # both paths
            await h.decide.remote(b)
        return (await closed_loop(base, "/v1/act", bodies[:20], 4, 2.0, headers)).errors

    async def handle_p50(h: Any) -> float:
        lat = []
        t_end = time.perf_counter() + a.phase_s / 2
        i = 0
        while time.perf_counter() < t_end:
            t = time.perf_counter()
            await h.decide.remote(bodies[i % len(bodies)])
            lat.append((time.perf_counter() - t) * 1e3)
            i += 1
        return float(np.median(lat))

    async def own_deployment() -> int:
        """The *_own_deployment figures; returns the failed requests."""
        h, base, sfx = serve.get_app_handle("bench_own"), url + "/own", "_own_deployment"
        errors = await warm_up(h, base)
        out["handle_p50_ms" + sfx] = await handle_p50(h)
        r = await closed_loop(base, "/v1/act", bodies, 1, a.phase_s, headers)
        out["http_p50_ms_c1" + sfx], out["http_p99_ms_c1" + sfx] = r.pct(50), r.pct(99)
        before = batching(base)
        r1 = await closed_loop(base, "/v1/act", bodies, 32, a.phase_s / 2, headers)
        after = batching(base)
        n_b, n_i = after["batches"] - before["batches"], after["requests"] - before["requests"]
        out["http_rps_c32_batched" + sfx], out["mean_batch_size" + sfx] = r1.rps, n_i / n_b if n_b else 0.0
        unbatched = PolicyUserConfig(max_batch_size=1)
        await asyncio.to_thread(deploy, [app_config(settings_own, "bench_own", batching=unbatched)])
        await asyncio.sleep(1.0)
        r2 = await closed_loop(base, "/v1/act", bodies, 32, a.phase_s / 2, headers)
        out["http_rps_c32_unbatched" + sfx] = r2.rps
        return errors + r.errors + r1.errors + r2.errors

    async def run() -> None:
        errors = await warm_up(handle, url)
        out["handle_p50_ms"] = await handle_p50(handle)
        before = batching()
        r = await closed_loop(url, "/v1/act", bodies, 1, a.phase_s, headers)
        after = batching()
        errors += r.errors
        n_b = after["batches"] - before["batches"]
        for k in ("forward_ms", "forward_cpu_ms"):  # the policy replica's batch-1 forward during this phase
            total = after[f"mean_{k}"] * after["batches"] - before[f"mean_{k}"] * before["batches"]
            out[f"c1_{k}"] = total / n_b if n_b else None
        out["http_p50_ms_c1"], out["http_p99_ms_c1"] = r.pct(50), r.pct(99)
        before = batching()
        r = await closed_loop(url, "/v1/act", bodies, 32, a.phase_s, headers)
        after = batching()
        errors += r.errors
        out["http_rps_c32_batched"], out["http_p99_ms_c32_batched"] = r.rps, r.pct(99)
        n_b, n_i = after["batches"] - before["batches"], after["requests"] - before["requests"]
        out["mean_batch_size"] = n_i / n_b if n_b else 0.0

        async def handle_load() -> float:
            n, t_end = 0, time.perf_counter() + a.phase_s / 2

            async def one(k: int) -> None:
                nonlocal n
                while time.perf_counter() < t_end:
                    await handle.decide.remote(bodies[(n + k) % len(bodies)])
                    n += 1

            t0 = time.perf_counter()
            await asyncio.gather(*(one(k) for k in range(32)))
            return n / (time.perf_counter() - t0)

        out["handle_rps_c32_batched"] = await handle_load()
        await asyncio.to_thread(
            deploy, [app_config(settings, "bench", batching=PolicyUserConfig(max_batch_size=1))]
        )
        await asyncio.sleep(1.0)
        r = await closed_loop(url, "/v1/act", bodies, 32, a.phase_s, headers)
        errors += r.errors
        out["http_rps_c32_unbatched"] = r.rps
        out["handle_rps_c32_unbatched"] = await handle_load()
        await asyncio.to_thread(deploy, [app_config(settings, "bench")])
        stop, live = asyncio.Event(), LoadResult()
        load = asyncio.create_task(
            closed_loop(url, "/v1/act", bodies, 8, 4 * a.phase_s, headers, True, stop, into=live)
        )

        def first(after: float, arm: str) -> float | None:
            return min(
                (t for t, _s, d in list(live.answers) if t > after and d and d.get("arm") == arm),
                default=None,
            )

        async def took_effect(t0: float, arm: str) -> float | None:
            while first(t0, arm) is None and time.perf_counter() - t0 < 2 * a.phase_s and not load.done():
                await asyncio.sleep(0.01)
            t = first(t0, arm)
            return (t - t0) * 1e3 if t is not None else None

        async def put_strategy(mode: str) -> float | None:
            import httpx

            nonlocal errors
            t0 = time.perf_counter()
            async with httpx.AsyncClient(timeout=60) as c:
                r = await c.put(f"{url}/v1/strategy", json={"strategy_mode": mode}, headers=headers)
            errors += int(r.status_code != 200)
            return await took_effect(t0, "rules" if mode == "rules" else "stable")

        await asyncio.sleep(2.0)
        out["strategy_switch_ms"] = await put_strategy("rules")
        await asyncio.sleep(1.0)
        out["strategy_back_ms"] = await put_strategy("learned")
        await asyncio.sleep(1.0)
        t_switch = time.perf_counter()
        await asyncio.to_thread(
            deploy, [app_config(settings, "bench", strategy_mode="rules")], None, 300.0, False
        )
        out["strategy_switch_ms_user_config"] = await took_effect(t_switch, "rules")
        await asyncio.sleep(1.0)
        stop.set()
        await load
        errors += live.errors
        errors += await own_deployment()
        out["errors"] = errors

    asyncio.run(run())
    out["loadavg_1m_start"], out["loadavg_1m_end"] = load_start, os.getloadavg()[0]
    serve.shutdown()
    ray.shutdown()
    publish("serve_latency", [{k: round(v, 2) if isinstance(v, float) else v for k, v in out.items()}])


if __name__ == "__main__":
    main()
