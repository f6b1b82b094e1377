"""The shop with a memory (issue 27): e-commerce tasks where the customer means an order they talked about in an
earlier conversation, or named early in this one and need after the short-term window dropped it. Through the
generic env with the real memory skills, the real embedded Qdrant and the shipped model's vectors."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest

from agentic_ray.domains import get_domain
from agentic_ray.domains.ecommerce_memory.tasks import PLACES, RECALL_FACT
from agentic_ray.domains.ecommerce_memory.world import DELIVERED_TO
from agentic_ray.domains.protocol import Task
from agentic_ray.envs.agent_task_env import AgentTaskEnv, AgentTaskEnvConfig
from agentic_ray.eval.metrics import evaluate
from agentic_ray.keys import CONTEXT_MEMORY_FACTS, EPISODE_RECORD
from agentic_ray.memory.memory_skills import HIT_AGE, HIT_SCORE, SEARCH, WRITE
from agentic_ray.memory.short_term_window import DEFAULT_K
from agentic_ray.rewards.episode_record import EpisodeRecord
from agentic_ray.rewards.layers.memory_layer import MemoryLayer
from agentic_ray.settings import load_settings
from tests.helpers.memory_episodes import equal_from_window_end, run_episode, same_observation

REPO = Path(__file__).resolve().parents[3]
NAME = "ecommerce_memory"
D = get_domain(NAME)
LAST_TIME, SAID_EARLIER, SAME_PLACE = "order_from_last_time", "order_said_earlier", "same_place_as_last_time"
IDENTIFY = ("user.find", "lookup_customer_by_name")
CANCEL = ["order.get", "order.cancel", "erp.sync", "sms.send"]
ADDRESS = ["order.update_address", "erp.sync", "sms.send"]
EXCHANGE = ["inventory.check", "exchange.create", "express.contact", "waybill.generate", "sms.send"]


def _env(**kw: Any) -> AgentTaskEnv:
    return AgentTaskEnv(AgentTaskEnvConfig(domain=NAME, **kw))


def _skills(steps: list[Any]) -> list[str]:
    return [info["trace"]["skill"] for _, _, info in steps[1:]]


def _other_order_meant(task: Task) -> Task:
    """The same request, but the customer means another of the orders they named (goals and key fact follow)."""
    meant = task.key_facts[0]["value"]
    other = next(
        d for d in task.key_facts[0]["distractors"] if any(m.id == d for m in task.request.mentioned)
    )
    goals = tuple(
        dataclasses.replace(g, args={**g.args, "order_id": other}) if g.args.get("order_id") == meant else g
        for g in task.goals
    )
    rest = [meant if d == other else d for d in task.key_facts[0]["distractors"]]
    return dataclasses.replace(
        task, goals=goals, key_facts=({**task.key_facts[0], "value": other, "distractors": rest},)
    )


def test_tasks_are_deterministic_and_carry_their_memory_and_distractors() -> None:
    for family in (LAST_TIME, SAID_EARLIER):
        (w1, t1), (w2, t2) = D.make_task(family, 11), D.make_task(family, 11)
        assert w1.to_dict() == w2.to_dict() and t1 == t2
        assert D.world_from_dict(w1.to_dict()).to_dict() == w1.to_dict()
        (fact,) = t1.key_facts
        meant, look_alikes = fact["value"], fact["distractors"]
        assert meant == next(g for g in t1.goals if g.skill == "order.cancel").args["order_id"]
        # distractor orders: unshipped or delivered look-alikes of the same customer, each holding a product of the
        # meant order's first product's category (similar products)
        assert len(look_alikes) >= 1 + (family == SAID_EARLIER) and meant not in look_alikes
        cat = {o.id: w1.product(o.items[0].sku).category for o in w1.orders}
        assert all(cat[d] == cat[meant] for d in look_alikes)
        # long-term memory: the customer's earlier conversations about the look-alikes, another customer's memory
        mine = {e["id"] for h in w1.history if h["customer"] == w1.customer for e in h["entities"]}
        assert set(look_alikes) <= mine
        assert any(h["customer"] != w1.customer for h in w1.history)
    _, t = D.make_task(SAID_EARLIER, 11)
    named = {m.id for m in t.request.mentioned if m.type == "order"}
    assert t.key_facts[0]["value"] in named and len(named & set(t.key_facts[0]["distractors"])) >= 1
    assert t.short_term_window == DEFAULT_K


def test_memory_skills_follow_the_shops_and_are_masked_until_the_customer_is_identified() -> None:
    names = [s.name for s in D.contracts().skills]
    assert names[-2:] == [SEARCH, WRITE]
    assert names[:-2] == [s.name for s in get_domain("ecommerce").contracts().skills]
    env = _env()
    env.reset(seed=0, options={"family": LAST_TIME, "task_seed": 5})
    assert not env.skill_mask[names.index(SEARCH)]
    _, _, _, _, info = env.step(env.encode_action(*D.expert().plan(env.view())))  # identify the customer
    assert info["trace"]["skill"] in IDENTIFY and env.skill_mask[names.index(SEARCH)]


@pytest.mark.parametrize("family", [LAST_TIME, SAID_EARLIER, SAME_PLACE])
def test_the_expert_solves_every_validation_task_with_memory_at_the_optimal_length(family: str) -> None:
    env = _env()
    records = []
    for seed in D.validation_seeds(family, 10):
        steps = run_episode(env, family, seed)
        assert env.task is not None
        (fact,) = env.task.key_facts
        identify = "user.find" if "email" in env.task.request.facts else "lookup_customer_by_name"
        plan = {
            LAST_TIME: [identify, SEARCH, WRITE, *CANCEL],
            SAID_EARLIER: [
                identify,
                WRITE,
                *EXCHANGE,
                SEARCH,
                *CANCEL,
            ],  # the write while the request names it
            SAME_PLACE: [
                identify,
                "user.verify",
                SEARCH,
                *ADDRESS,
            ],  # a value, not an entity: nothing to write
        }[family]
        rec = steps[-1][2][EPISODE_RECORD]
        assert _skills(steps) == plan and rec["completed"] and len(plan) == env.task.optimal_steps
        first_use = "order.update_address" if family == SAME_PLACE else "order.get"
        assert _skills(steps).index(first_use) == fact["needed_turn"]
        if WRITE in plan:
            write = steps[1 + _skills(steps).index(WRITE)][2]["trace"]["args"]
            assert (write["order_id"], write["note"]) == (fact["value"], env.task.request.facts[RECALL_FACT])
        assert CONTEXT_MEMORY_FACTS in rec["context"]
        credit = MemoryLayer().score(EpisodeRecord.from_dict(rec))  # L4: on the first use, the recall's reuse
        assert credit[fact["needed_turn"]] > 0.5
        assert credit.sum() == pytest.approx(credit[fact["needed_turn"]])
        records.append(rec)
    m = evaluate(records)
    assert (m.completion, m.entity_recall_at_5, m.entity_recall_at_5_n, m.forgetting) == (1.0, 1.0, 10, 0.0)


@pytest.mark.parametrize("seed", range(8))
def test_the_best_memory_hit_is_the_order_the_customer_talked_about_last_time(seed: int) -> None:
    env = _env()
    env.reset(seed=0, options={"family": LAST_TIME, "task_seed": seed})
    env.step(env.encode_action(*D.expert().plan(env.view())))
    env.step(env.encode_action(SEARCH, {"query": env.task.request.facts[RECALL_FACT]}))
    k, (fact,) = env.knowledge, env.task.key_facts
    scores = {o: k.fields("order", o)[HIT_SCORE] for o in k.ids("order")}
    assert len(scores) >= 2 and max(scores, key=scores.__getitem__) == fact["value"]
    assert set(scores) <= {o.id for o in env.world.orders}  # another customer's memory stays out
    ages = {o: k.fields("order", o)[HIT_AGE] for o in scores}
    assert ages[fact["value"]] < 24 < min(a for o, a in ages.items() if o != fact["value"])


@pytest.mark.parametrize("seed", [3, 8])
def test_the_named_order_is_out_of_the_window_when_needed_and_without_memory_no_policy_tells_which(
    seed: int,
) -> None:
    """Two tasks that differ only in which named order the customer means, played with the same actions and the
    memory skills masked: their observations differ while the request is in the window, and are equal from the
    step it left until a tool result tells them apart (the read of the meant order). So a policy without memory
    acts alike on both, and the calls that complete one fail the other."""
    env = _env()
    steps = run_episode(env, SAID_EARLIER, seed)
    assert env.task is not None and env.knowledge is not None
    search = _skills(steps).index(SEARCH)
    assert search >= DEFAULT_K and not env.knowledge.mentioned  # the window had dropped the request by then
    assert 5 <= env.task.key_facts[0]["needed_turn"] - env.task.key_facts[0]["stated_turn"] <= 10
    plain = [
        a
        for a, s in zip([x for _, x, _ in steps[1:]], _skills(steps), strict=True)
        if s not in (SEARCH, WRITE)
    ]
    a, b = _env(skills_off=[SEARCH, WRITE]), _env(skills_off=[SEARCH, WRITE])
    steps_a = run_episode(a, SAID_EARLIER, seed, actions=plain)
    steps_b = run_episode(b, SAID_EARLIER, seed, given=_other_order_meant, actions=plain)
    assert a.task is not None and b.task is not None and a.task.key_facts != b.task.key_facts
    assert not same_observation(
        steps_a[0][0], steps_b[0][0]
    )  # in the window, the goal links to the meant order
    compared = equal_from_window_end(steps_a, steps_b, DEFAULT_K, ("order.get",))
    assert compared >= 1  # the last exchange step: the policy must choose the order to read with no clue
    assert steps_a[-1][2][EPISODE_RECORD]["completed"]  # a's calls solve a ...
    cancel_b = next(info["trace"] for _, _, info in steps_b[1:] if info["trace"]["skill"] == "order.cancel")
    assert (
        cancel_b["result_code"] == "OK" and not cancel_b["goals_satisfied"]
    )  # ... and cancel the wrong order in b
    assert EPISODE_RECORD not in steps_b[-1][2] or not steps_b[-1][2][EPISODE_RECORD]["completed"]


def test_memory_finds_the_named_order_only_if_it_was_written_while_named() -> None:
    seed = D.validation_seeds(SAID_EARLIER, 1)[0]
    seen = {}
    for off in ([], [WRITE]):
        env = _env(skills_off=off)
        run_episode(env, SAID_EARLIER, seed)
        assert env.knowledge is not None and env.task is not None
        k, meant = env.knowledge, env.task.key_facts[0]["value"]
        hits = {o: k.fields("order", o) for o in k.ids("order") if HIT_SCORE in k.fields("order", o)}
        seen[bool(off)] = (meant, hits)
    meant, hits = seen[False]
    assert max(hits, key=lambda o: hits[o][HIT_SCORE]) == meant
    assert hits[meant][HIT_AGE] < 1.0 < min(h[HIT_AGE] for o, h in hits.items() if o != meant)
    meant, hits = seen[True]  # without the write: the earlier conversations' orders only, not the meant one
    assert hits and meant not in hits


def test_the_memory_ecommerce_config_is_the_memory_config_on_the_shop() -> None:
    s, base = (load_settings(REPO / "configs" / f) for f in ("memory_ecommerce.yaml", "memory.yaml"))
    assert s.env.domain == NAME and s.rewards is not None and "memory" in s.rewards.enabled_layers()
    assert s.model_dump(exclude={"name", "env"}) == base.model_dump(exclude={"name", "env"})
    assert s.env.model_dump(exclude={"domain"}) == base.env.model_dump(exclude={"domain"})


@pytest.mark.parametrize("seed", range(6))
def test_the_same_place_as_last_time_is_where_the_most_recent_earlier_order_went(seed: int) -> None:
    """same_place_as_last_time: the search reveals where each of the customer's earlier orders went (memory holds
    it) and how old each memory is; the recent one's place is the meant address source, the older one (the older
    address) the other; another customer's memory stays out."""
    w, task = D.make_task(SAME_PLACE, seed)
    (fact,) = task.key_facts
    assert fact["slot"] == "source" and fact["distractors"] == [next(p for p in PLACES if p != fact["value"])]
    assert "source" in next(g for g in task.goals if g.skill == "order.update_address").hidden_args
    assert D.world_from_dict(w.to_dict()).to_dict() == w.to_dict()
    env = _env()
    env.reset(seed=0, options={"family": SAME_PLACE, "task_seed": seed})
    env.step(env.encode_action(*D.expert().plan(env.view())))
    _, _, _, _, info = env.step(env.encode_action(SEARCH, {"query": task.request.facts[RECALL_FACT]}))
    assert info["trace"]["result_code"] == "OK"
    k = env.knowledge
    places = {o: k.fields("order", o) for o in k.ids("order") if DELIVERED_TO in k.fields("order", o)}
    assert len(places) == 2 and set(places) <= {o.id for o in env.world.orders}
    assert {p[DELIVERED_TO] for p in places.values()} == set(PLACES)
    recent = min(places, key=lambda o: places[o][HIT_AGE])
    assert places[recent][DELIVERED_TO] == fact["value"] and places[recent][HIT_AGE] < 24
    assert max(p[HIT_AGE] for p in places.values()) > 72


def test_without_memory_no_policy_tells_which_place_the_customer_means() -> None:
    """Two same_place_as_last_time tasks that differ only in the place the customer means, played with the same
    calls and the memory skills masked: every observation is equal, so a policy without memory acts alike on both,
    and the address change that completes one satisfies nothing in the other."""
    seed = D.validation_seeds(SAME_PLACE, 1)[0]
    steps = run_episode(_env(), SAME_PLACE, seed)
    plain = [x for (_, x, _), s in zip(steps[1:], _skills(steps), strict=True) if s != SEARCH]

    def other_place(task: Task) -> Task:
        (fact,) = task.key_facts
        other = fact["distractors"][0]
        goals = tuple(
            dataclasses.replace(g, args={**g.args, "source": other}) if "source" in g.args else g
            for g in task.goals
        )
        return dataclasses.replace(
            task, goals=goals, key_facts=({**fact, "value": other, "distractors": [fact["value"]]},)
        )

    a, b = _env(skills_off=[SEARCH, WRITE]), _env(skills_off=[SEARCH, WRITE])
    steps_a = run_episode(a, SAME_PLACE, seed, actions=plain)
    steps_b = run_episode(b, SAME_PLACE, seed, given=other_place, actions=plain)
    assert a.task is not None and b.task is not None and a.task.key_facts != b.task.key_facts
    for (oa, _, ia), (ob, _, ib) in zip(steps_a, steps_b, strict=True):
        if ia and ia["trace"]["skill"] == "order.update_address":  # the call made on equal observations
            assert ia["trace"]["goals_satisfied"] == ["address"] and ib["trace"]["goals_satisfied"] == []
            break
        assert same_observation(oa, ob)
    else:
        raise AssertionError("no address change")
    assert steps_a[-1][2][EPISODE_RECORD]["completed"]
