"""Faults in-process (no Ray): a session resumed by a new gateway on the same store, a slow policy answered by the
rule-based fallback within the SLA (and skipped by its breaker), and a canary candidate slower than the SLA
rolled back instead of promoted."""

from __future__ import annotations

import json
import time

from agentic_ray.domains import get_domain
from agentic_ray.serving.client import act_body
from tests.helpers.serving import AUTH, make_service

DOMAIN = get_domain("ecommerce")


def test_a_session_survives_a_gateway_restart(settings_dict):
    """A new service on the same store (what a restarted gateway replica is) continues an open session where the
    old one left it: the whole episode equals one run without a restart; a closed session stays closed. (The rule-
    based policy decides: the untrained module hands every task off at its first step.)"""
    cfg = {**settings_dict, "strategy_mode": "rules"}
    new_session = {
        "domain": "ecommerce",
        "family": "address_error",
        "seed": DOMAIN.validation_seeds("address_error", 1)[0],
    }
    old, c_old = make_service(cfg)
    sid = c_old.post("/v1/sessions", json=new_session, headers=AUTH).json()["session_id"]
    steps = [c_old.post(f"/v1/sessions/{sid}/step", headers=AUTH).json() for _ in range(2)]
    closed = c_old.post("/v1/sessions", json={"domain": "ecommerce"}, headers=AUTH).json()["session_id"]
    assert c_old.delete(f"/v1/sessions/{closed}", headers=AUTH).status_code == 200
    # the old replica is gone without closing anything (a kill): the new one has only the file
    new, c_new = make_service(cfg)
    assert c_new.get("/v1/metrics", headers=AUTH).json()["sessions_open"] == 1
    while not steps[-1]["done"]:
        r = c_new.post(f"/v1/sessions/{sid}/step", headers=AUTH)
        assert r.status_code == 200, r.text
        steps.append(r.json())
    assert [s["t"] for s in steps] == list(range(len(steps))) and len(steps) > 3
    assert new.sessions.resumed == 1
    assert c_new.post(f"/v1/sessions/{closed}/step", headers=AUTH).status_code == 409
    assert c_new.post(f"/v1/sessions/{sid}/step", headers=AUTH).status_code == 409
    # the same task without a restart
    ref = c_new.post("/v1/episodes", json=new_session, headers=AUTH).text
    ref_steps = [json.loads(b.split("data: ", 1)[1]) for b in ref.strip().split("\n\n")[1:]]
    keys = ("skill", "arguments", "result_code", "reward", "done", "completed", "dag_valid")
    assert [[s[k] for k in keys] for s in steps] == [[s[k] for k in keys] for s in ref_steps]
    assert steps[-1]["completed"]
    old.close()
    new.close()


def test_a_slow_policy_is_answered_by_rules_within_the_sla_then_skipped_until_it_recovers(settings_dict):
    delays = {"stable": 0.5}
    sla = {"policy_timeout_ms": 100, "breaker_min_calls": 3, "breaker_window": 5, "breaker_reset_s": 0.5}
    calls: dict[str, int] = {}
    svc, c = make_service({**settings_dict, "sla": sla}, delay_s=delays, calls=calls)
    _w, task = DOMAIN.make_task("address_error", 3)
    body = act_body("ecommerce", task)
    answers, called = [], []
    for _ in range(6):
        t0 = time.perf_counter()
        d = c.post("/v1/act", json=body, headers=AUTH).json()
        answers.append((time.perf_counter() - t0, d))
        called.append(calls.get("stable", 0))
    for ms, d in answers:
        assert (d["arm"], d["strategy_mode"], d["degraded"]) == ("rules", "learned", True)
        assert d["skill"] == d["fallback_action"]["skill"] and ms < 0.45  # never waited for the slow policy
    reasons = [d["degraded_reason"] for _ms, d in answers]
    assert reasons[:3] == ["the stable policy did not answer within 100 ms"] * 3
    assert all("breaker open" in r for r in reasons[3:]), reasons
    # Skipped: the open breaker answers without calling the policy at all (a call count, not a wall-clock bound,
    # which a loaded box broke).
    assert called == [1, 2, 3, 3, 3, 3], called
    m = c.get("/v1/metrics", headers=AUTH).json()
    assert m["degraded_to_rules"] == 6 and m["breakers"]["stable"] == "open"
    delays["stable"] = 0.0  # it recovers: after breaker_reset_s a probe goes through and closes the breaker
    time.sleep(0.6)
    d = c.post("/v1/act", json=body, headers=AUTH).json()
    assert (d["arm"], d["degraded"], d["degraded_reason"]) == ("stable", False, None)
    assert c.get("/v1/metrics", headers=AUTH).json()["breakers"]["stable"] == "closed"
    svc.close()


def test_the_canary_does_not_promote_a_candidate_slower_than_its_sla(settings_dict, module_dir):
    """The same candidate (stable's own weights) under the same canary settings: promoted when it answers in
    time, rolled back when it takes 500 ms against a 100 ms SLA; no request fails either way."""
    cfg = {
        **settings_dict,
        "candidate": {"checkpoint": str(module_dir), "version": "cand"},
        "canary": {"steps": [0.5, 1.0], "min_calls": 4, "min_episodes": 2, "min_step_s": 0.0},
        "sla": {"policy_timeout_ms": 100},
    }
    fams = DOMAIN.families
    for delay, want in ((0.0, "promoted"), (0.5, "rolled_back")):
        svc, c = make_service(cfg, delay_s={"candidate": delay})
        for i in range(40):
            body = {"domain": "ecommerce", "family": fams[i % len(fams)], "seed": 100 + i}
            assert c.post("/v1/episodes", json=body, headers=AUTH).status_code == 200
            if svc.router.state != "canary":
                break
        assert svc.router.state == want, (delay, svc.router.snapshot())
        if want == "rolled_back":
            assert svc.router.counts["candidate"].errors == 5 and svc.router.counts["candidate"].calls == 0
            assert svc.router.decisions[-1]["reason"] == "5 failed requests to the candidate"
        svc.close()
