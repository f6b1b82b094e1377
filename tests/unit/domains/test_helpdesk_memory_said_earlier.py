"""helpdesk_memory's ``ticket_said_earlier``: the caller names the ticket they mean at the start of the call, and it is
needed 8 to 9 turns later, after the short-term window has dropped the request. Through the generic env with the
real memory skills and the real embedded Qdrant."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from agentic_ray.domains import get_domain
from agentic_ray.domains.protocol import Task
from agentic_ray.envs.agent_task_env import AgentTaskEnv, AgentTaskEnvConfig
from agentic_ray.eval.memory_metrics import entity_recall_at_k, forgetting
from agentic_ray.eval.metrics import evaluate
from agentic_ray.keys import CONTEXT_MEMORY_FACTS, EPISODE_RECORD
from agentic_ray.memory.functional import memory_step_credit
from agentic_ray.memory.memory_episode import FactEvent, KeyFact, MemoryEpisode
from agentic_ray.memory.memory_skills import HIT_AGE, HIT_SCORE, SEARCH, WRITE
from agentic_ray.memory.short_term_window import DEFAULT_K
from agentic_ray.rewards.episode_record import EpisodeRecord
from agentic_ray.rewards.layers.memory_layer import MemoryLayer
from tests.helpers.memory_episodes import equal_from_window_end, run_episode, same_observation

D = get_domain("helpdesk_memory")
FAMILY = "ticket_said_earlier"


def _env(**kw: Any) -> AgentTaskEnv:
    return AgentTaskEnv(AgentTaskEnvConfig(domain="helpdesk_memory", **kw))


def _run(env: AgentTaskEnv, seed: int, given: Any = None, actions: list[Any] | None = None) -> list[Any]:
    return run_episode(env, FAMILY, seed, given, actions)


def _other_ticket_meant(task: Task) -> Task:
    """The same request, but the caller means another of the tickets they named (goals and key fact follow)."""
    meant = task.key_facts[0]["value"]
    other = next(m.id for m in task.request.mentioned if m.id != meant)
    goals = tuple(
        dataclasses.replace(g, args={**g.args, "ticket_id": other}) if "ticket_id" in g.args else g
        for g in task.goals
    )
    return dataclasses.replace(task, goals=goals, key_facts=({**task.key_facts[0], "value": other},))


def test_the_expert_writes_early_recalls_late_and_solves_every_validation_task() -> None:
    env = _env()
    records = []
    for seed in D.validation_seeds(FAMILY, 10):
        steps = _run(env, seed)
        task, (fact,) = env.task, env.task.key_facts
        assert task is not None
        skills = [info["trace"]["skill"] for _, _, info in steps[1:]]
        n_lost = sum(1 for g in task.goals if g.skill == "asset.report_lost")
        assert skills == [
            "lookup_employee_by_email" if "email" in task.request.facts else "lookup_employee_by_badge",
            WRITE,  # while the request still names the ticket
            "get_assets_for_employee",
            *["asset.report_lost"] * n_lost,
            "account.verify_identity",
            "reset_password",
            SEARCH,  # the window has dropped the request: recall
            "ticket.get",
            "ticket.set_priority",
        ]
        rec = steps[-1][2][EPISODE_RECORD]
        assert rec["completed"] and len(skills) == task.optimal_steps
        search = skills.index(SEARCH)
        assert search >= DEFAULT_K and 5 <= fact["needed_turn"] - fact["stated_turn"] <= 10
        assert steps[1 + 1][2]["trace"]["args"]["ticket_id"] == fact["value"]  # the write named the meant one
        events = rec["context"][CONTEXT_MEMORY_FACTS]["events"]
        assert [(e["turn"], e["kind"]) for e in events][:1] == [(1, "write")]
        credit = MemoryLayer().score(EpisodeRecord.from_dict(rec))  # L4: on the read, the recall's reuse
        assert credit[fact["needed_turn"]] == pytest.approx(1.0) and credit.sum() == pytest.approx(1.0)
        records.append(rec)
    m = evaluate(records)
    assert (m.completion, m.entity_recall_at_5, m.entity_recall_at_5_n, m.forgetting) == (1.0, 1.0, 10, 0.0)


@pytest.mark.parametrize("seed", [3, 8, 21])
def test_after_the_window_the_observation_does_not_say_which_named_ticket_is_meant(seed: int) -> None:
    """Two tasks that differ only in which named ticket the caller means, played with the same actions: their
    observations differ while the request is in the window, and are equal from the step it left until a tool
    result tells them apart (here: never before the recall, whose hits are the same in both, since the write
    pointed at the same node)."""
    a, b = _env(), _env()
    steps_a = _run(a, seed)
    steps_b = _run(b, seed, given=_other_ticket_meant, actions=[x for _, x, _ in steps_a[1:]])
    assert a.task is not None and b.task is not None and a.task.key_facts != b.task.key_facts

    assert not same_observation(
        steps_a[0][0], steps_b[0][0]
    )  # in the window, the goal links to the meant ticket
    compared = equal_from_window_end(steps_a, steps_b, DEFAULT_K)
    assert compared >= 3  # the last intermediate steps and the recall


def test_memory_finds_the_meant_ticket_only_if_it_was_written_while_named() -> None:
    seed = D.validation_seeds(FAMILY, 1)[0]
    seen = {}
    for off in ([], [WRITE]):
        env = _env(skills_off=off)
        _run(env, seed)
        assert env.knowledge is not None and env.task is not None
        k, meant = env.knowledge, env.task.key_facts[0]["value"]
        hits = {t: k.fields("ticket", t) for t in k.ids("ticket") if HIT_SCORE in k.fields("ticket", t)}
        seen[bool(off)] = (meant, hits)
    meant, hits = seen[False]
    best = max(hits, key=lambda t: hits[t][HIT_SCORE])
    assert best == meant and hits[meant][HIT_AGE] < 1.0 < min(
        h[HIT_AGE] for t, h in hits.items() if t != meant
    )
    meant, hits = seen[
        True
    ]  # without the write: the earlier calls' tickets only, the meant one is not among them
    assert hits and meant not in hits


def test_er5_and_forgetting_on_hand_built_episodes_of_the_family() -> None:
    """A wrong guess among the named tickets after the window is forgetting and no recall; a right reuse too late
    is no recall but not forgetting; asking the caller again is forgetting."""
    env = _env()
    seed = D.validation_seeds(FAMILY, 2)[1]
    expert = _run(env, seed)
    assert env.task is not None
    fact = KeyFact.model_validate(env.task.key_facts[0])
    wrong = next(m.id for m in env.task.request.mentioned if m.id != fact.value)
    # the same actions up to the recall, then the wrong ticket: read and re-prioritised
    actions = [
        x
        for _, x, info in expert[1:]
        if info["trace"]["skill"] not in (SEARCH, "ticket.get", "ticket.set_priority")
    ]
    _run(env, seed, actions=actions)
    assert env.knowledge is not None
    _, _, _, _, info = env.step(env.encode_action("ticket.get", {"ticket_id": wrong}))
    assert info["trace"]["result_code"] == "OK"
    prio = next(g for g in env.task.goals if g.skill == "ticket.set_priority").args["priority"]
    _, _, term, trunc, info = env.step(
        env.encode_action("ticket.set_priority", {"ticket_id": wrong, "priority": prio})
    )
    while not (term or trunc):  # run out the budget
        _, _, term, trunc, info = env.step(env.encode_action("ticket.get", {"ticket_id": wrong}))
    m_expert = evaluate([expert[-1][2][EPISODE_RECORD]])
    m_guess = evaluate([info[EPISODE_RECORD]])
    assert (m_expert.entity_recall_at_5, m_expert.forgetting) == (1.0, 0.0)
    assert (m_guess.completion, m_guess.entity_recall_at_5, m_guess.forgetting) == (0.0, 0.0, 1.0)
    written = FactEvent(turn=1, slot=fact.slot, kind="write", value=fact.value)
    late = MemoryEpisode(
        facts=[fact],
        events=[written, FactEvent(turn=fact.needed_turn + 6, slot=fact.slot, kind="use", value=fact.value)],
    )
    asked = MemoryEpisode(
        facts=[fact],
        events=[
            FactEvent(turn=fact.needed_turn, slot=fact.slot, kind="ask"),
            FactEvent(turn=fact.needed_turn + 1, slot=fact.slot, kind="use", value=fact.value),
        ],
    )
    assert (entity_recall_at_k([late]), forgetting([late])) == (0.0, 0.0)
    # a right note and then a wrong reuse: no recall, forgetting, and no L4 credit for the note
    noted_wrong = MemoryEpisode(
        facts=[fact],
        events=[written, FactEvent(turn=fact.needed_turn, slot=fact.slot, kind="use", value=wrong)],
    )
    assert (entity_recall_at_k([noted_wrong]), forgetting([noted_wrong])) == (0.0, 1.0)
    assert memory_step_credit(noted_wrong, fact.needed_turn + 2).sum() == 0.0
    assert (entity_recall_at_k([asked]), forgetting([asked])) == (1.0, 1.0)
