"""Serve under hostile input and faults: the policy service on a private local Ray (an untrained module of the tiny
config's size), fuzzed, fed the probe's bad inputs, loaded at 32 clients while its policy replica and then its
gateway replica are killed, slowed, and its quotas and store retention checked.

Prints one JSON line (and records it in benchmarks/results/serve_chaos.json):
  fuzz_cases, fuzz_5xx            hypothesis bodies over every route with a body (mutated valid bodies, hostile JSON:
                                  non-finite numbers, lone surrogates, deep nesting, huge arrays, wrong types)
  bad_inputs, bad_inputs_5xx      the probe's reproducers (tests/helpers/serving.py: bad_inputs);
  bad_inputs_2xx                  ... of which wrongly accepted
  rps_c32, p99_ms_c32             32 clients on /v1/act, no fault (after a 3 s warm-up at 4 clients);
  answers_c32, degraded_c32       ... answers, and those the rule-based policy gave (policy over its SLA)
  rps_c32_kill, p99_ms_c32_kill   the same while the policy replica is killed and Serve replaces it
  replica_kill_errors             answers other than 200 during that (goal 0)
  replica_kill_degraded           answers from the rule-based policy marked degraded (of replica_kill_answers)
  policy_restart_s                kill -> /readyz 200 again; readyz_restarting_seen: it said "restarting" meanwhile
  gateway_restart_s               gateway replica killed -> first 200 from the new one, polled every 0.2 s;
  gateway_kill_seen               {status: count} a client saw meanwhile (0: no connection or no answer)
  session_resumed, feedback_survived   a session stepped twice before the gateway kill continues after it; the
                                  feedback stored before it is read back
  slow_p50_ms, slow_p99_ms        a 500 ms forward injected (user_config) against a 250 ms SLA, 8 clients;
  slow_degraded_share             ... answers from the rule-based policy
  canary_slow_candidate           the canary state reached with a candidate slower than the SLA (rolled_back)
  quota_isolation_ok              one token at its session cap and over its request rate, another still served,
                                  every 429 with Retry-After
  store_rows_before, store_rows_after_retention, store_unconsumed_kept, store_compaction_ms
                                  a store of 20,000 decisions past the retention and 2,000 recent ones, 50 with
                                  unconsumed feedback among the old
  loadavg_1m_start / _end         the machine's load (shared box: compare within one run)
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx
from results_record import publish  # benchmarks/: the script's own folder is on sys.path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # `python benchmarks/serve_chaos.py` from the repository root


def replica(app: str, deployment: str) -> str:
    import ray

    (name,) = [
        a["name"]
        for a in ray.util.list_named_actors(all_namespaces=True)
        if f"SERVE_REPLICA::{app}#{deployment}#" in a["name"]
    ]
    return name


def kill(name: str) -> None:
    import ray

    ray.kill(ray.get_actor(name, namespace="serve"), no_restart=True)


def fuzz(url: str, headers: dict[str, str], examples: int) -> tuple[int, int]:
    """``(cases, 5xx)`` of hypothesis bodies sent to every route with a body."""
    from hypothesis import HealthCheck, given, settings
    from hypothesis import strategies as st

    from tests.helpers.serving import VALID_BODIES, json_value, mutated

    counts = {"cases": 0, "5xx": 0}
    with httpx.Client(base_url=url, headers={**headers, "content-type": "application/json"}, timeout=60) as c:

        def prop(method: str, path: str, valid: dict[str, Any]) -> Any:
            @settings(
                max_examples=examples, deadline=None, suppress_health_check=list(HealthCheck), database=None
            )
            @given(body=st.one_of(mutated(valid), json_value))
            def send(body: Any) -> None:
                r = c.request(method.upper(), path, content=json.dumps(body, allow_nan=True).encode())
                counts["cases"] += 1
                counts["5xx"] += int(r.status_code >= 500)
                if path == "/v1/sessions" and r.status_code == 200:
                    c.delete(f"/v1/sessions/{r.json()['session_id']}")

            return send

        for (method, path), valid in VALID_BODIES.items():
            prop(method, path, valid)()
    return counts["cases"], counts["5xx"]


def bad(url: str, headers: dict[str, str]) -> dict[str, int]:
    from tests.helpers.serving import bad_inputs

    out = {"bad_inputs": 0, "bad_inputs_5xx": 0, "bad_inputs_2xx": 0}
    with httpx.Client(base_url=url, headers={**headers, "content-type": "application/json"}, timeout=60) as c:
        for method, path, raw, _what in bad_inputs():
            status = c.request(method.upper(), path, content=raw).status_code
            out["bad_inputs"] += 1
            out["bad_inputs_5xx"] += int(status >= 500)
            out["bad_inputs_2xx"] += int(status < 300)
    return out


async def load_with_kill(url: str, headers: dict[str, str], bodies: list, phase_s: float) -> dict[str, Any]:
    """32 clients; the policy replica killed 2 s in; until /readyz is 200 again (at most 300 s), then 2 s more."""
    from agentic_ray.serving.loadgen import LoadResult, closed_loop

    live, stop = LoadResult(), asyncio.Event()
    load = asyncio.create_task(closed_loop(url, "/v1/act", bodies, 32, 600, headers, True, stop, into=live))
    await asyncio.sleep(2.0)
    await asyncio.to_thread(kill, await asyncio.to_thread(replica, "chaos", "stable"))
    t_kill = time.perf_counter()
    restarting, ready_at = False, None
    async with httpx.AsyncClient(base_url=url, timeout=30) as c:
        while time.perf_counter() - t_kill < 300:
            r = await c.get("/readyz")
            restarting |= "restarting" in r.text
            if r.status_code == 200 and time.perf_counter() - t_kill > 1.0:
                ready_at = time.perf_counter() - t_kill
                break
            await asyncio.sleep(0.5)
    await asyncio.sleep(max(2.0, phase_s - (time.perf_counter() - t_kill)))
    stop.set()
    await load
    degraded = sum(1 for _t, s, b in live.answers if s == 200 and b and b.get("degraded"))
    return {
        "rps_c32_kill": round(live.rps, 1),
        "p99_ms_c32_kill": round(live.pct(99) or 0, 1),
        "replica_kill_answers": len(live.answers),
        "replica_kill_errors": live.errors,
        "replica_kill_degraded": degraded,
        "policy_restart_s": round(ready_at, 1) if ready_at is not None else None,
        "readyz_restarting_seen": restarting,
    }


def gateway_kill(url: str, headers: dict[str, str], body: dict[str, Any], feedback_db: str) -> dict[str, Any]:
    from agentic_ray.domains import get_domain
    from agentic_ray.serving.decision_store import read_feedback

    family = "cancellation"
    new = {
        "domain": "ecommerce",
        "family": family,
        "seed": get_domain("ecommerce").validation_seeds(family, 1)[0],
    }
    with httpx.Client(base_url=url, headers=headers, timeout=60) as c:
        c.put(
            "/v1/strategy", json={"strategy_mode": "rules"}
        )  # multi-step episodes (the untrained module hands off)
        sid = c.post("/v1/sessions", json=new).json()["session_id"]
        for _ in range(2):
            c.post(f"/v1/sessions/{sid}/step")
        d = c.post("/v1/act", json=body).json()
        c.post("/v1/feedback", json={"trace_id": d["trace_id"], "outcome": "failure", "reason": "other"})
        old = replica("chaos", "Gateway")
        kill(old)
        t_kill, seen, restart = time.perf_counter(), {}, None
        while time.perf_counter() - t_kill < 300:
            try:
                status = c.post("/v1/act", json=body, timeout=30).status_code
            except httpx.HTTPError:
                status = 0
            seen[status] = seen.get(status, 0) + 1
            if status == 200 and replica("chaos", "Gateway") != old:
                restart = time.perf_counter() - t_kill
                break
            time.sleep(0.2)
        step = c.post(f"/v1/sessions/{sid}/step")
        resumed = step.status_code == 200 and step.json()["t"] == 2
    survived = any(f.trace_id == d["trace_id"] for f in read_feedback(feedback_db))
    return {
        "gateway_restart_s": round(restart, 1) if restart is not None else None,
        "gateway_kill_seen": seen,
        "session_resumed": resumed,
        "feedback_survived": survived,
    }


def slow_policy(url: str, headers: dict[str, str], settings: Any, bodies: list) -> dict[str, Any]:
    """A 500 ms forward through the policy deployment's user_config, a 250 ms SLA through the gateway's."""
    from agentic_ray.serving.deploy import app_config, deploy
    from agentic_ray.serving.loadgen import closed_loop
    from agentic_ray.serving.settings import SLASettings

    slow = settings.stable.batching.model_copy(update={"fault_delay_ms": 500.0})
    deploy(
        [app_config(settings, "chaos", batching=slow, sla=SLASettings(policy_timeout_ms=250))],
        None,
        300,
        False,
    )
    with httpx.Client(base_url=url, headers=headers, timeout=60) as c:
        t_end = time.monotonic() + 120
        while time.monotonic() < t_end:
            m = c.get("/v1/metrics").json()
            if m["sla"]["policy_timeout_ms"] == 250 and m["batching"]["stable"].get("fault_delay_ms") == 500:
                break
            time.sleep(0.5)
    live = asyncio.run(closed_loop(url, "/v1/act", bodies, 8, 8.0, headers, True))
    deploy([app_config(settings, "chaos")], None, 300, False)
    degraded = sum(1 for _t, s, b in live.answers if s == 200 and b and b.get("degraded"))
    return {
        "slow_answers": len(live.answers),
        "slow_errors": live.errors,
        "slow_p50_ms": round(live.pct(50) or 0, 1),
        "slow_p99_ms": round(live.pct(99) or 0, 1),
        "slow_degraded_share": round(degraded / max(1, len(live.answers)), 3),
    }


def canary_slow(url: str, headers: dict[str, str]) -> str:
    """Agent-mode episodes into the canary application (its candidate 500 ms slower than the 250 ms SLA) until
    the canary decides (at most 180 s)."""
    from agentic_ray.domains import get_domain

    fams = get_domain("ecommerce").families
    with httpx.Client(base_url=url + "/canary", headers=headers, timeout=120) as c:
        t_end = time.monotonic() + 180
        i = 0
        while time.monotonic() < t_end:
            c.post(
                "/v1/episodes", json={"domain": "ecommerce", "family": fams[i % len(fams)], "seed": 100 + i}
            )
            i += 1
            state = c.get("/v1/metrics").json()["canary"]["state"]
            if state != "canary":
                return str(state)
    return "canary"


def quotas(url: str, tokens: dict[str, str]) -> bool:
    """Alice holds her 2 sessions and sends past her 5 requests a second; Bob is served all along."""
    a = httpx.Client(
        base_url=url + "/quota", headers={"Authorization": f"Bearer {tokens['alice']}"}, timeout=60
    )
    b = httpx.Client(
        base_url=url + "/quota", headers={"Authorization": f"Bearer {tokens['bob']}"}, timeout=60
    )
    new = {"domain": "ecommerce"}
    ok = True
    with a, b:
        statuses = [a.post("/v1/sessions", json=new) for _ in range(3)]
        ok &= [r.status_code for r in statuses] == [200, 200, 429] and "retry-after" in statuses[2].headers
        ok &= b.post("/v1/sessions", json=new).status_code == 200
        flood = [a.get("/v1/metrics") for _ in range(12)]
        refused = [r for r in flood if r.status_code == 429]
        ok &= bool(refused) and all("retry-after" in r.headers for r in refused)
        ok &= b.get("/v1/metrics").status_code == 200
    return bool(ok)


def retention(tmp: Path) -> dict[str, Any]:
    from agentic_ray.serving.decision_store import DecisionStore, read_feedback

    store = DecisionStore(tmp / "retention.sqlite", retention_s=72 * 3600.0, compact_every_s=None)
    old = time.time() - 100 * 3600.0
    rows = [
        (f"old{i}", old, "act", "stable", "v", json.dumps({"pad": "x" * 200}), "{}") for i in range(20_000)
    ]
    rows += [(f"new{i}", time.time(), "act", "stable", "v", "{}", "{}") for i in range(2_000)]
    store._con.executemany("INSERT INTO decisions VALUES (?, ?, ?, ?, ?, ?, ?)", rows)
    store._con.executemany(
        "INSERT INTO feedback (trace_id, created, outcome, reason, comment) VALUES (?, ?, 'failure', 'other', '')",
        [(f"old{i}", old) for i in range(0, 20_000, 400)],
    )
    store._con.commit()
    out = store.compact()
    kept = len(read_feedback(store.path, unconsumed=True))
    store.close()
    return {
        "store_rows_before": len(rows),
        "store_rows_after_retention": out["decisions_left"],
        "store_unconsumed_kept": kept,
        "store_compaction_ms": round(out["ms"], 1),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--phase-s", type=float, default=10.0, help="Seconds of the c32 load without faults.")
    ap.add_argument("--fuzz-examples", type=int, default=60, help="Hypothesis bodies per route.")
    a = ap.parse_args()

    import ray
    from ray import serve

    from agentic_ray.serving.deploy import app_config, deploy
    from agentic_ray.serving.loadgen import closed_loop
    from agentic_ray.serving.settings import ServeSettings
    from agentic_ray.skills.server import free_port
    from tests.helpers.serving import env_config, save_untrained_module, valid_act

    out: dict[str, Any] = {"loadavg_1m_start": os.getloadavg()[0]}
    tmp = Path(tempfile.mkdtemp(prefix="srvchaos_", dir="/tmp"))
    tokens = {name: f"{name}-" + os.urandom(16).hex() for name in ("loader", "alice", "bob")}
    (tmp / "tokens").write_text("".join(f"{k} {v}\n" for k, v in tokens.items()))
    module = str(save_untrained_module(tmp / "module"))
    common = {"env": env_config(), "auth": {"token_file": str(tmp / "tokens")}, "gateway_num_cpus": 0}
    # chaos and canary serve each policy as a deployment of its own (its replica is killed, its batches slowed)
    arm = {"checkpoint": module, "num_cpus": 0, "version": "untrained", "in_gateway": False}
    chaos = ServeSettings.model_validate({**common, "stable": arm, "feedback_db": str(tmp / "chaos.sqlite")})
    quota = ServeSettings.model_validate(
        {
            **common,
            "stable": {**arm, "in_gateway": True},
            "feedback_db": str(tmp / "quota.sqlite"),
            "route_prefix": "/quota",
            "agent": {"max_sessions": 4},
            "quotas": {"sessions_per_client": 2, "requests_per_s": 5.0, "burst": 5},
        }
    )
    canary = ServeSettings.model_validate(
        {
            **common,
            "stable": arm,
            "candidate": {**arm, "version": "slow", "batching": {"fault_delay_ms": 500.0}},
            "canary": {"steps": [0.5, 1.0], "min_calls": 4, "min_episodes": 2, "min_step_s": 0.0},
            "sla": {"policy_timeout_ms": 250.0},
            "feedback_db": str(tmp / "canary.sqlite"),
            "route_prefix": "/canary",
        }
    )
    headers = {"Authorization": f"Bearer {tokens['loader']}"}
    from agentic_ray.domains import get_domain
    from agentic_ray.serving.client import act_body

    dom = get_domain("ecommerce")
    bodies = [act_body("ecommerce", dom.make_task(f, 1)[1]) for f in dom.families[:6]]

    ray.init(num_cpus=2, include_dashboard=False, _temp_dir=str(tmp / "ray"), log_to_driver=False)
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    t0 = time.perf_counter()
    deploy(
        [app_config(chaos, "chaos"), app_config(quota, "quota"), app_config(canary, "canary")],
        http_options={"host": "127.0.0.1", "port": port},
        timeout_s=1200,
    )
    out["deploy_s"] = round(time.perf_counter() - t0, 1)
    try:
        asyncio.run(closed_loop(url, "/v1/act", bodies, 4, 3.0, headers))  # warm-up
        base = asyncio.run(closed_loop(url, "/v1/act", bodies, 32, a.phase_s, headers, True))
        out.update(
            rps_c32=round(base.rps, 1),
            p99_ms_c32=round(base.pct(99) or 0, 1),
            errors_c32=base.errors,
            degraded_c32=sum(1 for _t, s, b in base.answers if s == 200 and b and b.get("degraded")),
            answers_c32=len(base.answers),
        )
        out.update(asyncio.run(load_with_kill(url, headers, bodies, a.phase_s)))
        out["fuzz_cases"], out["fuzz_5xx"] = fuzz(url, headers, a.fuzz_examples)
        out.update(bad(url, headers))
        out["quota_isolation_ok"] = quotas(url, tokens)
        out.update(slow_policy(url, headers, chaos, bodies))
        out["canary_slow_candidate"] = canary_slow(url, headers)
        out.update(gateway_kill(url, headers, valid_act(), chaos.feedback_db))
        out.update(retention(tmp))
    finally:
        print(json.dumps(out), file=sys.stderr)  # what was measured, should a phase fail
        serve.shutdown()
        ray.shutdown()
    out["loadavg_1m_end"] = os.getloadavg()[0]
    publish("serve_chaos", [out], note="shared 2-CPU box: other jobs may run (see the load figures)")


if __name__ == "__main__":
    main()
