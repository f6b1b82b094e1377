"""Faults under load on the shared Serve instance (:func:`tests.helpers.serving.build_served`; this module runs
after ``test_serve_policy.py`` and leaves ``main`` as it found it): a policy replica killed at 32 clients, a slow
policy injected through ``user_config``, the gateway replica killed. Each scenario is bounded and stops by
itself; each records what it measured (``record_property``)."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import httpx
import pytest

from agentic_ray.domains import get_domain
from agentic_ray.serving.client import act_body
from agentic_ray.serving.decision_store import read_feedback
from agentic_ray.serving.deploy import app_config, deploy
from agentic_ray.serving.loadgen import LoadResult, closed_loop
from agentic_ray.serving.settings import SLASettings
from tests.helpers.serving import AUTH, Served, shared_served

pytestmark = pytest.mark.integration

DOMAIN = get_domain("ecommerce")
BODIES = [act_body("ecommerce", DOMAIN.make_task(f, 1)[1]) for f in DOMAIN.families[:4]]


@pytest.fixture(scope="module")
def served(request, ray_session, tmp_path_factory):
    yield from shared_served(request, tmp_path_factory)


def _replica(app: str, deployment: str) -> str:
    import ray

    names = [
        a["name"]
        for a in ray.util.list_named_actors(all_namespaces=True)
        if f"SERVE_REPLICA::{app}#{deployment}#" in a["name"]
    ]
    assert len(names) == 1, names
    return names[0]


def _kill(name: str) -> None:
    import ray

    ray.kill(ray.get_actor(name, namespace="serve"), no_restart=True)


def _decided_or_degraded(answers: list[tuple[float, int, Any]]) -> tuple[int, int]:
    """``(decisions by the policy, degraded rule-based answers)``; fails on anything else."""
    decided = degraded = 0
    for _t, status, d in answers:
        assert status == 200, status
        if d["arm"] == "stable" and not d["degraded"]:
            decided += 1
        else:
            assert d["arm"] == "rules" and d["degraded"] and d["degraded_reason"], d
            degraded += 1
    return decided, degraded


def _until_stable(served: Served, timeout_s: float = 60.0) -> None:
    """Single requests until the policy decides again (its breaker probes once a second)."""
    deadline = time.monotonic() + timeout_s
    with served.client() as c:
        while time.monotonic() < deadline:
            if c.post("/v1/act", json=BODIES[0], headers=AUTH).json()["arm"] == "stable":
                return
            time.sleep(0.5)
    pytest.fail("the stable policy did not decide again")


def test_a_policy_replica_killed_under_load_leaves_no_request_unanswered(served, record_property):
    """32 clients on /v1/act; main's stable replica is killed 2 s in. Every request is answered 200, by the policy
    or by the rule-based policy marked degraded; /readyz answers 503 saying the policy is restarting until Serve
    has replaced the replica (bounded: 240 s), and the policy decides again after."""

    async def run() -> tuple[LoadResult, list[tuple[float, int, dict]], float]:
        live, stop = LoadResult(), asyncio.Event()
        load = asyncio.create_task(
            closed_loop(served.url, "/v1/act", BODIES, 32, 300, AUTH, True, stop, into=live)
        )
        await asyncio.sleep(2.0)
        old = await asyncio.to_thread(_replica, "main", "stable")
        t_kill = time.perf_counter()
        await asyncio.to_thread(_kill, old)
        seen: list[tuple[float, int, dict]] = []
        async with httpx.AsyncClient(base_url=served.url, timeout=30) as c:
            while time.perf_counter() - t_kill < 240:
                r = await c.get("/readyz")
                seen.append((time.perf_counter() - t_kill, r.status_code, r.json()))
                if r.status_code == 200 and seen[0][1] == 503:
                    break
                await asyncio.sleep(0.5)
        await asyncio.sleep(1.0)
        stop.set()
        await load
        return live, seen, seen[-1][0]

    live, seen, restart_s = asyncio.run(run())
    decided, degraded = _decided_or_degraded(live.answers)
    record_property("policy_restart_s", round(restart_s, 1))
    record_property("answers", dict(decided=decided, degraded=degraded, rps=round(live.rps, 1)))
    assert live.errors == 0 and degraded > 0 and len(live.answers) > 32
    assert seen[-1][1] == 200 and seen[-1][2]["policies"] == {"stable": "tiny"}, seen[-3:]
    restarting = [p["policies"]["stable"] for _t, code, p in seen if code == 503]
    assert any(x.startswith("restarting: Serve is replacing its replica") for x in restarting), restarting
    _until_stable(served)


def test_a_slow_policy_is_answered_by_rules_within_the_sla(served, record_property):
    """A 500 ms forward injected into main's stable replica through its user_config (no restart), against a 250 ms
    SLA set the same way on the gateway: every answer comes from the rule-based policy, marked degraded, without
    waiting for the slow policy; both switches are then undone."""
    s = served.settings["main"]

    def switch(delay_ms: float, timeout_ms: float) -> None:
        deploy(
            [
                app_config(
                    s,
                    "main",
                    batching=s.stable.batching.model_copy(update={"fault_delay_ms": delay_ms}),
                    sla=SLASettings(policy_timeout_ms=timeout_ms)
                    if timeout_ms != s.sla.policy_timeout_ms
                    else None,
                )
            ],
            None,
            300.0,
            False,
        )
        deadline = time.monotonic() + 120
        with served.client() as c:
            while time.monotonic() < deadline:
                m = c.get("/v1/metrics", headers=AUTH).json()
                if (
                    m["sla"]["policy_timeout_ms"] == timeout_ms
                    and m["batching"]["stable"].get("fault_delay_ms") == delay_ms
                ):
                    return
                time.sleep(0.5)
        pytest.fail(f"user_config not applied: {m['sla']}, {m['batching']}")

    switch(500.0, 250.0)
    try:
        live = asyncio.run(closed_loop(served.url, "/v1/act", BODIES, 4, 5.0, AUTH, True))
    finally:
        switch(0.0, s.sla.policy_timeout_ms)
    decided, degraded = _decided_or_degraded(live.answers)
    reasons = {d["degraded_reason"] for _t, _s, d in live.answers}
    record_property("slow_policy", dict(answers=len(live.answers), p50_ms=live.pct(50), p90_ms=live.pct(90)))
    assert decided == 0 and degraded == len(live.answers) > 4, reasons
    assert "the stable policy did not answer within 250 ms" in reasons
    assert any("breaker open" in r for r in reasons), reasons
    assert live.pct(50) < 500.0, live.pct(50)  # the median answer did not wait for the 500 ms forward
    _until_stable(served)


def test_the_gateway_replica_killed_comes_back_with_its_sessions_and_feedback(served, record_property):
    """main's gateway replica is killed while a client polls it: the restart window (kill to the first 200 from
    the new replica) is measured, and what clients saw during it recorded; the new replica continues a session
    the old one had stepped twice and finds the feedback and decisions stored before (on disk)."""
    s = served.settings["main"]
    family = "cancellation"
    with served.client() as c:
        new = {"domain": "ecommerce", "family": family, "seed": DOMAIN.validation_seeds(family, 1)[0]}
        sid = c.post("/v1/sessions", json=new, headers=AUTH).json()["session_id"]
        steps = [c.post(f"/v1/sessions/{sid}/step", headers=AUTH).json() for _ in range(2)]
        assert [x["t"] for x in steps] == [0, 1] and not steps[-1]["done"], steps
        d = c.post("/v1/act", json=BODIES[1], headers=AUTH).json()
        fb = {"trace_id": d["trace_id"], "outcome": "failure", "reason": "not_solved"}
        assert c.post("/v1/feedback", json=fb, headers=AUTH).status_code == 200
        old = _replica("main", "Gateway")
        t_kill = time.perf_counter()
        _kill(old)
        seen: dict[int, int] = {}
        first_ok = None
        while time.perf_counter() - t_kill < 240:
            try:
                status = c.post("/v1/act", json=BODIES[0], headers=AUTH, timeout=30).status_code
            except httpx.HTTPError:
                status = 0  # no connection or no answer
            seen[status] = seen.get(status, 0) + 1
            if status == 200 and _replica("main", "Gateway") != old:
                first_ok = time.perf_counter() - t_kill
                break
            time.sleep(0.2)
        assert first_ok is not None, seen
        record_property("gateway_restart_s", round(first_ok, 1))
        record_property("seen_during_restart", seen)
        print(f"gateway restart window {first_ok:.1f} s; answers while it restarted: {seen}")
        # the session continues where the old replica left it, to the end of its episode
        step = c.post(f"/v1/sessions/{sid}/step", headers=AUTH)
        assert step.status_code == 200, step.text
        steps.append(step.json())
        while not steps[-1]["done"]:
            steps.append(c.post(f"/v1/sessions/{sid}/step", headers=AUTH).json())
        assert [x["t"] for x in steps] == list(range(len(steps)))
        assert c.get("/v1/metrics", headers=AUTH).json()["sessions_resumed"] == 1
        # the decision taken by the old replica is found by the new one
        r = c.post("/v1/feedback", json={"trace_id": d["trace_id"], "outcome": "success"}, headers=AUTH)
        assert r.status_code == 200, r.text
    rows = [f for f in read_feedback(s.feedback_db) if f.trace_id == d["trace_id"]]
    assert [(f.outcome, f.reason) for f in rows] == [("failure", "not_solved"), ("success", None)]
    assert (
        rows[0].decision["skill"] == d["skill"]
        and rows[0].request["task"]["family"] == BODIES[1]["task"]["family"]
    )
