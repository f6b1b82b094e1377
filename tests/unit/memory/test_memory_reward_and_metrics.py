"""L4 memory maths against loop references, the layer, and Entity Recall@5 / forgetting on hand-built episodes."""

from __future__ import annotations

import numpy as np
import pytest

from agentic_ray.eval.memory_metrics import entity_recall_at_k, forgetting
from agentic_ray.keys import CONTEXT_MEMORY_FACTS
from agentic_ray.memory.functional import freshness, memory_step_credit
from agentic_ray.memory.memory_episode import FactEvent, KeyFact, MemoryEpisode
from agentic_ray.rewards.episode_record import EpisodeRecord
from agentic_ray.rewards.layers import LAYER_CLASSES, build_layer
from agentic_ray.rewards.reward_pool_config import default_layers
from tests.unit.rewards.records import record, step


def _use(turn: int, slot: str, value: str, at_h: float = 0.0) -> FactEvent:
    return FactEvent(turn=turn, slot=slot, kind="use", value=value, at_h=at_h)


def _write(turn: int, slot: str, value: str) -> FactEvent:
    return FactEvent(turn=turn, slot=slot, kind="write", value=value)


def _ask(turn: int, slot: str) -> FactEvent:
    return FactEvent(turn=turn, slot=slot, kind="ask")


# A: the order id is reused on time; the address is asked for again, then used (recalled, but forgotten first).
EP_A = MemoryEpisode(
    facts=[
        KeyFact(slot="order_id", value="o1", stated_turn=0, needed_turn=6, confirmed_at_h=0.0),
        KeyFact(slot="address", value="a7", stated_turn=1, needed_turn=8, confirmed_at_h=1.0),
    ],
    events=[_use(6, "order_id", "o1", at_h=10.0), _ask(8, "address"), _use(9, "address", "a7", at_h=12.0)],
)
# B: the item is first used wrong, right only 7 turns after it was needed; the second order is never used.
EP_B = MemoryEpisode(
    facts=[
        KeyFact(slot="item", value="i3", stated_turn=0, needed_turn=3, confirmed_at_h=0.0),
        KeyFact(slot="order_id", value="o5", stated_turn=2, needed_turn=4, confirmed_at_h=0.0),
    ],
    events=[
        _use(3, "item", "i4"),
        _use(10, "item", "i3"),
        _use(1, "order_id", "o5"),
    ],  # turn 1: before stated
)


def test_entity_recall_at_5_and_forgetting_on_hand_built_episodes() -> None:
    assert entity_recall_at_k([EP_A, EP_B], k=5) == pytest.approx(2 / 4)
    assert entity_recall_at_k([EP_A, EP_B], k=7) == pytest.approx(3 / 4)  # the item at turn 10 = 3 + 7
    assert forgetting([EP_A, EP_B]) == pytest.approx(2 / 4)  # the address asked again, the item used wrong
    assert entity_recall_at_k([EP_A]) == 1.0 and forgetting([EP_A]) == 0.5
    assert entity_recall_at_k([MemoryEpisode()]) is None and forgetting([]) is None


def test_distractors_say_which_uses_of_the_slot_are_about_the_fact() -> None:
    """A task that also acts on another order: with the fact's look-alikes given, a use of the slot on an entity
    that is neither the fact's nor a look-alike is about something else (no wrong use, and not the deciding use of
    the L4 credit); a look-alike's use is forgetting; without distractors every use counts, as before."""
    fact = KeyFact(slot="order_id", value="o1", stated_turn=0, needed_turn=8, confirmed_at_h=0.0)
    events = [_use(3, "order_id", "x9"), _use(8, "order_id", "o1")]
    plain = MemoryEpisode(facts=[fact], events=events)
    scoped = MemoryEpisode(facts=[fact.model_copy(update={"distractors": ("o2", "o3")})], events=events)
    assert (entity_recall_at_k([plain]), forgetting([plain])) == (1.0, 1.0)
    assert memory_step_credit(plain, 10).sum() == 0.0  # the other order's use came first
    assert (entity_recall_at_k([scoped]), forgetting([scoped])) == (1.0, 0.0)
    assert memory_step_credit(scoped, 10)[8] == pytest.approx(1.0)
    wrong = MemoryEpisode(facts=scoped.facts, events=[_use(3, "order_id", "x9"), _use(8, "order_id", "o2")])
    assert (entity_recall_at_k([wrong]), forgetting([wrong])) == (0.0, 1.0)
    assert memory_step_credit(wrong, 10).sum() == 0.0
    assert KeyFact.model_validate({**fact.model_dump(), "distractors": ["o2"]}).distractors == ("o2",)


def _freshness_ref(age: float) -> float:
    if age <= 24.0:
        return 1.0
    if age >= 72.0:
        return 0.0
    return (72.0 - age) / 48.0


def test_freshness_matches_a_loop_reference() -> None:
    ages = np.array([-5.0, 0.0, 23.9, 24.0, 30.0, 48.0, 71.0, 72.0, 500.0])
    np.testing.assert_allclose(freshness(ages), [_freshness_ref(a) for a in ages])
    assert freshness(48.0) == pytest.approx(0.5)
    with pytest.raises(ValueError):
        freshness(1.0, full_h=72.0, zero_h=24.0)


def _credit_ref(ep: MemoryEpisode, num_steps: int, w: float) -> np.ndarray:
    out = [0.0] * num_steps
    for f in ep.facts:
        first = None
        for e in ep.events:
            if e.slot != f.slot or e.turn <= f.stated_turn or e.kind == "write":  # a note is no use
                continue
            other = (
                e.value not in (None, f.value) and f.distractors is not None and e.value not in f.distractors
            )
            if other:  # a use about another entity than the fact and its look-alikes
                continue
            if first is None or e.turn < first.turn or (e.turn == first.turn and e.kind == "ask"):
                first = e
        if first is None:
            turn, credit = f.needed_turn, 0.0
        elif first.kind == "ask" or first.value != f.value:
            turn, credit = first.turn, 0.0
        else:
            turn, credit = first.turn, w + (1 - w) * _freshness_ref(first.at_h - f.confirmed_at_h)
        out[min(turn, num_steps - 1)] += credit / len(ep.facts)
    return np.array(out)


def test_memory_credit_matches_a_loop_reference() -> None:
    rng = np.random.default_rng(0)
    for _ in range(30):
        facts = [
            KeyFact(
                slot=f"s{i}",
                value="v",
                stated_turn=int(st),
                needed_turn=int(st + rng.integers(0, 5)),
                confirmed_at_h=float(rng.uniform(0, 50)),
                distractors=None if rng.random() < 0.5 else ("w",),
            )
            for i, st in enumerate(rng.integers(0, 6, size=3))
        ]
        events = [
            _ask(int(rng.integers(0, 12)), f"s{rng.integers(0, 3)}")
            if rng.random() < 0.3
            else _write(int(rng.integers(0, 12)), f"s{rng.integers(0, 3)}", str(rng.choice(["v", "w"])))
            if rng.random() < 0.3
            else _use(
                int(rng.integers(0, 12)),
                f"s{rng.integers(0, 3)}",
                str(rng.choice(["v", "w", "x"])),
                at_h=float(rng.uniform(0, 150)),
            )
            for _ in range(rng.integers(0, 8))
        ]
        ep = MemoryEpisode(facts=facts, events=events)
        for w in (0.0, 0.5, 1.0):
            np.testing.assert_allclose(memory_step_credit(ep, 9, w), _credit_ref(ep, 9, w), atol=1e-6)


def test_hand_computed_credit() -> None:
    # order: right, 10 h old -> 1.0 on turn 6; address: asked again first -> 0 on turn 8. Two facts: /2.
    np.testing.assert_allclose(memory_step_credit(EP_A, 10), [0, 0, 0, 0, 0, 0, 0.5, 0, 0, 0])
    stale = MemoryEpisode(facts=EP_A.facts[:1], events=[_use(6, "order_id", "o1", at_h=48.0)])
    assert memory_step_credit(stale, 7)[6] == pytest.approx(0.5 + 0.5 * 0.5)
    assert memory_step_credit(MemoryEpisode(), 4).tolist() == [0, 0, 0, 0]
    # asking and using on the same turn: the customer was asked again, no credit
    same_turn = MemoryEpisode(facts=EP_A.facts[:1], events=[_use(6, "order_id", "o1"), _ask(6, "order_id")])
    assert memory_step_credit(same_turn, 7).sum() == 0.0
    # a memory note of the fact is no reuse: the use after it decides, and a note alone earns nothing
    noted = MemoryEpisode(
        facts=EP_A.facts[:1], events=[_write(2, "order_id", "o1"), _use(6, "order_id", "o1")]
    )
    assert memory_step_credit(noted, 7).tolist() == [0, 0, 0, 0, 0, 0, 1.0]
    only = MemoryEpisode(facts=EP_A.facts[:1], events=[_write(2, "order_id", "o1")])
    assert memory_step_credit(only, 7).sum() == 0.0
    assert (entity_recall_at_k([only]), forgetting([only])) == (0.0, 0.0)
    with pytest.raises(ValueError, match="carries the value"):
        FactEvent(turn=2, slot="order_id", kind="write")


def _record(context: dict) -> EpisodeRecord:
    return record([step() for _ in range(10)], context=context)


def test_the_layer_scores_the_facts_an_episode_carries_and_is_off_by_default() -> None:
    layer = build_layer("memory")
    assert LAYER_CLASSES["memory"].context_inputs == (CONTEXT_MEMORY_FACTS,)
    assert not default_layers()["memory"].enabled
    rec = _record({CONTEXT_MEMORY_FACTS: EP_A.to_context()})
    rec = EpisodeRecord.from_dict(rec.to_dict())  # as it travels to the reward pool
    np.testing.assert_allclose(layer.score(rec), memory_step_credit(EP_A, 10))
    assert layer.score(_record({})).tolist() == [0.0] * 10
    stale = MemoryEpisode(
        facts=EP_A.facts[:1], events=[_use(6, "order_id", "o1", at_h=100.0)]
    )  # no freshness
    stale_rec = _record({CONTEXT_MEMORY_FACTS: stale.to_context()})
    assert layer.score(stale_rec).sum() == pytest.approx(0.5)
    assert build_layer("memory", {"recall_weight": 1.0}).score(stale_rec).sum() == pytest.approx(1.0)
