"""The parse as the task an agent is given (agent mode from text): the parsed goals and request in the drawn
task's world, observed and judged by the env."""

from __future__ import annotations

import random

import numpy as np
import pytest

from agentic_ray.domains import get_domain
from agentic_ray.envs.agent_task_env import AgentTaskEnv
from agentic_ray.eval.evaluator import validation_tasks
from agentic_ray.parser.corpus import render_task
from agentic_ray.parser.train import domain_renderings
from tests.helpers.serving import validation_env

TEXT = (
    "Hi, I'm Li Wei, zip 361001. The address on order O1713810 is wrong, please send it to a parcel locker."
)


def test_given_task_keeps_the_world_and_takes_the_words(ecommerce_parser) -> None:
    p = ecommerce_parser.parse(TEXT)
    _w, drawn = get_domain("ecommerce").make_task("address_error", 3)
    given = p.given_task(drawn)
    assert [(g.id, g.skill, g.deps) for g in given.goals] == [(g.id, g.skill, g.deps) for g in p.goals]
    assert given.request.facts == {"name": "Li Wei", "zip": "361001"}
    # what the words state is the parse's; what they cannot state (ids a lookup finds) is the world's
    world = {g.id: g for g in drawn.goals}
    for g, parsed in zip(given.goals, p.goals, strict=True):
        assert g.args == {**world[g.id].args, **parsed.args} and g.numeric == world[g.id].numeric
    assert given.request.text == TEXT and given.family == "address_error"
    assert (given.seed, given.optimal_steps, given.relevant, given.extra) == (
        drawn.seed,
        drawn.optimal_steps,
        drawn.relevant,
        drawn.extra,
    )
    with pytest.raises(ValueError, match="clarification"):
        ecommerce_parser.parse("The address on my order is wrong.").given_task(drawn)
    _w, cancel = get_domain("ecommerce").make_task("cancellation", 3)
    with pytest.raises(ValueError, match="another task than this world"):
        p.given_task(cancel)
    misread = ecommerce_parser.parse(TEXT.replace("O1713810", "O9999999")).given_task(drawn)
    assert {g.id: g.args.get("order_id") for g in misread.goals}["address"] == "O9999999"


def test_a_right_parse_gives_the_policy_the_structured_goals_observation(ecommerce_parser) -> None:
    """On held-out renderings of validation tasks, every parse that fits its task's world observes exactly as
    the structured goal does at the episode's start (measured: all 27 of 30 tasks that fit, 3 per family)."""
    env, seen = AgentTaskEnv(validation_env()), AgentTaskEnv(validation_env())
    rend = domain_renderings(env.domain)
    checked = 0
    for fam, seed in validation_tasks(env.config, 1):
        _w, task = env.domain.make_task(fam, seed)
        ex = render_task(task, rend, random.Random(f"{fam}:{seed}"), "heldout")
        p = ecommerce_parser.parse(ex.turns[-1], ex.turns[:-1])
        try:
            given = p.given_task(task)
        except ValueError:  # a clarification, or a misread family
            continue
        opts = {"family": fam, "task_seed": seed}
        want, _ = env.reset(seed=1, options=opts)
        got, _ = seen.reset(seed=1, options={**opts, "task_given": lambda _drawn, t=given: t})
        assert [k for k in want if not np.array_equal(want[k], got[k])] == [], (fam, ex.turns)
        checked += 1
    assert checked >= 6
    env.close()
    seen.close()


def test_the_env_runs_the_given_task(ecommerce_parser) -> None:
    p = ecommerce_parser.parse(TEXT)
    env = AgentTaskEnv(validation_env())
    opts = {"family": "address_error", "task_seed": 3}
    env.reset(seed=1, options=opts)
    drawn_goals = env.task.goals
    env.reset(seed=1, options={**opts, "task_given": p.given_task})
    assert [g.id for g in env.task.goals] == [g.id for g in p.goals]
    assert (
        env.task.request.text == TEXT
        and env.task.request.text != get_domain("ecommerce").make_task("address_error", 3)[1].request.text
    )
    assert [g.id for g in drawn_goals] == [g.id for g in p.goals]
    assert env.task.request.mentioned == p.mentioned
    assert env.state is not None and len(env.state.goal_done) == len(p.goals)
    env.close()
