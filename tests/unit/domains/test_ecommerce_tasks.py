"""E-commerce task generator, goal DAGs, quantiles, the observation builder outside the env, specs, prototypes."""

from __future__ import annotations

import numpy as np
import pytest

from agentic_ray.domains import get_domain
from agentic_ray.domains.ecommerce.tasks import (
    FAMILIES,
    MAX_GOALS,
    VALIDATION_SEED_BASE,
    draw_training_seed,
    generate_task,
    validation_seeds,
)
from agentic_ray.domains.goal_dag import Goal, goal_graph, plan_validity
from agentic_ray.domains.knowledge import Knowledge, reveal_result
from agentic_ray.domains.quantile_fit import fit_quantiles
from agentic_ray.domains.quantile_map import QuantileMap
from agentic_ray.envs.agent_task_env import AgentTaskEnv, AgentTaskEnvConfig
from agentic_ray.envs.masks import sla_arrays
from agentic_ray.envs.observation import ObservationBuilder, build_specs
from agentic_ray.envs.prototypes import (
    ExpertStep,
    describe_step,
    load_prototypes,
    mine_prototypes,
    with_every_skill,
)
from agentic_ray.graph_spec import observation_space
from agentic_ray.keys import STEP_TRACE

DOMAIN = get_domain("ecommerce")


@pytest.mark.parametrize("family", FAMILIES)
def test_tasks_are_reproducible_and_well_formed(family: str) -> None:
    for seed in (0, 1, 17, VALIDATION_SEED_BASE + 3):
        w1, t1 = generate_task(family, seed)
        w2, t2 = generate_task(family, seed)
        assert w1.to_dict() == w2.to_dict() and t1 == t2
        assert t1.family == family and len(t1.goals) <= MAX_GOALS
        assert t1.optimal_steps >= len(t1.goals) and t1.optimal_steps_soft <= t1.optimal_steps
        if family == "composite":
            assert len(t1.subtasks) == 2
        g = goal_graph(t1.goals)
        assert g.number_of_nodes() == len(t1.goals)
        for goal in t1.goals:  # every referenced entity exists in the world
            if "order_id" in goal.args:
                assert w1.order(goal.args["order_id"]) is not None
            for sku in [goal.args.get("sku"), *goal.args.get("item_ids", [])]:
                if sku is not None:
                    assert w1.product(sku) is not None
        for ref in t1.request.mentioned:  # the request names real entities, and ids appear in its text
            assert DOMAIN.entity_fields(w1, ref.type, ref.id) is not None and ref.id in t1.request.text
        assert set(t1.request.facts) in ({"email"}, {"name", "zip"})


def test_validation_split_is_disjoint_and_fixed() -> None:
    val = {s for f in FAMILIES for s in validation_seeds(f)}
    assert len(val) == 25 * len(FAMILIES) and min(val) >= VALIDATION_SEED_BASE
    rng = np.random.default_rng(0)
    assert all(draw_training_seed(rng) < VALIDATION_SEED_BASE for _ in range(1000))
    assert validation_seeds("cancellation", 3) == validation_seeds("cancellation", 3)


def test_plan_validity_and_goal_matching() -> None:
    goals = [Goal("a", "x"), Goal("b", "y", deps=("a",)), Goal("c", "z", deps=("b",))]
    assert plan_validity(goals, ["a", "b", "c"], 0) == (True, 0)
    assert plan_validity(goals, ["a", "b"], 0) == (True, 0)
    assert plan_validity(goals, ["a", "b", "c"], 1) == (False, 0)
    assert plan_validity(goals, ["b", "a"], 0) == (False, 1)  # b done before its prerequisite
    assert plan_validity(goals, ["c"], 0) == (False, 2)
    with pytest.raises(ValueError):
        goal_graph([Goal("a", "x", deps=("b",)), Goal("b", "y", deps=("a",))])
    g = Goal("r", "refund.trigger", {"order_id": "O1"}, {"amount": 10.0})
    assert g.matches("refund.trigger", {"order_id": "O1", "amount": 10.1})
    assert not g.matches("refund.trigger", {"order_id": "O1", "amount": 11.0})
    assert not g.matches("refund.trigger", {"order_id": "O2", "amount": 10.0})
    ret = Goal("r", "return.create", {"item_ids": ["S1", "S2"]})
    assert ret.matches("return.create", {"item_ids": ["S2", "S1"]})  # a set, in any order
    assert not ret.matches("return.create", {"item_ids": ["S1"]})


def test_quantile_map_is_monotone_and_the_shipped_table_fits_the_domain() -> None:
    rng = np.random.default_rng(0)
    qm = QuantileMap.fit({"x": rng.lognormal(0, 2, 5000), "z": np.zeros(100)})
    y = qm("x", np.linspace(-1, 1000, 2000))
    assert np.all(np.diff(y) >= 0) and y.min() == 0.0 and y.max() == 1.0
    assert abs(qm.scalar("x", 1.0) - 0.5) < 0.05  # the median of lognormal(0, 2) is 1: CDF, not min-max
    shipped = DOMAIN.quantiles()
    numbers = {
        f"{t.name}.{f.name}" for t in DOMAIN.schema.entity_types for f in t.fields if f.kind == "number"
    }
    assert numbers | {"tool.latency_ms", "tool.error_rate"} == set(shipped.names)
    small = fit_quantiles(DOMAIN, n_tasks=50, seed=1)
    assert set(small.names) == set(shipped.names)
    totals = [o.total for f in FAMILIES for o in generate_task(f, 3)[0].orders]
    assert 0.2 < shipped.scalar("order.total", float(np.median(totals))) < 0.9


def test_observation_rebuilt_from_the_transcript_matches_the_env() -> None:
    """What Serve does: the request plus the transcript of calls and results rebuild the env's observation."""
    env = AgentTaskEnv(AgentTaskEnvConfig(drift=False))
    obs, _ = env.reset(seed=3, options={"family": "wrong_item_exchange"})
    expert = DOMAIN.expert()
    transcript = []
    for _ in range(3):
        s, p = expert.plan(env.view())
        obs, *_x, info = env.step(env.encode_action(s, p))
        transcript.append((s, info[STEP_TRACE]["args"], env.state.history[-1].payload))
    spec, layout = build_specs(DOMAIN.schema, DOMAIN.contracts())
    builder = ObservationBuilder(DOMAIN.schema, DOMAIN.contracts(), spec, layout, DOMAIN.quantiles())
    know = Knowledge(DOMAIN.schema.type_names)
    for ref in env.task.request.mentioned:
        know.mention(ref.type, ref.id)
    by = DOMAIN.contracts().by_name()
    for s, p, payload in transcript:
        reveal_result(know, by[s], p, payload)
    assert know.to_dict() == env.knowledge.to_dict()
    builder.begin_episode(env.task)
    builder.refresh(know)
    masks = env.current_masks.as_obs()
    out = builder.build(env.task, know, env.state, sla_arrays(env.executor.sla_stats(), env.skills), masks)
    assert observation_space(spec, layout).contains(out)
    for k in obs:
        np.testing.assert_array_equal(out[k], obs[k], err_msg=k)
    g = env.task.goals
    ei, m = out["goal__requires__goal_ei"], out["goal__requires__goal_mask"]
    assert {(int(a), int(b)) for a, b, k in zip(ei[0], ei[1], m, strict=True) if k} == {
        (0, 1),
        (1, 2),
        (2, 3),
        (3, 4),
    }
    k = layout.num_skills
    assert out["goal_x"][0, k + 2] == out["goal_x"][1, k + 2] == 1.0  # check and exchange done
    assert out["goal_x"][2, k + 1] == 1.0  # the pickup is ready
    targets = out["goal__targets_sku__product_ei"][:, out["goal__targets_sku__product_mask"] > 0]
    assert g[1].args["sku"] in {env.builder.node_ids["product"][int(j)] for i, j in targets.T if i == 1}


def test_specs_are_consistent_with_contracts() -> None:
    spec, layout = build_specs(DOMAIN.schema, DOMAIN.contracts())
    assert layout.num_skills == 18 and set(layout.pointer_node_types) == {"user", "order", "product"}
    refund = layout.skills[layout.skill_index("refund.trigger")]
    assert refund.pointer_types == ("order", "product") and refund.numeric_count == 1
    ret = layout.skills[layout.skill_index("return.create")]
    assert ret.list_types == ("product",) and ret.list_bounds == ((1, 3),)
    handoff = layout.skills[layout.skill_index("human.handoff")]
    assert handoff.pointer_optional == (True,)
    assert layout.max_pointer == spec.max_nodes["product"]
    keys = {r.key for r in spec.relations}
    assert {
        "order__contains__product",
        "order__owned_by__user",
        "tool__depends__tool",
        "goal__needs__tool",
    } <= keys
    assert {(s.node_type, s.field) for s in spec.numeric_sources} == {
        ("order", "total"),
        ("order", "shipping_fee"),
        ("product", "price"),
        ("product", "stock"),
    }
    _, playout = build_specs(DOMAIN.schema, DOMAIN.contracts(), ["user.find", "order.get"])
    assert "proto_mask" in observation_space(spec, playout).spaces


def test_prototypes_cover_every_expert_step() -> None:
    penv = AgentTaskEnv(AgentTaskEnvConfig(action_mode="prototype"))
    sigs = {(p.skill, p.enum) for p in penv.prototypes}
    env = AgentTaskEnv(AgentTaskEnvConfig(split="validation", validation_per_family=2))
    expert = DOMAIN.expert()
    env.reset(seed=0)
    steps = []
    for _ in range(2 * len(FAMILIES)):
        done = False
        while not done:
            skill, params = expert.plan(env.view())
            steps.append(describe_step(env, skill, params))
            assert (skill, steps[-1].enum) in sigs
            *_x, term, trunc, _ = env.step(env.encode_action(skill, params))
            done = term or trunc
        env.reset()
    mined = mine_prototypes(steps, env.layout, seed=0)
    assert {(p.skill, p.enum) for p in mined} == {(s.skill, s.enum) for s in steps}
    assert sum(p.support for p in mined) == len(steps)
    refund = next(p for p in mined if p.skill == "refund.trigger")
    assert refund.source_field == ("product", "price")  # mined: the numeric argument copies the item price
    merged = mine_prototypes(steps, env.layout, n_prototypes=4, seed=0)
    assert len(merged) == 4 and sum(p.support for p in merged) == len(steps)
    with pytest.raises(ValueError):
        mine_prototypes([], env.layout)
    assert isinstance(steps[0], ExpertStep)
    # Every skill keeps a prototype (issue 26 point 11): one the demonstrations never call gets a default one.
    assert with_every_skill(mined, env.layout, env.skills) == mined  # the expert called every skill here
    left_out = steps[0].skill
    part = mine_prototypes([s for s in steps if s.skill != left_out], env.layout, seed=0)
    assert left_out not in {p.skill for p in part}
    every = with_every_skill(part, env.layout, env.skills)
    assert every[: len(part)] == part and {p.skill for p in every} == set(env.skills)
    assert [p.skill for p in every[len(part) :]] == [left_out]
    assert every[-1].support == 0 and every[-1].source_field is None


@pytest.mark.parametrize("domain", ["ecommerce", "ecommerce_memory", "helpdesk", "inspection"])
def test_every_shipped_domain_has_a_prototype_for_every_skill(domain: str) -> None:
    env = AgentTaskEnv(AgentTaskEnvConfig(domain=domain))
    assert {p.skill for p in load_prototypes(get_domain(domain).data_dir / "prototypes.json")} == set(
        env.skills
    )


@pytest.mark.parametrize("domain", ["ecommerce", "ecommerce_memory", "helpdesk", "helpdesk_memory"])
def test_transcript_replay_rebuilds_the_envs_observations_and_masks(domain: str) -> None:
    """What the stateless server does, checked at every step of expert episodes (on the memory domains: through
    memory skills, and a short-term window that drops the request mid-episode)."""
    from agentic_ray.envs.transcript import TranscriptCall, TranscriptState

    env = AgentTaskEnv(
        AgentTaskEnvConfig(domain=domain, drift=False, split="validation", validation_per_family=2)
    )
    server_env = AgentTaskEnv(AgentTaskEnvConfig(domain=domain))
    expert = env.domain.expert()
    obs, _ = env.reset(seed=0)
    for _ in range(len(env.families)):
        calls = []
        done = False
        while not done:
            sla = env._sla(None)
            replay = TranscriptState(server_env, env.task, calls, budget=env.state.budget)
            robs, rmasks = replay.observation(sla, env.clock.now())
            for k in obs:
                np.testing.assert_array_equal(robs[k], obs[k], err_msg=k)
            assert rmasks.reasons == env.current_masks.reasons
            assert replay.knowledge.to_dict() == env.knowledge.to_dict()
            s, p = expert.plan(env.view())
            assert expert.plan(replay.view(rmasks)) == (s, p)  # the rule-based fallback reads the same view
            obs, _r, term, trunc, info = env.step(env.encode_action(s, p))
            t = info[STEP_TRACE]
            payload = (
                env.state.history[-1].payload if t["result_code"] == "OK" and not t["fallback_used"] else {}
            )
            calls.append(TranscriptCall(t["skill"], t["args"], t["result_code"], payload, t["fallback_used"]))
            done = term or trunc
        obs, _ = env.reset()
