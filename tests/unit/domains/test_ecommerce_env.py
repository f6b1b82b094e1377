"""The e-commerce domain in the generic env: partial information, lookups, masks and reasons, list and copied
arguments, how tasks end, risk modes and failure attribution."""

from __future__ import annotations

import numpy as np
import pytest

from agentic_ray.envs.agent_task_env import AgentTaskEnv, AgentTaskEnvConfig
from agentic_ray.graph_spec import ROOT_CAUSES
from agentic_ray.keys import EPISODE_RECORD, MASK_REASONS, STEP_TRACE


def _env(**kw) -> AgentTaskEnv:
    return AgentTaskEnv(AgentTaskEnvConfig(drift=False, **kw))


def _expert_until(env: AgentTaskEnv, skill: str) -> dict:
    """Run the expert until (and including) its first call of ``skill``; returns that step's info."""
    expert = env.domain.expert()
    for _ in range(30):
        s, p = expert.plan(env.view())
        *_x, info = env.step(env.encode_action(s, p))
        if s == skill:
            return info
    raise AssertionError(f"the expert never called {skill}")


def test_reset_shows_the_request_and_nothing_else() -> None:
    env = _env()
    obs, info = env.reset(seed=3, options={"family": "quality_refund"})
    order = env.task.request.mentioned[0].id
    assert env.knowledge.ids("order") == [order] and env.knowledge.fields("order", order) == {}
    assert env.knowledge.ids("user") == [] and env.knowledge.ids("product") == []
    assert obs["order_mask"].sum() == 1 and obs["user_mask"].sum() == 0 and obs["product_mask"].sum() == 0
    assert obs["order_x"][0, 0] == 1.0 and obs["order_x"][0, 1] == 0.0  # mentioned, nothing looked up
    assert obs["source_mask"].sum() == 0  # no number is known yet
    assert "email" in env.task.request.facts or "name" in env.task.request.facts
    assert order in info["request"]


def test_a_lookup_reveals_exactly_its_declared_entities_and_fields() -> None:
    env = _env()
    env.reset(seed=3, options={"family": "quality_refund"})
    info = _expert_until(env, "order.get")
    order = env.task.request.mentioned[0].id
    w = env.world.order(order)
    revealed = {tuple(r) for r in info[STEP_TRACE]["revealed"]}
    assert revealed == {("order", order), ("user", w.user_id)} | {("product", s) for s in w.skus}
    f = env.knowledge.fields("order", order)
    assert set(f) == {
        "user_id",
        "status",
        "total",
        "refunded",
        "tracking",
        "days_late",
        "shipping_fee",
        "placed_days_ago",
        "revision",
        "items",
    }
    assert f["total"] == w.total and f["items"] == w.skus
    for it in w.items:  # items come with price and category only: stock needs inventory.check
        assert env.knowledge.fields("product", it.sku) == {
            "price": it.price,
            "category": env.world.product(it.sku).category,
        }


def test_identification_by_email_or_name_and_the_any_of_precondition() -> None:
    env = _env()
    for seed in range(40):
        env.reset(seed=seed, options={"family": "address_error"})
        if "name" in env.task.request.facts:
            break
    assert "email" not in env.task.request.facts
    obs = env._observe()
    k = env.layout
    assert obs["skill_mask"][k.skill_index("user.find")] == 0  # hard: the request gives no email
    assert any("no email" in r for r in env.current_masks.reasons["user.find"])
    assert obs["skill_mask"][k.skill_index("lookup_customer_by_name")] == 1
    assert obs["skill_mask"][k.skill_index("order.get")] == 0  # any_of: the customer is not identified yet
    obs, *_x, info = env.step(env.encode_action("lookup_customer_by_name", {}))
    assert info[STEP_TRACE]["result_code"] == "OK"
    assert obs["skill_mask"][k.skill_index("order.get")] == 1


def test_same_precondition_narrows_the_pointer_and_the_hard_mask() -> None:
    env = _env()
    env.reset(seed=3, options={"family": "quality_refund"})
    _expert_until(env, "order.get")
    refund, check = env.layout.skill_index("refund.trigger"), env.layout.skill_index("inventory.check")
    obs = env._observe()
    assert obs["skill_mask"][refund] == 0 and obs["skill_mask"][check] == 1
    assert any("inventory.check" in r for r in env.current_masks.reasons["refund.trigger"])
    sku = env.task.goals[0].args["sku"]
    obs, *_x, info = env.step(env.encode_action("inventory.check", {"sku": sku}))
    assert info[STEP_TRACE]["result_code"] == "OK" and obs["skill_mask"][refund] == 1
    # Only the checked product is a valid refund target (pointer slot 1 = sku).
    valid = np.flatnonzero(obs["pointer_mask"][refund, 1, : env.layout.max_pointer])
    assert [env.builder.node_ids["product"][j] for j in valid] == [sku]


def test_masked_shortcut_is_a_high_risk_attempt_and_never_runs() -> None:
    env = _env()
    env.reset(seed=3, options={"family": "quality_refund"})
    _expert_until(env, "order.get")
    g = env.task.goals[1]
    a = env.encode_action("refund.trigger", dict(g.args, **g.numeric))
    obs, r, term, _trunc, info = env.step(a)
    tr = info[STEP_TRACE]
    assert tr["result_code"] == "PRECONDITION_FAILED" and tr["masked"] and r == -3.0 and not term
    assert env.world.order(g.args["order_id"]).refunded == 0.0  # never executed
    assert env._steps[-1].high_risk and env._steps[-1].risk_weight == 1.0
    assert obs["reflection"][ROOT_CAUSES.index("risk_violation")] == 1.0 and obs["reflection"].sum() == 1.0


def test_soft_risk_mode_lets_the_shortcut_run_with_a_delayed_consequence() -> None:
    consequences, shortcuts = 0, 0
    env = _env(risk_mode="soft")
    for seed in range(40):
        env.reset(seed=seed, options={"family": "quality_refund"})
        _expert_until(env, "order.get")
        g = next(g for g in env.task.goals if g.skill == "refund.trigger")
        refund = env.layout.skill_index("refund.trigger")
        assert env._observe()["skill_mask"][refund] == 1  # the safety check is lifted
        *_x, _r, term, trunc, info = env.step(env.encode_action("refund.trigger", dict(g.args, **g.numeric)))
        assert info[STEP_TRACE]["result_code"] == "OK" and env._steps[-1].high_risk
        shortcuts += 1
        done = term or trunc
        expert = env.domain.expert()
        while not done:
            *_x, term, trunc, info = env.step(env.encode_action(*expert.plan(env.view())))
            done = term or trunc
        rec = info[EPISODE_RECORD]
        # Without the check goal the shortcut is the optimal plan (one step fewer than the safe one).
        assert rec["completed"] and len(rec["steps"]) == rec["optimal_steps"] == env.task.optimal_steps
        consequences += len(rec["consequences"])
        for c in rec["consequences"]:
            assert c["skill"] == "refund.trigger" and c["kind"] == "chargeback"
    assert 0.2 * shortcuts <= consequences <= 0.6 * shortcuts  # the contract's probability is 0.4


def test_numbers_are_copied_from_revealed_fields_only() -> None:
    env = _env()
    env.reset(seed=3, options={"family": "quality_refund"})
    info = _expert_until(env, "refund.trigger")
    g = env.task.goals[1]
    assert (
        info[STEP_TRACE]["result_code"] == "OK" and info[STEP_TRACE]["args"]["amount"] == g.numeric["amount"]
    )
    act = env.codec.encode("refund.trigger", dict(g.args, **g.numeric), env.knowledge)
    c = int(act["source"][0]) - 1
    assert c >= 0 and env.codec.source_field(c) == ("product", "price")
    # No feature holds the target in action units: the price is a quantile like any other number.
    spec = env.graph_spec
    assert all(s.field in ("price", "stock", "total", "shipping_fee") for s in spec.numeric_sources)


def test_list_argument_return_of_the_hinted_items() -> None:
    env = _env()
    env.reset(seed=2, options={"family": "multi_item_return"})
    info = _expert_until(env, "return.create")
    g = env.task.goals[0]
    assert (
        info[STEP_TRACE]["result_code"] == "OK"
        and sorted(info[STEP_TRACE]["args"]["item_ids"]) == g.args["item_ids"]
    )
    o = env.world.order(g.args["order_id"])
    assert o.returns and o.returns[0]["items"] == g.args["item_ids"]
    # The goal carries the category hint, never the ids.
    hint_col = env.layout.num_skills + 4 + env.layout.enum_max
    cats = env.domain.schema.goal_hints[0].choices
    assert env._observe()["goal_x"][0, hint_col + cats.index(g.hints["category"])] == 1.0


def test_handoff_is_the_right_end_of_a_dispute_and_a_failure_elsewhere() -> None:
    env = _env()
    env.reset(seed=1, options={"family": "chargeback_dispute"})
    expert = env.domain.expert()
    done = False
    while not done:
        *_x, r, term, trunc, info = env.step(env.encode_action(*expert.plan(env.view())))
        done = term or trunc
    assert info[EPISODE_RECORD]["completed"] and info[STEP_TRACE]["skill"] == "human.handoff"
    env.reset(seed=1, options={"family": "late_delivery"})
    _, r, term, _, info = env.step(env.encode_action("human.handoff", {"reason": "user_request"}))
    rw = env.config.rewards
    assert term and info[EPISODE_RECORD]["failed"] and r == 1.0 + rw.redundant + rw.failure
    env.reset(seed=1, options={"family": "chargeback_dispute"})
    _expert_until(env, "user.find")
    *_x, info = env.step(
        env.encode_action("human.handoff", {"user_id": env.knowledge.ids("user")[0], "reason": "complex"})
    )
    assert info[EPISODE_RECORD]["failed"]  # a handoff with the wrong reason does not solve the dispute


def test_answer_action_must_tell_the_revealed_value() -> None:
    env = _env()
    env.reset(seed=5, options={"family": "stock_inquiry"})
    sku = env.task.request.mentioned[0].id
    env.step(env.encode_action("inventory.check", {"sku": sku}))
    stock = env.knowledge.fields("product", sku)["stock"]
    *_x, info = env.step(env.encode_action("answer.stock", {"sku": sku, "quantity": stock + 1}))
    assert info[STEP_TRACE]["result_code"] == "OK" and info[EPISODE_RECORD]["failed"]  # told a wrong number
    env.reset(seed=5, options={"family": "stock_inquiry"})
    env.step(env.encode_action("inventory.check", {"sku": sku}))
    *_x, info = env.step(env.encode_action("answer.stock", {"sku": sku, "quantity": stock}))
    assert info[EPISODE_RECORD]["completed"]


def test_stale_information_and_wrong_entity_attribution() -> None:
    env = _env()
    env.reset(seed=3, options={"family": "wrong_item_exchange"})
    expert = env.domain.expert()
    while (step := expert.plan(env.view()))[0] != "exchange.create":
        env.step(env.encode_action(*step))
    sku = env.task.goals[0].args["sku"]
    env.world.product(sku).stock = 0  # sold out after the check: the agent's knowledge is stale
    *_x, info = env.step(env.encode_action(*step))
    assert (
        info[STEP_TRACE]["result_code"] == "CONFLICT"
        and info[STEP_TRACE]["root_cause"] == "stale_information"
    )
    assert info[EPISODE_RECORD]["failed"]  # and here unrecoverable: nothing left to exchange
    # After a stale-information failure the expert's correction is the re-read (the minimal experiment).
    from agentic_ray.domains.protocol import LastStep

    env.reset(seed=3, options={"family": "wrong_item_exchange"})
    _expert_until(env, "inventory.check")
    order = env.task.request.mentioned[0].id
    env.state.last = LastStep(
        "exchange.create", {"order_id": order, "sku": sku}, "CONFLICT", "stale_information"
    )
    # order.get needs the customer identified first (masked now), so the re-read is the stock check.
    assert not env.view().allowed("order.get")
    assert env.domain.expert().plan(env.view()) == ("inventory.check", {"sku": sku})
    env.reset(seed=3, options={"family": "wrong_item_exchange"})
    _expert_until(env, "user.find")
    other = next(o.id for o in env.world.orders if o.id not in env.task.relevant)
    env.knowledge.mention("order", other)  # an order the request is not about, known to the agent
    env._observe()
    *_x, info = env.step(env.encode_action("express.contact", {"order_id": other, "action": "trace"}))
    if info[STEP_TRACE]["result_code"] != "OK":
        assert info[STEP_TRACE]["root_cause"] == "wrong_entity"


def test_hard_rule_from_knowledge_and_reasons() -> None:
    env = _env()
    env.reset(seed=0, options={"family": "address_error"})
    _expert_until(env, "user.find" if "email" in env.task.request.facts else "lookup_customer_by_name")
    k = env.layout.skill_index("order.update_address")
    obs = env._observe()
    assert obs["skill_mask"][k] == 0
    why = env.current_masks.reasons["order.update_address"]
    assert any(r.startswith("hard") for r in why) and any(r.startswith("business") for r in why)
    obs, *_x, info = env.step(env.encode_action("user.verify", {"user_id": env.knowledge.ids("user")[0]}))
    assert env.knowledge.fields("user", env.knowledge.ids("user")[0])["verified"] is True
    assert obs["skill_mask"][k] == 1 and "order.update_address" not in info[MASK_REASONS]


def test_tool_use_edges_count_only_executed_calls() -> None:
    env = _env()
    obs, _ = env.reset(seed=4, options={"family": "stock_inquiry"})
    sku = env.task.request.mentioned[0].id
    a = env.encode_action("answer.stock", {"sku": sku, "quantity": 3})
    obs, *_ = env.step(a)  # masked: not executed
    assert obs["session__uses__tool_mask"].sum() == 0 and env.state.calls.sum() == 0
    obs, *_ = env.step(env.encode_action("inventory.check", {"sku": sku}))
    k = env.layout.skill_index("inventory.check")
    assert obs["session__uses__tool_mask"].sum() == 1 and obs["session__uses__tool_ei"][1, 0] == k
    assert obs["tool_x"][k, env.layout.num_skills + 9] == pytest.approx(0.2)  # calls this episode / 5


def test_free_numeric_squash_is_bounded_by_the_revealed_total() -> None:
    env = _env()
    env.reset(seed=3, options={"family": "quality_refund"})
    _expert_until(env, "inventory.check")
    g = env.task.goals[1]
    o = env.world.order(g.args["order_id"])
    a = env.encode_action("refund.trigger", dict(g.args, amount=1.0))
    a["source"] = np.array([0])
    a["numeric"] = np.array([50.0], dtype=np.float32)  # outside the Box: clipped; max_from: the order total
    _, _r, term, _, info = env.step(a)
    tr = info[STEP_TRACE]
    assert tr["result_code"] == "OK" and any("clipped" in w for w in tr["warnings"])
    assert o.total * 0.999 <= tr["args"]["amount"] <= o.total
    assert (
        tr["goals_satisfied"] == [] and term and info[EPISODE_RECORD]["failed"]
    )  # the owed refund is now impossible


def test_obs_only_rule_does_not_solve_most_tasks() -> None:
    from agentic_ray.envs.baseline_policies import ObsOnlyRulePolicy

    env = AgentTaskEnv(AgentTaskEnvConfig(split="validation", validation_per_family=5))
    rule = ObsOnlyRulePolicy(env.graph_spec, env.layout)
    obs, _ = env.reset(seed=0)
    wins, n = 0, 5 * len(env.families)
    for _ in range(n):
        done = False
        while not done:
            obs, _, term, trunc, info = env.step(rule.act(obs))
            done = term or trunc
        wins += info[EPISODE_RECORD]["completed"]
        obs, _ = env.reset()
    assert wins / n <= 0.5, wins / n
