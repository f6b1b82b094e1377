"""A task's short-term window (``Task.short_term_window``): once the request has left it, the entities it names are
no longer marked as named and no goal links to them as the request's choice; they stay known. The env and a
transcript replay move it alike. On the help desk's ``lost_device`` (the request names the ticket the escalation
needs), with a window given to the task."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from agentic_ray.domains import get_domain
from agentic_ray.domains.protocol import Task
from agentic_ray.envs.agent_task_env import AgentTaskEnv, AgentTaskEnvConfig
from agentic_ray.envs.transcript import TranscriptCall, TranscriptState

EDGE = "goal__targets_ticket_id__ticket_mask"


def _play(window: int | None, steps: int) -> tuple[AgentTaskEnv, list[dict[str, np.ndarray]]]:
    env = AgentTaskEnv(AgentTaskEnvConfig(domain="helpdesk"))
    obs, _ = env.reset(
        seed=0,
        options={
            "family": "lost_device",
            "task_seed": 3,
            "task_given": lambda t: dataclasses.replace(t, short_term_window=window),
        },
    )
    out = [obs]
    for _ in range(steps):
        out.append(env.step(env.encode_action(*env.domain.expert().plan(env.view())))[0])
    return env, out


def test_the_request_leaves_the_observation_after_k_steps_and_its_entities_stay_known() -> None:
    env, obs = _play(2, 2)
    assert env.task is not None and env.knowledge is not None
    (ticket,) = env.task.request.mentioned
    flag = env.builder.node_index["ticket"][ticket.id]
    # reset and one step: the request is in the window (marked, and the escalation links to its ticket)
    assert [int(o[EDGE].sum()) for o in obs] == [1, 1, 0]
    assert [float(o["ticket_x"][flag, 0]) for o in obs] == [1.0, 1.0, 0.0]
    assert env.knowledge.knows("ticket", ticket.id) and not env.knowledge.mentioned
    _, kept = _play(None, 2)  # no window: the request stays
    assert [int(o[EDGE].sum()) for o in kept] == [1, 1, 1]


def test_a_transcript_replay_moves_the_window_like_the_env() -> None:
    env, obs = _play(2, 2)
    assert env.task is not None and env.state is not None
    calls = [
        TranscriptCall(c.skill, c.params, "OK", c.payload)  # the expert's calls all succeeded
        for c in env.state.history
    ]
    replay = TranscriptState(AgentTaskEnv(AgentTaskEnvConfig(domain="helpdesk")), env.task, calls)
    robs, _ = replay.observation()
    np.testing.assert_array_equal(robs[EDGE], obs[-1][EDGE])
    assert replay.knowledge.to_dict() == env.knowledge.to_dict()


def test_a_window_must_hold_a_turn() -> None:
    _, task = get_domain("helpdesk").make_task("lost_device", 3)
    with pytest.raises(ValueError, match="short_term_window"):
        dataclasses.replace(task, short_term_window=0)
    assert isinstance(dataclasses.replace(task, short_term_window=1), Task)
