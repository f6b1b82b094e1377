"""Service settings invariants, and request bodies converted into the domain's own Task."""

from __future__ import annotations

import json

import pytest
from pydantic import ValidationError

from agentic_ray.domains import get_domain
from agentic_ray.envs.agent_task_env import AgentTaskEnv
from agentic_ray.serving.client import act_body
from agentic_ray.serving.request_check import ClientError, check_act_request
from agentic_ray.serving.schemas import ActRequest
from agentic_ray.serving.settings import (
    ArmSettings,
    CanarySettings,
    GatewayUserConfig,
    PolicyUserConfig,
    ServeSettings,
    run_dir_of,
)
from tests.helpers.plugin_domain import register

RETAIL = register()  # the plug-in domain: goals conditional on the customer's answer


def test_batch_size_must_fit_max_ongoing_requests():
    with pytest.raises(ValidationError, match="max_ongoing_requests \\(5\\) < max_batch_size \\(32\\)"):
        ArmSettings(checkpoint="x", max_ongoing_requests=5)
    ArmSettings(checkpoint="x", max_ongoing_requests=5, batching={"max_batch_size": 4})
    with pytest.raises(ValidationError, match="gateway_max_ongoing_requests"):
        ServeSettings(stable={"checkpoint": "x"}, gateway_max_ongoing_requests=8)


def test_an_in_gateway_arm_has_no_deployment_and_its_batching_rides_on_the_gateway():
    from agentic_ray.serving.deploy import app_config

    with pytest.raises(ValidationError, match="num_replicas must be 1"):
        ArmSettings(checkpoint="x", in_gateway=True, num_replicas=2)
    # default: inside the gateway for one replica, a deployment of its own to scale out or when asked
    assert ArmSettings(checkpoint="x").in_gateway and ArmSettings(checkpoint="x", in_gateway=None).in_gateway
    assert not ArmSettings(checkpoint="x", num_replicas=2).in_gateway
    assert not ArmSettings(checkpoint="x", in_gateway=False).in_gateway
    dumped = ArmSettings(checkpoint="x").model_dump(mode="json")  # what the replicas validate again
    assert ArmSettings.model_validate(dumped).in_gateway and dumped["in_gateway"] is True
    default = ServeSettings(stable={"checkpoint": "s"}, candidate={"checkpoint": "c"})
    assert [d["name"] for d in app_config(default)["deployments"]] == ["Gateway"]
    assert sorted(app_config(default)["deployments"][0]["user_config"]["batching"]) == ["candidate", "stable"]
    s = ServeSettings(
        stable={"checkpoint": "s", "in_gateway": True, "batching": {"max_batch_size": 8}},
        candidate={"checkpoint": "c", "in_gateway": False},
    )
    deployments = {d["name"]: d["user_config"] for d in app_config(s)["deployments"]}
    assert sorted(deployments) == ["Gateway", "candidate"]
    assert deployments["Gateway"] == {
        "strategy_mode": "learned",
        "batching": {"stable": {"max_batch_size": 8, "batch_wait_timeout_s": 0.0, "fault_delay_ms": 0.0}},
    }
    unbatched = PolicyUserConfig(max_batch_size=1)
    deployments = {d["name"]: d["user_config"] for d in app_config(s, "p", "rules", unbatched)["deployments"]}
    assert deployments["Gateway"]["strategy_mode"] == "rules"
    assert deployments["Gateway"]["batching"]["stable"] == deployments["candidate"] == unbatched.model_dump()
    cfg = GatewayUserConfig.model_validate(deployments["Gateway"])
    assert cfg.batching["stable"].max_batch_size == 1
    with pytest.raises(ValidationError):  # arms are named
        GatewayUserConfig(batching={"canary": {"max_batch_size": 2}})
    plain = ServeSettings(stable={"checkpoint": "s", "in_gateway": False})
    assert app_config(plain)["deployments"][0]["user_config"] == {"strategy_mode": "learned", "batching": {}}


def test_canary_steps_must_rise_to_one():
    for bad in ([0.5, 0.1, 1.0], [0.05, 0.5], [], [0.0, 1.0]):
        with pytest.raises(ValidationError):
            CanarySettings(steps=bad)
    assert CanarySettings().steps == [0.05, 0.10, 0.50, 1.0]


def test_env_config_comes_from_the_run(tmp_path):
    run = tmp_path / "run"
    (run / "checkpoints" / "reflection").mkdir(parents=True)
    (run / "settings.json").write_text(json.dumps({"env": {"domain": "helpdesk", "drift": False}}))
    s = ServeSettings(stable={"checkpoint": str(run / "checkpoints" / "reflection")})
    assert run_dir_of(s.stable.checkpoint) == run
    assert s.env_config().domain == "helpdesk" and s.stable.resolved_version() == "checkpoints/reflection"
    with pytest.raises(ValueError, match="give `env`"):
        ServeSettings(stable={"checkpoint": str(tmp_path / "elsewhere")}).env_config()


@pytest.mark.parametrize(
    "domain,family",
    [
        ("ecommerce", "multi_item_return"),
        ("helpdesk", "merge_duplicates"),
        (RETAIL, "expedite_order"),
        (RETAIL, "two_emails"),  # a fact with two values travels as a list and comes back as the tuple
    ],
)
def test_a_request_body_becomes_the_domains_task(domain, family):
    d = get_domain(domain)
    _w, task = d.make_task(family, 5)
    env = AgentTaskEnv({"domain": domain})
    req = check_act_request(ActRequest.model_validate(json.loads(json.dumps(act_body(domain, task)))), env)
    got = req.task
    assert got.goals == task.goals and got.request == task.request
    assert (got.optimal_steps, got.relevant) == (task.optimal_steps, task.relevant)
    assert got.extra == json.loads(json.dumps(task.extra))  # domain data travels as JSON (tuples as lists)
    assert req.transcript == [] and not req.sla["calls"].any()


def test_a_tasks_short_term_window_travels_in_the_request_body():
    """/v1/act rebuilds the observation of a windowed task as the env does only if the window comes along."""
    _w, task = get_domain("helpdesk_memory").make_task("ticket_said_earlier", 5)
    body = json.loads(json.dumps(act_body("helpdesk_memory", task)))
    req = check_act_request(ActRequest.model_validate(body), AgentTaskEnv({"domain": "helpdesk_memory"}))
    assert req.task.short_term_window == task.short_term_window == 6
    _w, plain = get_domain("helpdesk").make_task("merge_duplicates", 5)
    assert "short_term_window" not in act_body("helpdesk", plain)["task"]


def test_a_goal_conditional_on_an_answer_needs_the_question_among_its_deps():
    _w, task = get_domain(RETAIL).make_task("expedite_order", 5)
    body = act_body(RETAIL, task)
    body["task"]["goals"][1]["deps"] = []
    body["task"]["goals"][2]["on_answer"] = ["close", "no"]
    with pytest.raises(ClientError) as e:
        check_act_request(ActRequest.model_validate(body), AgentTaskEnv({"domain": RETAIL}))
    assert [loc for loc, _ in e.value.problems] == [
        ("body", "task", "goals", 1, "on_answer", 0),
        ("body", "task", "goals", 2, "on_answer", 0),
    ]


def test_unknown_entity_types_hints_and_tool_names_are_named():
    d = get_domain("ecommerce")
    _w, task = d.make_task("quality_refund", 2)
    body = act_body("ecommerce", task)
    body["task"]["request"]["mentioned"].append({"type": "spaceship", "id": "S1"})
    body["task"]["goals"][0]["hints"] = {"colour": "red"}
    body["tool_stats"] = {"teleport": {"p50_ms": 1.0}}
    with pytest.raises(ClientError) as e:
        check_act_request(ActRequest.model_validate(body), AgentTaskEnv())
    assert [loc for loc, _ in e.value.problems] == [
        ("body", "task", "goals", 0, "hints", "colour"),
        ("body", "task", "request", "mentioned", 1, "type"),
        ("body", "tool_stats", "teleport"),
    ]
