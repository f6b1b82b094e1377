"""The help-desk domain through the Domain protocol and the generic env (the second domain of the plug-in API)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env

from agentic_ray.domains import get_domain
from agentic_ray.domains.helpdesk.tasks import VALIDATION_SEED_BASE
from agentic_ray.envs.agent_task_env import AgentTaskEnv, AgentTaskEnvConfig
from agentic_ray.keys import EPISODE_RECORD, STEP_TRACE
from agentic_ray.skills.backends import FaultConfig
from agentic_ray.skills.preconditions import Call, precondition_status

D = get_domain("helpdesk")
EMPLOYEE_FIELDS = {"dept", "status", "verified", "mfa_enrolled", "tenure_years", "open_tickets"}


def _env(family: str, task_seed: int = 7, **cfg: Any) -> AgentTaskEnv:
    env = AgentTaskEnv(AgentTaskEnvConfig(domain="helpdesk", **cfg))
    env.reset(seed=0, options={"family": family, "task_seed": task_seed})
    return env


def _step(env: AgentTaskEnv, skill: str, **params: Any) -> tuple[bool, bool, dict[str, Any]]:
    _, _, term, trunc, info = env.step(env.encode_action(skill, params))
    return term, trunc, info


def _expert_step(env: AgentTaskEnv) -> tuple[bool, bool, dict[str, Any]]:
    _, _, term, trunc, info = env.step(env.encode_action(*D.expert().plan(env.view())))
    return term, trunc, info


def _finish(env: AgentTaskEnv) -> dict[str, Any]:
    while True:
        term, trunc, info = _expert_step(env)
        if term or trunc:
            return info[EPISODE_RECORD]


def test_node_types_and_skill_names_are_its_own() -> None:
    assert D.schema.type_names == ("employee", "ticket", "asset")
    names = [s.name for s in D.contracts().skills]
    assert "ticket.get" in names and "lookup_employee_by_email" in names  # both naming styles
    words = set(D.schema.type_names) | set(names)
    for c in D.contracts().skills:
        words |= set(c.input) | set(c.output.fields) | {getattr(p, "node_type", "") for p in c.input.values()}
    shop = [w for w in words if any(x in w for x in ("user", "order", "product", "sku"))]
    assert not shop  # none of the e-commerce vocabulary


@pytest.mark.parametrize("family", D.families)
def test_tasks_are_deterministic_per_family_and_seed(family: str) -> None:
    (w1, t1), (w2, t2) = D.make_task(family, 123), D.make_task(family, 123)
    assert w1.to_dict() == w2.to_dict() and t1 == t2
    assert (
        D.world_from_dict(w1.to_dict()).to_dict() == w1.to_dict()
    )  # a world travels to a skill server intact
    w3, t3 = D.make_task(family, 124)
    assert w3.to_dict() != w1.to_dict() and t3.request != t1.request
    assert t1.optimal_steps >= len(t1.goals) + 1  # the caller is always looked up first
    assert t1.request.text and set(t1.request.facts) in ({"email"}, {"badge"})


def test_validation_seeds_are_disjoint_from_training_and_between_families() -> None:
    val = [s for f in D.families for s in D.validation_seeds(f, 25)]
    assert len(set(val)) == len(val) and min(val) >= VALIDATION_SEED_BASE
    rng = np.random.default_rng(0)
    assert max(D.draw_training_seed(rng) for _ in range(10_000)) < VALIDATION_SEED_BASE


@pytest.mark.parametrize("mode", ["structured", "prototype"])
def test_expert_solves_every_validation_task_in_optimal_steps(mode: str) -> None:
    env = AgentTaskEnv(AgentTaskEnvConfig(domain="helpdesk", split="validation", action_mode=mode))
    env.reset(seed=0)
    results = []
    for i in range(25 * len(D.families)):
        if i:
            env.reset()
        assert env.task is not None
        rec = _finish(env)
        results.append((env.task.family, rec["completed"], len(rec["steps"]) == env.task.optimal_steps))
    bad = [r for r in results if not (r[1] and r[2])]
    assert not bad, bad
    assert {r[0] for r in results} == set(D.families)


@pytest.mark.parametrize("mode", ["structured", "prototype"])
def test_check_env(mode: str) -> None:
    env = AgentTaskEnv(AgentTaskEnvConfig(domain="helpdesk", action_mode=mode))
    check_env(env, skip_render_check=True)


def _declared(skill: str, of: str) -> set[str]:
    """Entity fields a contract declares for the entity ``of`` names (``of:`` outputs, or a list's item fields)."""
    out = D.contracts().by_name()[skill].output.fields
    if out[of].type == "entity_list":
        return set(out[of].fields)
    return {f.as_field or n for n, f in out.items() if f.of == of}


def test_lookups_reveal_exactly_their_declared_entities_and_fields() -> None:
    env = _env("merge_duplicates")
    k, w = env.knowledge, env.world
    assert k is not None and all(k.ids(t) == [] for t in D.schema.type_names)  # the request names nothing
    caller = w.caller.id
    _, _, info = _expert_step(env)  # lookup by email or badge
    assert k.ids("employee") == [caller] and k.ids("ticket") == [] and k.ids("asset") == []
    assert (
        set(k.fields("employee", caller))
        == _declared(info[STEP_TRACE]["skill"], "employee_id")
        == EMPLOYEE_FIELDS
    )
    _, _, info = _expert_step(env)
    assert info[STEP_TRACE]["skill"] == "ticket.search"
    mine = [t.id for t in w.tickets if t.reporter_id == caller]
    assert k.ids("ticket") == mine and k.ids("asset") == []  # the colleague's ticket stays unknown
    listed = _declared("ticket.search", "tickets")
    assert listed == {"status", "category", "priority", "age_hours"}
    assert all(set(k.fields("ticket", t)) == listed for t in mine)
    assert k.fields("employee", caller)["tickets"] == mine
    _, _, info = _expert_step(env)
    primary = info[STEP_TRACE]["args"]["ticket_id"]
    assert info[STEP_TRACE]["skill"] == "ticket.get" and not w.ticket(primary).asset_id
    assert set(k.fields("ticket", primary)) == _declared("ticket.get", "ticket_id") - {
        "asset"
    }  # "" names none
    assert k.fields("ticket", primary)["reporter"] == caller and k.ids("asset") == []

    env = _env("warranty_inquiry")
    k, w = env.knowledge, env.world
    assert k is not None
    _expert_step(env)
    _expert_step(env)  # get_assets_for_employee: ids with kind and status, no warranty yet
    mine = [a.id for a in w.assets if a.owner_id == w.caller.id]
    listed = _declared("get_assets_for_employee", "assets")
    assert k.ids("asset") == mine and listed == {"kind", "status"}
    assert all(set(k.fields("asset", a)) == listed for a in mine)
    assert not env._observe()["source_mask"].any()  # no number to copy before the registry is read
    _, _, info = _expert_step(env)
    target = info[STEP_TRACE]["args"]["asset_id"]
    assert set(k.fields("asset", target)) == _declared("asset.get", "asset_id") | listed
    assert all(set(k.fields("asset", a)) == listed for a in mine if a != target)


def test_world_state_family_fails_when_a_wrong_call_changes_the_hashed_state() -> None:
    def run(change: bool) -> dict[str, Any]:
        env = _env("merge_duplicates", task_seed=11)
        assert env.task is not None and env.task.end == "world_state"
        _expert_step(env)
        _expert_step(env)  # ticket.search
        involved = {g.args.get("ticket_id") for g in env.task.goals} | set(
            env.task.goals[1].args["duplicates"]
        )
        mine = [t for t in env.world.tickets if t.reporter_id == env.world.caller.id]
        other = next(t for t in mine if t.status == "open" and t.id not in involved)  # unrelated to the merge
        _step(env, "ticket.get", ticket_id=other.id)
        if change:
            new = "low" if other.priority != "low" else "medium"
            _, _, info = _step(env, "ticket.set_priority", ticket_id=other.id, priority=new)
            assert info[STEP_TRACE]["result_code"] == "OK"
        return _finish(env)

    assert run(change=False)["completed"]  # an extra read changes nothing hashed
    rec = run(change=True)
    assert not rec["completed"] and rec["failed"]
    assert set(rec["goals_done_order"]) == {"read", "merge", "priority"}  # every goal met, the state is not


def test_merge_into_the_wrong_primary_satisfies_the_goal_but_fails_the_final_check() -> None:
    env = _env("merge_duplicates", task_seed=11)
    assert env.task is not None
    dups = env.task.goals[1].args["duplicates"]
    _expert_step(env)
    _expert_step(env)
    _expert_step(env)  # ticket.get of the primary
    rest = [t for t in env.world.tickets if t.reporter_id == env.world.caller.id and t.status == "open"]
    wrong = next(t.id for t in rest if t.id not in dups and t.id != env.task.goals[0].args["ticket_id"])
    _step(env, "ticket.get", ticket_id=wrong)
    _, _, info = _step(env, "ticket.merge", ticket_id=wrong, duplicates=dups)
    assert info[STEP_TRACE]["goals_satisfied"] == ["merge"]
    rec = _finish(env)
    assert not rec["completed"] and rec["failed"]


def test_escalation_is_the_right_end_only_where_the_family_says_so() -> None:
    env = _env("lost_device")
    rec = _finish(env)
    assert rec["completed"] and rec["steps"][-1]["skill"] == "escalate_to_tier2"
    assert (
        rec["steps"][-1]["args"]["ticket_id"] == env.task.request.mentioned[0].id
    )  # the optional ticket given
    env = _env("disabled_account")
    rec = _finish(env)
    assert rec["completed"] and "ticket_id" not in rec["steps"][-1]["args"]  # left out
    env = _env("password_reset")
    _expert_step(env)
    term, _, info = _step(env, "escalate_to_tier2", employee_id=env.world.caller.id, reason="complex")
    rec = info[EPISODE_RECORD]
    assert term and rec["failed"] and not rec["completed"]


def test_answer_tells_the_revealed_number_by_copying_it() -> None:
    env = _env("warranty_inquiry")
    for _ in range(3):
        _expert_step(env)
    assert env.task is not None and env.knowledge is not None
    asset = env.task.goals[1].args["asset_id"]
    days = env.knowledge.fields("asset", asset)["warranty_days_left"]
    act = env.encode_action("answer_warranty", {"asset_id": asset, "days": days})
    assert act["source"][0] > 0  # encoded as a copy of the revealed field, not a free value
    rec = env.step(act)[4][EPISODE_RECORD]
    assert rec["completed"]
    env = _env("warranty_inquiry")
    for _ in range(3):
        _expert_step(env)
    _, _, info = _step(env, "answer_warranty", asset_id=asset, days=days + 1)
    assert info[EPISODE_RECORD]["failed"] and not info[EPISODE_RECORD]["completed"]


def test_hard_rule_no_password_reset_unverified_or_disabled() -> None:
    env = _env("password_reset")
    _expert_step(env)
    assert (
        env.knowledge is not None
        and env.knowledge.fields("employee", env.world.caller.id)["verified"] is False
    )
    assert not env.view().allowed("reset_password")
    assert any("not verified" in r for r in env.current_masks.reasons["reset_password"])
    _expert_step(env)  # account.verify_identity
    assert env.view().allowed("reset_password")
    env = _env("disabled_account")
    _expert_step(env)
    assert any("disabled" in r for r in env.current_masks.reasons["reset_password"])


def test_any_of_identification_and_bound_ticket_reads() -> None:
    seed = next(s for s in range(100) if "badge" in D.make_task("merge_duplicates", s)[1].request.facts)
    env = _env("merge_duplicates", task_seed=seed)
    assert not env.view().allowed("lookup_employee_by_email")  # the request gives no email
    _expert_step(env)
    assert env.view().allowed("ticket.search")  # identified by the alternative (badge)
    c = D.contracts().by_name()["ticket.merge"]
    me = Call("lookup_employee_by_badge", {"badge": "B1"}, {"employee_id": "E1"})
    read = Call("ticket.get", {"ticket_id": "T1"}, {"ticket_id": "T1", "employee_id": "E1"})
    other = Call("ticket.get", {"ticket_id": "T2"}, {"ticket_id": "T2", "employee_id": "E2"})
    history = [me, read, other]
    assert precondition_status(c, {"ticket_id": "T1", "duplicates": ["T3"]}, history)[0]
    assert not precondition_status(c, {"ticket_id": "T2", "duplicates": ["T3"]}, history)[0]  # someone else's
    _expert_step(env)
    _expert_step(env)  # ticket.get of the primary: the only valid merge target
    i = env.skills.index("ticket.merge")
    pm = env.current_masks.pointer_mask[i, 0]
    assert env.task is not None
    assert [env.builder.node_ids["ticket"][j] for j in np.flatnonzero(pm)] == [
        env.task.goals[0].args["ticket_id"]
    ]


def test_registry_outage_degrades_to_the_conservative_rule_and_reveals_nothing() -> None:
    env = _env("warranty_inquiry")
    env.backend.set_faults(FaultConfig(per_skill={"asset.get": FaultConfig(failure_rate=1.0)}))
    _expert_step(env)
    _expert_step(env)
    _, _, info = _expert_step(env)
    assert (
        info[STEP_TRACE]["skill"] == "asset.get"
        and info[STEP_TRACE]["fallback_used"] == "rule:registry_unavailable"
    )
    assert env.knowledge is not None
    assert not any(
        "warranty_days_left" in env.knowledge.fields("asset", a) for a in env.knowledge.ids("asset")
    )
    assert not env.view().allowed("answer_warranty")  # a degraded reply satisfies no precondition
