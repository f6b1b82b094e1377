"""The policy service's HTTP app on in-process policies (no Ray): status codes, the shared observation builder,
the rule-based switch, agent mode through the executor, feedback, and canary fallbacks."""

from __future__ import annotations

import json

import numpy as np
import pytest
from fastapi.testclient import TestClient

from agentic_ray.domains import get_domain
from agentic_ray.envs.agent_task_env import AgentTaskEnv
from agentic_ray.eval.evaluator import ModulePolicy, rollout
from agentic_ray.eval.policy_loading import load_policy_module
from agentic_ray.keys import STEP_TRACE
from agentic_ray.serving.client import act_body, tool_stats_body, transcript_entry
from agentic_ray.serving.decision_store import read_feedback
from agentic_ray.serving.schemas import ActRequest
from agentic_ray.serving.service import PolicyService, served_env_config
from agentic_ray.skills.param_validation import validate_params
from tests.helpers.serving import AUTH, make_service

DOMAIN = get_domain("ecommerce")


def make(settings: dict, fail: set[str] = frozenset()) -> tuple[PolicyService, TestClient]:
    return make_service(settings, fail)


@pytest.fixture
def app(settings_dict):
    svc, client = make(settings_dict)
    yield svc, client
    svc.close()


def body_for(family: str = "address_error", seed: int = 3, **kw) -> dict:
    _w, task = DOMAIN.make_task(family, seed)
    return act_body("ecommerce", task, **kw)


def test_act_returns_a_contract_valid_decision(app):
    svc, c = app
    r = c.post("/v1/act", json=body_for(), headers=AUTH)
    assert r.status_code == 200, r.text
    d = r.json()
    assert d["trace_id"] == r.headers["x-trace-id"] and d["model_version"] == "untrained-0"
    assert d["arm"] == "stable" and d["strategy_mode"] == "learned"
    contract = svc.builder.contracts[d["skill"]]
    assert validate_params(contract, d["arguments"])[0] == d["arguments"]
    probs = [a["probability"] for a in d["alternatives"]]
    assert probs == sorted(probs, reverse=True) and 0 < probs[0] <= 1 and len(probs) <= 3
    assert d["confidence"] == probs[0] and d["alternatives"][0]["skill"] == d["skill"]  # greedy
    assert d["mask_reasons"]["order.list"] == ["hard: no known user for user_id"]
    assert d["fallback_action"] == {
        "skill": "lookup_customer_by_name",
        "arguments": {"name": "Li Wei", "zip": "361001"},
    }
    assert (d["step"], d["budget"]) == (0, 10)


def test_auth_on_every_endpoint_but_health(app):
    _svc, c = app
    for path in ("/healthz", "/readyz"):
        assert c.get(path).status_code == 200
    for method, path in (("post", "/v1/act"), ("get", "/v1/metrics"), ("get", "/openapi.json")):
        r = getattr(c, method)(path)
        assert r.status_code == 401 and r.headers["www-authenticate"] == "Bearer"
        assert getattr(c, method)(path, headers={"Authorization": "Bearer wrong"}).status_code == 401
        assert (
            getattr(c, method)(
                path, headers={"Authorization": "Basic " + AUTH["Authorization"][7:]}
            ).status_code
            == 401
        )
    assert c.get("/openapi.json", headers=AUTH).status_code == 200


def test_client_mistakes_are_422_naming_the_field(app):
    _svc, c = app
    ok = body_for()

    def loc(body: dict) -> list:
        r = c.post("/v1/act", json=body, headers=AUTH)
        assert r.status_code == 422, r.text
        return [e["loc"] for e in r.json()["detail"]]

    assert ["body", "domain"] in loc({k: v for k, v in ok.items() if k != "domain"})
    assert loc({**ok, "domain": "helpdesk"}) == [["body", "domain"]]
    assert ["body", "colour"] in loc({**ok, "colour": 1})
    t = json.loads(json.dumps(ok["task"]))
    t["goals"][0]["skill"] = "rm.rf"
    t["goals"][1]["args"]["source"] = "the moon"
    t["goals"][2]["deps"] = ["nope"]
    assert loc({**ok, "task": t}) == [
        ["body", "task", "goals", 0, "skill"],
        ["body", "task", "goals", 1, "args", "source"],
        ["body", "task", "goals", 2, "deps", 0],
    ]
    t = json.loads(json.dumps(ok["task"]))
    t["goals"][0]["deps"] = ["sms"]  # sms depends on erp -> address -> verify: a cycle
    assert loc({**ok, "task": t}) == [["body", "task", "goals"]]
    bad_call = transcript_entry("user.find", {"email": 5})
    assert loc({**ok, "transcript": [bad_call]}) == [["body", "transcript", 0, "params", "email"]]
    garbled = transcript_entry("user.find", {"email": "a@b.c"}, payload={"user_id": 7})
    assert loc({**ok, "transcript": [garbled]}) == [["body", "transcript", 0, "payload"]]
    r = c.post("/v1/act", json={"domain": "ecommerce", "task": {"request": {"text": " "}}}, headers=AUTH)
    assert (
        r.status_code == 422 and "goal parser" in r.text
    )  # neither goals nor words (text: test_text_requests)
    # a rejected call's arguments are whatever was sent; they replay without a 422
    rejected = transcript_entry("user.find", {"email": 5}, result_code="INVALID_INPUT")
    assert c.post("/v1/act", json={**ok, "transcript": [rejected]}, headers=AUTH).status_code == 200


def test_oversized_bodies_get_413(settings_dict):
    svc, c = make({**settings_dict, "max_body_bytes": 4096})
    big = body_for()
    big["task"]["request"]["text"] = "x" * 3000
    big["task"]["extra"] = {"pad": "y" * 3000}
    assert c.post("/v1/act", json=big, headers=AUTH).status_code == 413
    payload = json.dumps(big).encode()

    def chunks():
        yield payload[:2000]
        yield payload[2000:]

    assert (
        c.post("/v1/act", content=chunks(), headers={**AUTH, "content-type": "application/json"}).status_code
        == 413
    )
    assert c.post("/v1/act", json=body_for(), headers=AUTH).status_code == 200
    svc.close()


def test_act_rebuilds_the_envs_observation_and_decides_as_training_code(app, module_dir):
    """At every step of expert-driven validation episodes (diverse states), the service's replayed observation
    equals the live env's, and its decision equals ModulePolicy's on the live env, decoded by the env."""
    svc, c = app
    env = AgentTaskEnv(served_env_config(svc.settings))
    policy = ModulePolicy(load_policy_module(module_dir))
    expert = env.domain.expert()
    obs, _ = env.reset(seed=11)
    steps, decided = 0, set()
    for _ in range(4):
        transcript: list[dict] = []
        done = False
        while not done:
            body = act_body(
                "ecommerce",
                env.task,
                transcript,
                budget=env.state.budget,
                tool_stats=tool_stats_body(env._sla(None), env.skills),
            )
            with svc.pool.lease() as replay_env:
                p = svc.builder.prepare(ActRequest.model_validate(body), replay_env)
                for k in obs:
                    np.testing.assert_array_equal(p.obs[k], obs[k], err_msg=k)
            d = c.post("/v1/act", json=body, headers=AUTH).json()
            (action,), _ = policy.act_batch([obs], [env])
            k, params, err, _msg, _ = env.decode_action(action)
            assert d["skill"] == env.skills[k]
            decided.add(d["skill"])
            assert d["arguments"] == (
                validate_params(env.by_name[d["skill"]], params)[0] if err is None else params
            )
            assert d["valid"] == (err is None and bool(env.current_masks.skill_mask[k]))
            s, prm = expert.plan(env.view())
            obs, _r, term, trunc, info = env.step(env.encode_action(s, prm))
            t = info[STEP_TRACE]
            payload = (
                env.state.history[-1].payload if t["result_code"] == "OK" and not t["fallback_used"] else {}
            )
            transcript.append(
                transcript_entry(t["skill"], t["args"], t["result_code"], payload, t["fallback_used"])
            )
            done = term or trunc
            steps += 1
        obs, _ = env.reset()
    assert steps >= 15 and len(decided) >= 2


def test_rules_mode_answers_with_the_domains_expert(app):
    svc, c = app
    svc.set_strategy("rules")
    d = c.post("/v1/act", json=body_for(), headers=AUTH).json()
    assert (d["arm"], d["model_version"], d["strategy_mode"], d["confidence"]) == (
        "rules",
        "rules",
        "rules",
        1.0,
    )
    assert {"skill": d["skill"], "arguments": d["arguments"]} == d["fallback_action"]
    assert d["skill"] == "lookup_customer_by_name" and d["valid"]
    step = c.post(
        "/v1/sessions/"
        + c.post("/v1/sessions", json={"domain": "ecommerce"}, headers=AUTH).json()["session_id"]
        + "/step",
        headers=AUTH,
    ).json()
    assert step["arm"] == "rules" and step["result_code"] == "OK"


def test_the_strategy_endpoint_switches_the_next_request(app):
    svc, c = app
    assert c.put("/v1/strategy", json={"strategy_mode": "rules"}).status_code == 401
    assert c.put("/v1/strategy", json={"strategy_mode": "random"}, headers=AUTH).status_code == 422
    r = c.put("/v1/strategy", json={"strategy_mode": "rules"}, headers=AUTH)
    assert r.json() == {"strategy_mode": "rules", "previous": "learned", "source": "request"}
    assert c.post("/v1/act", json=body_for(), headers=AUTH).json()["arm"] == "rules"
    m = c.get("/v1/metrics", headers=AUTH).json()
    assert (m["strategy_mode"], m["strategy_source"], m["traffic_split"]) == (
        "rules",
        "request",
        {"rules": 1.0},
    )
    svc.set_strategy("learned")  # what the gateway's reconfigure does with a user_config
    assert c.post("/v1/act", json=body_for(), headers=AUTH).json()["arm"] == "stable"
    assert c.get("/v1/metrics", headers=AUTH).json()["strategy_source"] == "user_config"


def _sse(text: str) -> list[tuple[str, dict]]:
    out = []
    for block in text.strip().split("\n\n"):
        lines = dict(line.split(": ", 1) for line in block.splitlines())
        out.append((lines["event"], json.loads(lines["data"])))
    return out


def test_agent_mode_streams_every_step_as_the_evaluator_runs_it(app, module_dir):
    svc, c = app
    family = "cancellation"
    seed = DOMAIN.validation_seeds(family, 1)[0]
    r = c.post("/v1/episodes", json={"domain": "ecommerce", "family": family, "seed": seed}, headers=AUTH)
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/event-stream")
    events = _sse(r.text)
    assert events[0][0] == "session" and events[0][1]["family"] == family
    steps = [e for name, e in events[1:] if name == "step"]
    assert len(steps) == len(events) - 1 and steps[-1]["done"] and not any(s["done"] for s in steps[:-1])
    assert [s["t"] for s in steps] == list(range(len(steps)))
    (rec,), _ = rollout(
        ModulePolicy(load_policy_module(module_dir)), served_env_config(svc.settings), [(family, seed)]
    )
    assert [(s["skill"], s["arguments"], s["result_code"]) for s in steps] == [
        (x.skill, x.args, x.result_code) for x in rec.steps
    ]
    assert steps[-1]["completed"] == rec.completed and steps[-1]["dag_valid"] == rec.dag_valid
    m = c.get("/v1/metrics", headers=AUTH).json()
    assert m["live"]["stable"]["calls"] == len(steps) and m["live"]["stable"]["episodes"] == 1
    assert m["sessions_open"] == 0


def test_sessions_step_through_the_executor_and_cannot_inject_calls(app):
    svc, c = app
    s = c.post("/v1/sessions", json={"domain": "ecommerce", "family": "stock_inquiry"}, headers=AUTH).json()
    sid = s["session_id"]
    r = c.post(f"/v1/sessions/{sid}/step", json={"skill": "refund.trigger", "params": {}}, headers=AUTH)
    assert r.status_code == 422 and r.json()["detail"][0]["loc"][-1] == "skill"
    env = svc.sessions.open[sid].env
    step = c.post(f"/v1/sessions/{sid}/step", headers=AUTH).json()
    assert step["t"] == 0 and step["session_id"] == sid
    (row,) = env.executor.audit.rows()  # the call went through the executor (its audit log)
    assert row["trace_id"] == step["executor_trace_id"] and row["skill"] == step["skill"]
    while not step["done"]:
        step = c.post(f"/v1/sessions/{sid}/step", json={}, headers=AUTH).json()
    assert c.post(f"/v1/sessions/{sid}/step", headers=AUTH).status_code == 409
    assert c.post(f"/v1/sessions/{'0' * 32}/step", headers=AUTH).status_code == 404
    assert c.post("/v1/sessions/not-an-id/step", headers=AUTH).status_code == 422
    assert (
        c.post("/v1/sessions", json={"domain": "ecommerce", "family": "nope"}, headers=AUTH).status_code
        == 422
    )
    other = c.post("/v1/sessions", json={"domain": "ecommerce"}, headers=AUTH).json()["session_id"]
    assert c.delete(f"/v1/sessions/{other}", headers=AUTH).json() == {"closed": True}
    assert len(svc.sessions.open) == 0


def test_feedback_is_stored_with_the_decision_and_read_back(app, settings_dict):
    _svc, c = app
    body = body_for()
    d = c.post("/v1/act", json=body, headers=AUTH).json()
    r = c.post(
        "/v1/feedback",
        json={
            "trace_id": d["trace_id"],
            "outcome": "failure",
            "reason": "outdated",
            "comment": "old address",
        },
        headers=AUTH,
    )
    assert r.status_code == 200 and r.json()["trace_id"] == d["trace_id"]
    assert (
        c.post("/v1/feedback", json={"trace_id": "nope", "outcome": "success"}, headers=AUTH).status_code
        == 404
    )
    assert (
        c.post(
            "/v1/feedback", json={"trace_id": d["trace_id"], "outcome": "failure"}, headers=AUTH
        ).status_code
        == 422
    )
    bad = {"trace_id": d["trace_id"], "outcome": "failure", "reason": "bored"}
    assert c.post("/v1/feedback", json=bad, headers=AUTH).status_code == 422
    (fb,) = read_feedback(settings_dict["feedback_db"])
    assert (fb.trace_id, fb.outcome, fb.reason, fb.comment, fb.arm) == (
        d["trace_id"],
        "failure",
        "outdated",
        "old address",
        "stable",
    )
    assert fb.request["task"]["request"]["text"] == body["task"]["request"]["text"]
    assert fb.decision["skill"] == d["skill"] and fb.decision["arguments"] == d["arguments"]


def test_transcript_outcomes_count_once_for_the_deciding_arm(app):
    svc, c = app
    body = body_for()
    d = c.post("/v1/act", json=body, headers=AUTH).json()
    call = transcript_entry(d["skill"], d["arguments"], result_code="UPSTREAM_ERROR", trace_id=d["trace_id"])
    for _ in range(2):
        assert c.post("/v1/act", json={**body, "transcript": [call]}, headers=AUTH).status_code == 200
    assert svc.router.counts["stable"].calls == 1 and svc.router.counts["stable"].ok_calls == 0


def test_a_failing_candidate_is_answered_by_stable_and_rolled_back(settings_dict, module_dir):
    cfg = {**settings_dict, "candidate": {"checkpoint": str(module_dir), "version": "cand"}}
    svc, c = make(cfg, fail={"candidate"})
    keys = [k for k in (f"conv-{i}" for i in range(2000)) if svc.router.assign(k) == "candidate"][:6]
    assert len(keys) == 6
    body = body_for()
    for k in keys:
        r = c.post("/v1/act", json={**body, "conversation_id": k}, headers=AUTH)
        assert r.status_code == 200 and r.json()["arm"] == "stable"
    snap = c.get("/v1/metrics", headers=AUTH).json()
    assert snap["canary"]["state"] == "rolled_back" and snap["canary"]["decisions"][-1]["event"] == "rollback"
    assert snap["traffic_split"] == {"stable": 1.0, "candidate": 0.0}
    svc.close()


def test_a_failing_stable_policy_degrades_to_rules(settings_dict):
    svc, c = make(settings_dict, fail={"stable"})
    d = c.post("/v1/act", json=body_for(), headers=AUTH).json()
    assert d["arm"] == "rules" and d["skill"] == d["fallback_action"]["skill"]
    assert c.get("/v1/metrics", headers=AUTH).json()["degraded_to_rules"] == 1
    svc.close()


def test_metrics_report_latency_traffic_and_canary(app):
    _svc, c = app
    c.post("/v1/act", json=body_for(), headers=AUTH)
    m = c.get("/v1/metrics", headers=AUTH).json()
    assert m["latency_ms"]["/v1/act"]["count"] == 1 and m["latency_ms"]["/v1/act"]["p50"] > 0
    assert m["requests"]["/v1/act 200"] == 1 and m["traffic_split"]["stable"] == 1.0
    assert m["canary"]["state"] == "off" and m["models"] == {"stable": "untrained-0"}


def test_agent_mode_sessions_share_the_customers_memory_across_sessions_and_restarts(tmp_path):
    """A returning caller (helpdesk_memory's ticket_said_earlier, the same task again): the first session, played by
    the expert, writes which ticket they mean; the next session of the same caller finds it with memory.search before
    writing anything, and so does one after a restart (the store reopened from its folder). Without agent.memory
    each session's world keeps its own memory, and the next session does not find it."""
    from agentic_ray.domains.helpdesk_memory.tasks import RECALL_FACT
    from agentic_ray.envs.agent_task_env import AgentTaskEnvConfig
    from agentic_ray.memory.memory_config import MemoryConfig
    from agentic_ray.memory.memory_skills import HIT_AGE, HIT_SCORE, SEARCH
    from agentic_ray.serving.decisions import EnvPool
    from agentic_ray.serving.sessions import SessionManager
    from agentic_ray.serving.settings import AgentSettings

    pool = EnvPool(AgentTaskEnvConfig(domain="helpdesk_memory"))
    family = "ticket_said_earlier"
    seed = get_domain("helpdesk_memory").validation_seeds(family, 1)[0]
    cfg = MemoryConfig(path=str(tmp_path / "memory"))

    def recall(sessions: SessionManager, sid: str) -> tuple[str, dict]:
        s = sessions.create(sid, family, seed, "stable")
        sessions.step(s, s.rules_action(), "rules")  # identify the caller
        task = s.env.task
        query = {"query": task.request.facts[RECALL_FACT]}
        res = sessions.step(s, s.env.encode_action(SEARCH, query), "rules")
        assert res.result_code == "OK"
        sessions.close(sid)
        return task.key_facts[0]["value"], {h["id"]: h for h in res.payload["ticket_hits"]}

    sessions = SessionManager(pool, 8, 600.0, memory=cfg)
    s = sessions.create("first", family, seed, "stable")
    while not (res := sessions.step(s, s.rules_action(), "rules")).done:
        pass
    assert res.completed
    sessions.close("first")
    meant, hits = recall(sessions, "second")
    assert hits[meant][HIT_SCORE] > 0.99 and hits[meant][HIT_AGE] < 1.0  # the first session's note
    sessions.close_memory()
    restarted = SessionManager(pool, 8, 600.0, memory=cfg)
    meant, hits = recall(restarted, "after-restart")
    assert meant in hits
    restarted.close_memory()
    meant, hits = recall(SessionManager(pool, 8, 600.0), "no-shared-memory")
    assert hits and meant not in hits
    with pytest.raises(ValueError, match="keeps no memory"):
        SessionManager(EnvPool(AgentTaskEnvConfig(domain="ecommerce")), 8, 600.0, memory=cfg)
    with pytest.raises(ValueError, match="backend=python"):
        AgentSettings(backend="http", http_url="http://skills:8000", memory=cfg)
