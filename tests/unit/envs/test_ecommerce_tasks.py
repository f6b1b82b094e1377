"""Task generator, goal DAG validity, quantile map, observation builder and prototypes."""

from __future__ import annotations

import numpy as np
import pytest

from agentic_ray.envs.agent_task_env import AgentTaskEnv, AgentTaskEnvConfig
from agentic_ray.envs.ecommerce import (
    ObservationBuilder,
    ecommerce_contracts,
    ecommerce_specs,
    fit_quantiles,
    load_quantiles,
    sla_arrays,
)
from agentic_ray.envs.ecommerce_tasks import (
    FAMILIES,
    MAX_GOALS,
    VALIDATION_SEED_BASE,
    draw_training_seed,
    generate_task,
    validation_seeds,
)
from agentic_ray.envs.expert import ScriptedExpert
from agentic_ray.envs.goal_dag import Goal, goal_graph, plan_validity
from agentic_ray.envs.graph_spec import observation_space
from agentic_ray.envs.prototypes import ExpertStep, load_prototypes, mine_prototypes
from agentic_ray.envs.quantile_map import QuantileMap
from agentic_ray.skills.domains.ecommerce.world import ShopWorld

EXPECTED_OPT = {
    "address_error": 4,
    "quality_refund": 4,
    "logistics_exception": 4,
    "wrong_item_exchange": 5,
    "late_delivery": 3,
    "cancellation": 4,
    "stock_inquiry": 2,
}


@pytest.mark.parametrize("family", FAMILIES)
def test_tasks_are_reproducible_and_well_formed(family: str) -> None:
    for seed in (0, 1, 17, VALIDATION_SEED_BASE + 3):
        w1, t1 = generate_task(family, seed)
        w2, t2 = generate_task(family, seed)
        assert w1.to_dict() == w2.to_dict() and t1 == t2
        assert t1.family == family and t1.optimal_steps == len(t1.goals) <= MAX_GOALS
        if family == "composite":
            assert len(t1.subtasks) == 2 and t1.optimal_steps == sum(EXPECTED_OPT[f] for f in t1.subtasks)
        else:
            assert t1.optimal_steps == EXPECTED_OPT[family]
        g = goal_graph(t1.goals)
        assert g.number_of_nodes() == len(t1.goals)
        for goal in t1.goals:  # every referenced entity exists in the world
            if "order_id" in goal.args:
                assert w1.order(goal.args["order_id"]) is not None
            if "sku" in goal.args:
                assert w1.product(goal.args["sku"]) is not None
            if "user_id" in goal.args:
                assert goal.args["user_id"] == w1.user.id
        for sku in t1.protected_skus:
            assert w1.product(sku).stock >= 25  # type: ignore[union-attr]
    assert generate_task(family, 1)[0].to_dict() != generate_task(family, 2)[0].to_dict()


def test_validation_split_is_disjoint_and_fixed() -> None:
    val = {s for f in FAMILIES for s in validation_seeds(f)}
    assert len(val) == 25 * len(FAMILIES) and min(val) >= VALIDATION_SEED_BASE
    rng = np.random.default_rng(0)
    assert all(draw_training_seed(rng) < VALIDATION_SEED_BASE for _ in range(1000))
    assert validation_seeds("cancellation", 3) == validation_seeds("cancellation", 3)


def test_task_preconditions_and_risk_rules() -> None:
    pre = {
        c.name: [p.after for p in c.preconditions] for c in ecommerce_contracts().skills if c.preconditions
    }
    _, t = generate_task("quality_refund", 4, pre)
    assert t.preconditions == {"refund.trigger": ["inventory.check"]}
    assert [r.skill for r in t.risk_rules] == ["refund.trigger"] and t.risk_rules[
        0
    ].before == "inventory.check"


def test_plan_validity() -> None:
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


def test_quantile_map_is_monotone_and_bounded() -> None:
    rng = np.random.default_rng(0)
    qm = QuantileMap.fit({"x": rng.lognormal(0, 2, 5000), "z": np.zeros(100)})
    xs = np.linspace(-1, 1000, 2000)
    y = qm("x", xs)
    assert np.all(np.diff(y) >= 0) and y.min() == 0.0 and y.max() == 1.0
    assert abs(qm.scalar("x", 1.0) - 0.5) < 0.05  # the median of lognormal(0, 2) is 1: CDF, not min-max
    assert qm.scalar("z", 0.0) == 0.5 and qm.scalar("z", 1.0) == 1.0
    shipped = load_quantiles()
    assert set(shipped.names) >= {"balance", "latency_ms", "error_rate", "stock", "order_total"}
    small = fit_quantiles(n_tasks=50, seed=1, path=None)
    assert set(small.names) == set(shipped.names)
    assert (
        0.2
        < shipped.scalar(
            "order_total",
            float(np.median([o.total for f in FAMILIES for o in generate_task(f, 3)[0].orders])),
        )
        < 0.9
    )


def test_observation_builder_outside_the_env_matches_the_env() -> None:
    env = AgentTaskEnv()
    expert = ScriptedExpert()
    obs, _ = env.reset(seed=3, options={"family": "wrong_item_exchange"})
    obs, *_ = env.step(expert.act(env))
    spec, layout = ecommerce_specs()
    builder = ObservationBuilder(ecommerce_contracts(), spec, layout)
    world = ShopWorld.from_dict(env.world.to_dict())  # e.g. a Serve request carrying the world as JSON
    out = builder.build(world, env.task, env.state, env.executor.sla_stats(), skill_mask=obs["skill_mask"])
    assert observation_space(spec, layout).contains(out)
    for k in obs:
        np.testing.assert_array_equal(out[k], obs[k], err_msg=k)
    # Without a mask the builder computes one (no soft/business context beyond the state).
    out2 = builder.build(world, env.task, env.state, sla_arrays(env.executor.sla_stats(), env.skills))
    np.testing.assert_array_equal(out2["skill_mask"], obs["skill_mask"])
    # Goal edges and features encode the DAG: the exchange needs the check, targets the right product.
    g = env.task.goals
    ei, m = out["goal__requires__goal_ei"], out["goal__requires__goal_mask"]
    edges = {(int(a), int(b)) for a, b, k in zip(ei[0], ei[1], m, strict=True) if k}
    assert edges == {(0, 1), (1, 2), (2, 3), (3, 4)}
    assert out["goal_x"][0, layout.num_skills + 2] == 1.0  # check done
    assert out["goal_x"][1, layout.num_skills + 1] == 1.0  # exchange ready
    assert g[1].args["sku"] == env.builder.node_ids["product"][int(out["goal__targets__product_ei"][1, 1])]


def test_specs_are_consistent_with_contracts() -> None:
    spec, layout = ecommerce_specs()
    assert layout.num_skills == 13 and layout.pointer_node_types == ("user", "product", "order")
    assert layout.skills[layout.skill_index("refund.trigger")].pointer_types == ("order", "product")
    assert layout.skills[layout.skill_index("refund.trigger")].numeric_count == 1
    assert layout.max_pointer == spec.max_nodes["product"]
    assert {r.key for r in spec.relations} >= {
        "user__uses__tool",
        "tool__operates__product",
        "product__in__session",
        "tool__depends__tool",
        "session__of__user",
        "goal__requires__goal",
        "goal__needs__tool",
    }
    _, playout = ecommerce_specs([p.skill for p in load_prototypes()])
    assert "proto_mask" in observation_space(spec, playout).spaces


@pytest.mark.parametrize("family", ["quality_refund", "late_delivery", "composite"])
def test_stated_numeric_targets_are_the_expert_actions(family: str) -> None:
    """``GraphSpec.numeric_targets`` points at the goal features the policy copies: for every goal with a numeric
    target, the stated value is the expert's own numeric action for that goal (so a copy completes it)."""
    spec, layout = ecommerce_specs()
    nt = spec.numeric_targets
    assert nt is not None and nt.node_type == "goal" and nt.skill_col == 0
    env = AgentTaskEnv()
    seen = 0
    for seed in range(8):
        obs, _ = env.reset(seed=seed, options={"family": family})
        x = obs["goal_x"]
        for i, g in enumerate(env.task.goals):
            k = layout.skill_index(g.skill)
            assert x[i, nt.skill_col + k] == 1.0
            assert x[i, nt.flag_col] == float(bool(g.numeric))
            if g.numeric:
                expert = env.encode_action(g.skill, {**g.args, **g.numeric})
                assert nt.action_value(float(x[i, nt.value_col])) == pytest.approx(
                    float(expert["numeric"][0]), abs=1e-5
                )
                seen += 1
    assert seen >= 2


def test_prototypes_cover_every_expert_step() -> None:
    protos = load_prototypes()
    sigs = {(p.skill, p.enum) for p in protos}
    assert len(sigs) == len(protos) >= 8
    env = AgentTaskEnv(AgentTaskEnvConfig(split="validation", validation_per_family=2))
    expert = ScriptedExpert()
    env.reset(seed=0)
    steps = []
    for _ in range(2 * len(FAMILIES)):
        done = False
        while not done:
            skill, params = expert.plan(env)
            steps.append(env.describe_step(skill, params))
            assert (skill, steps[-1].enum) in sigs
            *_x, term, trunc, _ = env.step(env.encode_action(skill, params))
            done = term or trunc
        env.reset()
    _, layout = ecommerce_specs()
    mined = mine_prototypes(steps, layout, seed=0)
    assert {(p.skill, p.enum) for p in mined} == {(s.skill, s.enum) for s in steps}
    assert sum(p.support for p in mined) == len(steps)
    merged = mine_prototypes(steps, layout, n_prototypes=4, seed=0)
    assert len(merged) == 4 and sum(p.support for p in merged) == len(steps)
    with pytest.raises(ValueError):
        mine_prototypes([], layout)
    assert isinstance(steps[0], ExpertStep)
