"""AgentTaskEnv against a real local skill server (``agentic-ray skills serve``) through HttpBackend: the expert
solves tasks, injected faults are real and per world, and a broken or dying server raises nothing out of the env."""

from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import httpx
import pytest

from agentic_ray.envs.agent_task_env import AgentTaskEnv, AgentTaskEnvConfig, FaultScheduleConfig
from agentic_ray.keys import BACKEND_ERRORS, EPISODE_RECORD, STEP_TRACE
from agentic_ray.skills.backends import FaultConfig, HttpBackend
from agentic_ray.skills.server import free_port, skill_server_process


@pytest.fixture(scope="module")
def server_url():
    with skill_server_process(["--domain", "ecommerce"]) as url:
        yield url


def test_expert_solves_tasks_over_http(server_url: str) -> None:
    env = AgentTaskEnv(AgentTaskEnvConfig(backend="http", http_url=server_url))
    expert = env.domain.expert()
    for family in ("quality_refund", "wrong_item_exchange"):
        env.reset(seed=3, options={"family": family})
        done, steps = False, 0
        while not done:
            _, _, term, trunc, info = env.step(env.encode_action(*expert.plan(env.view())))
            assert info[STEP_TRACE]["result_code"] == "OK"
            steps += 1
            done = term or trunc
        rec = info[EPISODE_RECORD]
        assert rec["completed"] and steps == rec["optimal_steps"]
        if family == "quality_refund":  # the refund happened on the server and came back with the world
            oid = next(g for g in env.task.goals if g.skill == "refund.trigger").args["order_id"]
            assert env.world.order(oid).refunded > 0  # type: ignore[union-attr]
            assert env.backend.get_world(env.world_id).order(oid).refunded == env.world.order(oid).refunded
    env.close()


def _expert_action(env: AgentTaskEnv, expert):
    return env.encode_action(*expert.plan(env.view()))


def _run(env: AgentTaskEnv, max_steps: int = 30) -> list[dict]:
    """Drive the scripted expert to the end of the episode; the step traces."""
    expert, traces = env.domain.expert(), []
    for _ in range(max_steps):
        _, _, term, trunc, info = env.step(_expert_action(env, expert))
        traces.append(info[STEP_TRACE])
        if term or trunc:
            break
    return traces


def test_fault_injection_over_http_is_real_and_per_world(server_url: str) -> None:
    faults = FaultScheduleConfig(enabled=True, start_share=1.0, end_share=1.0, kinds={"outage": 1.0})
    faulty = AgentTaskEnv(AgentTaskEnvConfig(backend="http", http_url=server_url, faults=faults))
    clean = AgentTaskEnv(AgentTaskEnvConfig(backend="http", http_url=server_url))
    _, info = faulty.reset(seed=3, options={"family": "quality_refund"})
    _, clean_info = clean.reset(seed=3, options={"family": "quality_refund"})
    assert info["fault_kind"] == "outage" and info[BACKEND_ERRORS] == []
    assert clean_info["fault_kind"] is None and clean_info[BACKEND_ERRORS] == []
    # The episode's faults live on the server, for this world only.
    pushed = httpx.get(f"{server_url}/worlds/{faulty.world_id}/faults").json()
    (down,) = [s for s, f in pushed["per_skill"].items() if f["failure_rate"] == 1.0]
    assert httpx.get(f"{server_url}/worlds/{clean.world_id}/faults").json()["failure_rate"] == 0.0
    assert all(
        f["failure_rate"] == 0.0 for f in httpx.get(f"{server_url}/faults").json()["per_skill"].values()
    )
    # The down skill's primary fails on the faulty world (typed, or degraded by its fallback) ...
    hits = [t for t in _run(faulty) if t["skill"] == down]
    assert hits and all(t["result_code"] != "OK" or t["fallback_used"] for t in hits), hits
    assert any(t["injected"] for t in hits) or all(t["fallback_used"] for t in hits)
    # ... while the same task on the clean world runs through.
    traces = _run(clean)
    assert all(t["result_code"] == "OK" and t["fallback_used"] is None for t in traces)
    faulty.close()
    clean.close()


class _AlwaysFails(BaseHTTPRequestHandler):
    """A real HTTP server that answers every request with a plain-text 500 page (a crashed upstream)."""

    def _fail(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        body = b"Internal Server Error"
        self.send_response(500)
        self.send_header("Content-Type", "text/plain")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_GET = do_PUT = do_POST = do_DELETE = _fail

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture()
def broken_url():
    srv = ThreadingHTTPServer(("127.0.0.1", 0), _AlwaysFails)
    t = threading.Thread(target=srv.serve_forever, daemon=True)
    t.start()
    yield f"http://127.0.0.1:{srv.server_address[1]}"
    srv.shutdown()
    srv.server_close()


def test_a_server_answering_500_raises_nothing_out_of_reset_or_step(broken_url: str) -> None:
    faults = FaultScheduleConfig(enabled=True, start_share=1.0, end_share=1.0, kinds={"garbage": 1.0})
    env = AgentTaskEnv(AgentTaskEnvConfig(backend="http", http_url=broken_url, faults=faults))
    _, info = env.reset(seed=0, options={"family": "address_error"})
    errors = info[BACKEND_ERRORS]
    assert any(e.startswith("put_world: UPSTREAM_ERROR") and "HTTP 500" in e for e in errors), errors
    assert any(e.startswith("set_faults:") for e in errors)
    assert info["fault_kind"] is None  # faults that could not be set are not claimed
    expert = env.domain.expert()
    for _ in range(2):
        _, _, term, trunc, step_info = env.step(_expert_action(env, expert))
        t = step_info[STEP_TRACE]
        assert t["result_code"] == "UPSTREAM_ERROR" and "HTTP 500" in t["message"], t
        assert any("world not refreshed" in w for w in t["warnings"]), t["warnings"]
        if term or trunc:
            break
    env.close()


def test_a_dying_server_raises_nothing_out_of_reset_or_step() -> None:
    env: AgentTaskEnv | None = None
    with skill_server_process(["--domain", "ecommerce"]) as url:
        env = AgentTaskEnv(AgentTaskEnvConfig(backend="http", http_url=url))
        env.reset(seed=1, options={"family": "address_error"})
        _, _, _, _, info = env.step(_expert_action(env, env.domain.expert()))
        assert info[STEP_TRACE]["result_code"] == "OK"
    # The server is gone (its process group was stopped): calls fail typed, and a new episode still starts.
    _, _, _, _, info = env.step(_expert_action(env, env.domain.expert()))
    t = info[STEP_TRACE]
    assert t["result_code"] == "UPSTREAM_ERROR" and "ConnectError" in t["message"], t
    _, info = env.reset(seed=2)
    assert any("put_world: UPSTREAM_ERROR" in e for e in info[BACKEND_ERRORS])
    env.close()


def test_http_backend_world_calls_are_typed(server_url: str) -> None:
    from agentic_ray.domains.ecommerce.world import ShopWorld

    b = HttpBackend(server_url, world_from_dict=ShopWorld.from_dict)
    out = b.put_world("bad", {"user": {"id": "U1"}})
    assert not out.ok and out.error_code == "INVALID_INPUT" and "bad world body" in out.message
    world, out = b.fetch_world("never-put")
    assert world is None and out.error_code == "NOT_FOUND"
    dead = HttpBackend(f"http://127.0.0.1:{free_port()}")
    assert dead.put_world("w", {}).error_code == "UPSTREAM_ERROR"
    assert dead.get_world("w") is None and dead.set_faults(FaultConfig(), "w").error_code == "UPSTREAM_ERROR"
    dead.drop_world("w")  # does not raise either
    b.close()
    dead.close()


def test_direct_refund_of_minus_500_is_refused_by_the_real_server(server_url: str) -> None:
    env = AgentTaskEnv(AgentTaskEnvConfig(backend="http", http_url=server_url))
    env.reset(seed=3, options={"family": "quality_refund"})
    assert env.world is not None
    order = env.world.orders[0]
    body = {
        "world_id": env.world_id,
        "params": {"order_id": order.id, "sku": order.skus[0], "amount": -500, "reason_code": "quality"},
    }
    r = httpx.post(f"{server_url}/skills/refund.trigger", json=body).json()
    assert r["ok"] is False and r["error_code"] == "PRECONDITION_FAILED"
    after = env.backend.get_world(env.world_id)
    assert after.user.balance == env.world.user.balance
    env.close()
